// ChaCha20 keyed from getrandom(2): the secure noise source (see core/rng_secure.h and
// docs/security.md). The block function follows RFC 8439 §2.1-2.3 word for word and is
// checked against the RFC's test vector in tests/test_hardening.c.
#include "core/rng_secure.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#define ROTL32(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
#define QUARTER(a, b, c, d)                                                                                  \
    do {                                                                                                     \
        a += b; d ^= a; d = ROTL32(d, 16);                                                                   \
        c += d; b ^= c; b = ROTL32(b, 12);                                                                   \
        a += b; d ^= a; d = ROTL32(d, 8);                                                                    \
        c += d; b ^= c; b = ROTL32(b, 7);                                                                    \
    } while (0)

void chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[16]) {
    // "expand 32-byte k", key, counter, nonce (RFC 8439 §2.3).
    uint32_t in[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u, key[0], key[1], key[2], key[3],
                       key[4],      key[5],      key[6],      key[7],      counter, nonce[0], nonce[1], nonce[2]};
    uint32_t x[16];
    memcpy(x, in, sizeof x);
    for (int r = 0; r < 10; r++) { // 20 rounds: a column round and a diagonal round each
        QUARTER(x[0], x[4], x[8], x[12]);
        QUARTER(x[1], x[5], x[9], x[13]);
        QUARTER(x[2], x[6], x[10], x[14]);
        QUARTER(x[3], x[7], x[11], x[15]);
        QUARTER(x[0], x[5], x[10], x[15]);
        QUARTER(x[1], x[6], x[11], x[12]);
        QUARTER(x[2], x[7], x[8], x[13]);
        QUARTER(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; i++)
        out[i] = x[i] + in[i];
}

FpStatus rng_secure_fill(void *buf, size_t n, FpError *err) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return fp_fail(err, FP_EBACKEND, "secure RNG: getrandom failed: %s", strerror(errno));
        }
        p += got;
        n -= (size_t)got;
    }
    return FP_OK;
}

FpStatus rng_secure_check(FpError *err) {
    uint32_t probe[8];
    FpStatus st = rng_secure_fill(probe, sizeof probe, err);
    memset(probe, 0, sizeof probe);
    return st;
}

int rng_secure_purpose(RngPurpose purpose) {
    return purpose == RNG_DEFENSE || purpose == RNG_DEFENSE_AUX || purpose == RNG_CLIENT_SAMPLE;
}

void rng_secure_block(const RngStream *s, uint64_t index, uint32_t out[4]) {
    uint64_t blk = index >> 2;
    // The purpose keeps a stream's sub-streams (rng_substream), which share its key, apart.
    uint32_t nonce[3] = {(uint32_t)(blk >> 32) | s->purpose << 16, s->round, s->client}, w[16];
    chacha20_block(s->secure_key, (uint32_t)blk, nonce, w);
    memcpy(out, w + 4 * (index & 3u), 4 * sizeof(uint32_t));
}
