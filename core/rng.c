#include "core/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/philox.h"
#include "core/rng_secure.h"

void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    philox_block(ctr, key[0], key[1], out);
}

RngStream rng_stream(uint64_t seed, RngPurpose purpose, uint32_t round, uint32_t client) {
    RngStream s = {0};
    // Secure runs (core/rng_secure.h): the seed's flag bit asks for a fresh OS key on
    // privacy-relevant streams. The run checked getrandom up front (rng_secure_check);
    // if it fails now, stopping beats drawing predictable noise.
    if (seed & RNG_SEED_SECURE) {
        seed &= ~RNG_SEED_SECURE;
        if (rng_secure_purpose(purpose)) {
            FpError err = {0};
            if (rng_secure_fill(s.secure_key, sizeof s.secure_key, &err) != FP_OK) {
                fprintf(stderr, "fedpriv: %s\n", err.msg);
                abort();
            }
            s.secure = 1;
        }
    }
    s.key[0] = (uint32_t)seed;
    s.key[1] = (uint32_t)(seed >> 32);
    s.purpose = (uint32_t)purpose;
    s.round = round;
    s.client = client;
    return s;
}

// Block `index` of s's Philox sequence with counter purpose `purpose`.
static inline void philox_stream_block(const RngStream *s, uint32_t purpose, uint64_t index, uint32_t out[4]) {
    uint32_t ctr[4];
    philox_counter(index, purpose, s->round, s->client, ctr);
    philox_block(ctr, s->key[0], s->key[1], out);
}

void rng_block(const RngStream *s, uint64_t index, uint32_t out[4]) {
    if (s->secure) { // ChaCha20 under the stream's OS key (core/rng_secure.h)
        rng_secure_block(s, index, out);
        return;
    }
    philox_stream_block(s, s->purpose, index, out);
}

void rng_substream_block(const RngStream *s, unsigned tag, uint64_t index, uint32_t out[4]) {
    if (s->secure) {
        RngStream t = rng_substream(s, tag);
        rng_secure_block(&t, index, out);
        return;
    }
    philox_stream_block(s, rng_substream_purpose(s->purpose, tag), index, out);
}

double rng_uniform_at(const RngStream *s, uint64_t index) {
    uint32_t w[4];
    rng_block(s, index, w);
    return rng_u01d(w[0], w[1]);
}

// Box-Muller in double precision: on both backends the float result then agrees
// (double log/cos errors are far below a float ulp).
static double box_muller(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3) {
    double u1 = rng_u01d(w0, w1), u2 = rng_u01d(w2, w3);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double rng_normal_at(const RngStream *s, uint64_t index) {
    uint32_t w[4];
    rng_block(s, index, w);
    return box_muller(w[0], w[1], w[2], w[3]);
}

// Laplace(0,1) by inversion: u in (0,1), x = -sign(u-1/2) ln(1 - 2|u-1/2|).
static double laplace_from_u(double u) {
    double d = u - 0.5;
    return d < 0 ? log1p(2.0 * d) : -log1p(-2.0 * d);
}

double rng_laplace_at(const RngStream *s, uint64_t index) {
    return laplace_from_u(rng_uniform_at(s, index));
}

uint32_t rng_next_u32(RngStream *s) {
    if (s->buf_left == 0) {
        rng_block(s, s->next++, s->buf);
        s->buf_left = 4;
    }
    return s->buf[4 - s->buf_left--];
}

double rng_next_uniform(RngStream *s) {
    uint32_t hi = rng_next_u32(s);
    uint32_t lo = rng_next_u32(s);
    return rng_u01d(hi, lo);
}

double rng_next_normal(RngStream *s) {
    uint32_t w0 = rng_next_u32(s), w1 = rng_next_u32(s), w2 = rng_next_u32(s), w3 = rng_next_u32(s);
    return box_muller(w0, w1, w2, w3);
}

double rng_next_laplace(RngStream *s) { return laplace_from_u(rng_next_uniform(s)); }

uint32_t rng_next_below(RngStream *s, uint32_t n) {
    if (n <= 1)
        return 0;
    // Lemire's nearly-divisionless method with rejection: exactly uniform.
    uint64_t m = (uint64_t)rng_next_u32(s) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)rng_next_u32(s) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

double rng_next_gamma(RngStream *s, double shape) {
    if (shape < 1.0) {
        // Gamma(a) = Gamma(a+1) * U^(1/a)
        double g = rng_next_gamma(s, shape + 1.0);
        return g * pow(rng_next_uniform(s), 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_next_normal(s), v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = rng_next_uniform(s);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

void rng_shuffle_u32(RngStream *s, uint32_t *idx, uint32_t n) {
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = rng_next_below(s, i);
        uint32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}
