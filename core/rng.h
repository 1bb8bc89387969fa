// Counter-based random numbers: Philox-4x32-10 (Salmon et al., SC'11).
//
// Every random draw in fedpriv comes from one run seed. A stream is named by
// (seed, purpose, round, client); within it, block i is philox(counter, key) with
//   key     = seed (64 bits),
//   counter = { i & 0xffffffff, (i >> 32) & 0xffff | purpose << 16, round, client }.
// So a draw depends only on what it is for and its index, never on thread count,
// call order or backend: the CUDA kernels evaluate the same function per element.
#ifndef FEDPRIV_CORE_RNG_H
#define FEDPRIV_CORE_RNG_H

#include <stdint.h>

// What a stream is for. Never reorder: values are part of the reproducibility contract.
typedef enum {
    RNG_INIT = 1,         // model initialisation
    RNG_PARTITION = 2,    // splitting data among clients
    RNG_CLIENT_SAMPLE = 3,// which clients take part in a round
    RNG_SHUFFLE = 4,      // minibatch order in local training
    RNG_DEFENSE = 5,      // a defense's noise (element-indexed)
    RNG_DEFENSE_AUX = 6,  // a defense's other choices (self-sampling, thresholds)
    RNG_ATTACK = 7,       // an attack's random starts, splits, shadow data
    RNG_AUDIT = 8,        // fedpriv audit
    RNG_DATA = 9,         // synthetic data generators
    RNG_TEST = 10,        // unit tests
    RNG_SHADOW = 11,      // shadow-model training (attacks)
} RngPurpose;

typedef struct RngStream {
    uint32_t key[2];
    uint32_t purpose, round, client;
    uint64_t next;        // next block index for sequential draws
    uint32_t buf[4];
    int buf_left;         // words of buf not yet used
    // Secure streams (core/rng_secure.h): rng_block computes ChaCha20 under this OS key.
    uint32_t secure;      // 1 for a secure stream, else 0
    uint32_t secure_key[8];
} RngStream;

// The raw generator: 4 words out for a 4-word counter and 2-word key.
void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

RngStream rng_stream(uint64_t seed, RngPurpose purpose, uint32_t round, uint32_t client);

// Stateless: block `index` of the stream (4 independent 32-bit words).
void rng_block(const RngStream *s, uint64_t index, uint32_t out[4]);

// Uniform in the open interval (0,1) from one word (24 bits) or two words (53 bits).
static inline float rng_u01f(uint32_t w) { return ((float)(w >> 8) + 0.5f) * (1.0f / 16777216.0f); }
static inline double rng_u01d(uint32_t hi, uint32_t lo) {
    return ((double)(((uint64_t)(hi >> 5) << 26) | (lo >> 6)) + 0.5) * (1.0 / 9007199254740992.0);
}

// A sub-stream of s: the same seed, round and client, its purpose with bit 12 + tag set
// (purposes stay below 2^12; the counter holds 16 bits of it), for a procedure that
// indexes more than one sequence of blocks alike (the safe Gaussian's, defenses/dp/dgauss.h).
#define RNG_SUBSTREAM_SHIFT 12
static inline uint32_t rng_substream_purpose(uint32_t purpose, unsigned tag) {
    return purpose | 1u << (RNG_SUBSTREAM_SHIFT + tag);
}
static inline RngStream rng_substream(const RngStream *s, unsigned tag) {
    RngStream t = *s;
    t.purpose = rng_substream_purpose(s->purpose, tag);
    t.next = 0;
    t.buf_left = 0;
    return t;
}
// rng_block(&rng_substream(s, tag), index, out), without copying the stream (the per-element
// paths call it once or twice an element).
void rng_substream_block(const RngStream *s, unsigned tag, uint64_t index, uint32_t out[4]);

// Element-indexed draws (one block per index): these are what defenses use, so that
// the noise on parameter i is the same however the loop is split.
double rng_uniform_at(const RngStream *s, uint64_t index);      // (0,1), words 0-1
double rng_normal_at(const RngStream *s, uint64_t index);       // N(0,1), Box-Muller on words 0-3
double rng_laplace_at(const RngStream *s, uint64_t index);      // Laplace(0,1), words 0-1

// Sequential draws (consume the stream in order).
uint32_t rng_next_u32(RngStream *s);
double rng_next_uniform(RngStream *s);          // (0,1), 53 bits
double rng_next_normal(RngStream *s);           // N(0,1)
double rng_next_laplace(RngStream *s);          // Laplace(0,1)
uint32_t rng_next_below(RngStream *s, uint32_t n); // uniform integer in [0,n), unbiased
double rng_next_gamma(RngStream *s, double shape); // Gamma(shape,1) (Marsaglia-Tsang), for Dirichlet

// Fisher-Yates shuffle of idx[0..n).
void rng_shuffle_u32(RngStream *s, uint32_t *idx, uint32_t n);

#endif
