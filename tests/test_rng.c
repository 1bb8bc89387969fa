// Philox-4x32-10 known answers (Random123 kat_vectors) and the derived draws.
#include <check.h>
#include <math.h>

#include <string.h>

#include "core/philox.h"
#include "core/rng.h"

START_TEST(philox_known_answers) {
    struct { uint32_t ctr[4], key[2], out[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        philox4x32_10(kat[i].ctr, kat[i].key, out);
        for (int j = 0; j < 4; j++)
            ck_assert_uint_eq(out[j], kat[i].out[j]);
    }
}
END_TEST

// The 16-lane Philox (core/philox.h) reproduces rng_block, including across a 2^32-block
// boundary, and the interleaves put words in element order.
START_TEST(philox16_matches_rng_block) {
    RngStream s = rng_stream(0x123456789abcdefull, RNG_DEFENSE, 17, 5);
    for (uint64_t base = 0; base < (3ull << 32); base += (1ull << 32) - 16) {
        Philox16 p;
        philox16_prepare(&p, s.key[0], s.key[1], s.purpose, s.round, s.client, base >> 32);
        PhiloxU32x16 w[4];
        philox16_blocks(&p, (uint32_t)base, w);
        uint32_t e4[64], e2[32];
        philox16_interleave4(w, e4);
        philox16_interleave2(&w[1], &w[3], e2);
        for (int l = 0; l < 16; l++) {
            uint32_t ref[4];
            rng_block(&s, base + (uint64_t)l, ref);
            for (int j = 0; j < 4; j++) {
                ck_assert_uint_eq(w[j][l], ref[j]);
                ck_assert_uint_eq(e4[4 * l + j], ref[j]);
            }
            ck_assert_uint_eq(e2[2 * l], ref[1]);
            ck_assert_uint_eq(e2[2 * l + 1], ref[3]);
        }
    }
}
END_TEST

START_TEST(streams_are_independent_of_order) {
    RngStream a = rng_stream(42, RNG_DEFENSE, 3, 7);
    double x5 = rng_normal_at(&a, 5);
    for (int i = 0; i < 10; i++)
        (void)rng_normal_at(&a, (uint64_t)i * 13);
    ck_assert(rng_normal_at(&a, 5) == x5);
    RngStream b = rng_stream(42, RNG_DEFENSE, 3, 8);
    ck_assert(rng_normal_at(&b, 5) != x5);
    RngStream c = rng_stream(43, RNG_DEFENSE, 3, 7);
    ck_assert(rng_normal_at(&c, 5) != x5);
}
END_TEST

// Moments of 10^6 draws within 6 standard errors of the law's.
START_TEST(normal_and_laplace_moments) {
    RngStream s = rng_stream(1, RNG_TEST, 0, 0);
    const int n = 1000000;
    double m = 0, v = 0, lm = 0, lv = 0;
    for (int i = 0; i < n; i++) {
        double z = rng_normal_at(&s, (uint64_t)i), l = rng_laplace_at(&s, (uint64_t)i + n);
        m += z;
        v += z * z;
        lm += l;
        lv += l * l;
    }
    m /= n;
    v /= n;
    lm /= n;
    lv /= n;
    // N(0,1): sd of the mean 1/sqrt(n); of the mean square sqrt(2/n).
    ck_assert_double_le(fabs(m), 6 / sqrt(n));
    ck_assert_double_le(fabs(v - 1), 6 * sqrt(2.0 / n));
    // Laplace(0,1): variance 2, E[x^4] = 24 so sd of the mean square sqrt((24-4)/n).
    ck_assert_double_le(fabs(lm), 6 * sqrt(2.0 / n));
    ck_assert_double_le(fabs(lv - 2), 6 * sqrt(20.0 / n));
}
END_TEST

START_TEST(below_is_uniform) {
    RngStream s = rng_stream(9, RNG_TEST, 1, 0);
    int counts[7] = {0};
    const int n = 700000;
    for (int i = 0; i < n; i++)
        counts[rng_next_below(&s, 7)]++;
    double p = 1.0 / 7, sd = sqrt(n * p * (1 - p));
    for (int k = 0; k < 7; k++)
        ck_assert_double_le(fabs(counts[k] - n * p), 6 * sd);
}
END_TEST

Suite *suite_rng(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("philox");
    tcase_add_test(tc, philox_known_answers);
    tcase_add_test(tc, philox16_matches_rng_block);
    tcase_add_test(tc, streams_are_independent_of_order);
    tcase_add_test(tc, normal_and_laplace_moments);
    tcase_add_test(tc, below_is_uniform);
    suite_add_tcase(s, tc);
    return s;
}
