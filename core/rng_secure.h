// The secure noise source ("rng": "secure" in a config, `fedpriv train --secure-rng`):
// ChaCha20 (RFC 8439) keyed with 256 fresh bits from getrandom(2) per stream.
//
// How it plugs in (docs/security.md has the reasoning): a run seed with bit 63 set,
// RNG_SEED_SECURE, marks a secure run. rng_stream (core/rng.c) clears the bit, and for
// the privacy-relevant purposes (rng_secure_purpose: a defense's noise and choices,
// which clients take part) gives the stream a fresh OS key; rng_block then computes
// ChaCha20 instead of Philox, and every draw built on it (rng_*_at, rng_next_*) follows.
// Other purposes (initialisation, partition, minibatch order, attacks) keep the plain
// seed, so a secure run trains on the same data split and shuffles as a Philox run; its
// noise cannot be reproduced or predicted from the seed, which is the point.
//
// Within one secure stream draws are still element-indexed (block i is a pure function
// of the stream's key and i), so the thread-count independence of a defense holds; two
// streams made for the same (purpose, round, client) differ.
#ifndef FEDPRIV_CORE_RNG_SECURE_H
#define FEDPRIV_CORE_RNG_SECURE_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"

// The flag bit of a run seed (config seeds are < 2^53, so it never clashes).
#define RNG_SEED_SECURE ((uint64_t)1 << 63)

// The ChaCha20 block function (RFC 8439 §2.3): 16 output words for a 256-bit key,
// a 32-bit block counter and a 96-bit nonce.
void chacha20_block(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[16]);

// Fills buf with n bytes from getrandom(2) (blocking until the kernel's pool is
// seeded; retried on EINTR). FP_EBACKEND naming the errno when the OS cannot.
FpStatus rng_secure_fill(void *buf, size_t n, FpError *err);

// Whether getrandom works here: call once before a secure run so that a system
// without it fails with a clear error up front instead of inside rng_stream.
FpStatus rng_secure_check(FpError *err);

// 1 when streams of this purpose carry privacy-relevant randomness and so become
// secure in a secure run: RNG_DEFENSE, RNG_DEFENSE_AUX, RNG_CLIENT_SAMPLE.
int rng_secure_purpose(RngPurpose purpose);

// Block `index` of a secure stream: words 4(i mod 4) .. 4(i mod 4)+3 of ChaCha20 block
// i / 4 (the block number split over the counter and the first nonce word's low 16 bits,
// the purpose in its high 16; nonce words 1-2 are the round and client, for domain
// separation only).
void rng_secure_block(const RngStream *s, uint64_t index, uint32_t out[4]);

#endif
