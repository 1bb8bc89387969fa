// datasets/partition.c: the IID, Dirichlet(alpha) and shard partitioners: coverage,
// disjointness, sizes, determinism for a seed, bad parameters, and Dirichlet label skew
// against its closed form (mean Herfindahl index per class) and across alphas.
// (The suite's name contains "datasets", so FP_TEST_SUITE=datasets runs it too.)
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"

static void expect_fail(FpStatus got, FpStatus want, const FpError *err, const char *needle, const char *needle2) {
    ck_assert_msg(got == want, "status %s, expected %s (%s)", fp_status_name(got), fp_status_name(want), err->msg);
    ck_assert_msg(strchr(err->msg, '\n') == NULL, "message is not one line: %s", err->msg);
    if (needle)
        ck_assert_msg(strstr(err->msg, needle) != NULL, "message \"%s\" lacks \"%s\"", err->msg, needle);
    if (needle2)
        ck_assert_msg(strstr(err->msg, needle2) != NULL, "message \"%s\" lacks \"%s\"", err->msg, needle2);
}

// Every index 0..n-1 exactly once, each client non-empty and sorted.
static void assert_covers(const Partition *p, int n) {
    FpError err = {0};
    ck_assert_msg(partition_validate(p, n, &err) == FP_OK, "%s", err.msg);
    long total = 0;
    for (int k = 0; k < p->n_clients; k++) {
        ck_assert_int_ge(p->count[k], 1);
        for (int i = 1; i < p->count[k]; i++)
            ck_assert_uint_lt(p->idx[k][i - 1], p->idx[k][i]);
        total += p->count[k];
    }
    ck_assert_int_eq(total, n);
}

static int same_partition(const Partition *a, const Partition *b) {
    if (a->n_clients != b->n_clients)
        return 0;
    for (int k = 0; k < a->n_clients; k++)
        if (a->count[k] != b->count[k] || memcmp(a->idx[k], b->idx[k], (size_t)a->count[k] * 4) != 0)
            return 0;
    return 1;
}

START_TEST(iid_partition) {
    FpError err = {0};
    Partition *p = NULL, *q = NULL, *r = NULL;
    RngStream s1 = rng_stream(7, RNG_PARTITION, 0, 0), s2 = rng_stream(7, RNG_PARTITION, 0, 0),
              s3 = rng_stream(8, RNG_PARTITION, 0, 0);
    ck_assert_int_eq(partition_iid(1003, 10, &s1, &p, &err), FP_OK);
    ck_assert_int_eq(partition_iid(1003, 10, &s2, &q, &err), FP_OK);
    ck_assert_int_eq(partition_iid(1003, 10, &s3, &r, &err), FP_OK);
    assert_covers(p, 1003);
    for (int k = 0; k < 10; k++)
        ck_assert_int_eq(p->count[k], k < 3 ? 101 : 100);
    ck_assert(same_partition(p, q));
    ck_assert(!same_partition(p, r));
    // Not the identity cut: client 0 should not hold 0..100.
    ck_assert(p->idx[0][p->count[0] - 1] != (uint32_t)(p->count[0] - 1));
    partition_free(p);
    partition_free(q);
    partition_free(r);
    expect_fail(partition_iid(5, 6, &s1, &p, &err), FP_EPARAM, &err, "6 clients", NULL);
    expect_fail(partition_iid(5, 0, &s1, &p, &err), FP_EPARAM, &err, NULL, NULL);
    expect_fail(partition_iid(5, 2, NULL, &p, &err), FP_EPARAM, &err, NULL, NULL);
    ck_assert(p == NULL);
    // partition_validate catches a repeat and an out-of-range index.
    int cnt[2] = {2, 1};
    Partition *h = partition_create(2, cnt, &err);
    h->idx[0][0] = 0, h->idx[0][1] = 1, h->idx[1][0] = 1;
    expect_fail(partition_validate(h, 3, &err), FP_EPARAM, &err, "sample 1 given twice", NULL);
    h->idx[1][0] = 3;
    expect_fail(partition_validate(h, 3, &err), FP_EPARAM, &err, "index 3", NULL);
    partition_free(h);
}
END_TEST

static int32_t *make_labels(int n_classes, int per_class) {
    int32_t *y = malloc((size_t)n_classes * per_class * sizeof *y);
    for (int i = 0; i < n_classes * per_class; i++)
        y[i] = (int32_t)((i * 7919L) % n_classes); // classes interleaved, each per_class times
    return y;
}

// Mean over clients of the total-variation distance between the client's label
// histogram and the global one (uniform here): 0 for IID, near 1 - 1/K when skewed.
static double mean_tv(const Partition *p, const int32_t *y, int n_classes) {
    double tv = 0;
    for (int k = 0; k < p->n_clients; k++) {
        double h[64] = {0};
        for (int i = 0; i < p->count[k]; i++)
            h[y[p->idx[k][i]]] += 1.0 / p->count[k];
        for (int c = 0; c < n_classes; c++)
            tv += 0.5 * fabs(h[c] - 1.0 / n_classes) / p->n_clients;
    }
    return tv;
}

START_TEST(dirichlet_partition) {
    FpError err = {0};
    int K = 10, per = 600, n = K * per;
    int32_t *y = make_labels(K, per);
    Partition *p = NULL, *q = NULL;
    RngStream s1 = rng_stream(11, RNG_PARTITION, 0, 0), s2 = rng_stream(11, RNG_PARTITION, 0, 0);
    ck_assert_int_eq(partition_dirichlet(y, n, K, 20, 0.5, &s1, &p, &err), FP_OK);
    ck_assert_int_eq(partition_dirichlet(y, n, K, 20, 0.5, &s2, &q, &err), FP_OK);
    assert_covers(p, n);
    ck_assert(same_partition(p, q));
    partition_free(p);
    partition_free(q);
    // Tiny alpha and many clients: most classes go to few clients, yet nobody is empty.
    RngStream s3 = rng_stream(12, RNG_PARTITION, 0, 0);
    ck_assert_int_eq(partition_dirichlet(y, n, K, 200, 0.01, &s3, &p, &err), FP_OK);
    assert_covers(p, n);
    partition_free(p);
    RngStream s4 = rng_stream(13, RNG_PARTITION, 0, 0);
    ck_assert_int_eq(partition_dirichlet(y, 30, K, 30, 1e-6, &s4, &p, &err), FP_OK);
    assert_covers(p, 30);
    partition_free(p);
    // Skew grows as alpha shrinks (mean TV distance from the global label mix).
    double alphas[4] = {100, 1, 0.1, 0.01}, tv[4];
    for (int a = 0; a < 4; a++) {
        RngStream s = rng_stream(21, RNG_PARTITION, 0, 0);
        ck_assert_int_eq(partition_dirichlet(y, n, K, 20, alphas[a], &s, &p, &err), FP_OK);
        tv[a] = mean_tv(p, y, K);
        printf("dirichlet alpha=%g: mean label TV distance %.3f\n", alphas[a], tv[a]);
        partition_free(p);
    }
    for (int a = 1; a < 4; a++)
        ck_assert_double_gt(tv[a], tv[a - 1]);
    ck_assert_double_lt(tv[0], 0.1);
    ck_assert_double_gt(tv[3], 0.7);
    // Bad input.
    expect_fail(partition_dirichlet(y, n, K, 20, 0.0, &s1, &p, &err), FP_EPARAM, &err, "alpha", NULL);
    expect_fail(partition_dirichlet(y, n, K, 20, NAN, &s1, &p, &err), FP_EPARAM, &err, "alpha", NULL);
    y[5] = K;
    expect_fail(partition_dirichlet(y, n, K, 20, 1.0, &s1, &p, &err), FP_EPARAM, &err, "sample 5", NULL);
    expect_fail(partition_dirichlet(y, 3, K, 4, 1.0, &s1, &p, &err), FP_EPARAM, &err, NULL, NULL);
    expect_fail(partition_dirichlet(NULL, n, K, 4, 1.0, &s1, &p, &err), FP_EPARAM, &err, NULL, NULL);
    ck_assert(p == NULL);
    free(y);
}
END_TEST

// Per class, the shares p ~ Dir(alpha·1_M) over M clients have E[sum_k p_k^2] =
// (alpha+1)/(M·alpha+1). The mean Herfindahl index over many classes must match
// within 6 standard errors (estimated from the classes themselves) plus the rounding
// of shares to counts: |count/n_c - p_k| <= 1/n_c gives at most 2/n_c + M/n_c^2.
START_TEST(dirichlet_matches_closed_form) {
    FpError err = {0};
    int C = 200, per = 500, M = 20, n = C * per;
    int32_t *y = make_labels(C, per);
    double alphas[3] = {10, 1, 0.1};
    for (int a = 0; a < 3; a++) {
        RngStream s = rng_stream(5, RNG_PARTITION, 0, 0);
        Partition *p = NULL;
        ck_assert_int_eq(partition_dirichlet(y, n, C, M, alphas[a], &s, &p, &err), FP_OK);
        assert_covers(p, n);
        double *cnt = calloc((size_t)C * M, sizeof *cnt);
        for (int k = 0; k < M; k++)
            for (int i = 0; i < p->count[k]; i++)
                cnt[(size_t)y[p->idx[k][i]] * M + k] += 1;
        double sum = 0, sum2 = 0;
        for (int c = 0; c < C; c++) {
            double h = 0;
            for (int k = 0; k < M; k++)
                h += (cnt[c * M + k] / per) * (cnt[c * M + k] / per);
            sum += h;
            sum2 += h * h;
        }
        double mean = sum / C, sd = sqrt(fmax(sum2 / C - mean * mean, 0) * C / (C - 1));
        double expect = (alphas[a] + 1) / (M * alphas[a] + 1);
        double tol = 6 * sd / sqrt(C) + 2.0 / per + (double)M / per / per;
        printf("dirichlet alpha=%g: mean HHI %.4f, expected %.4f, tolerance %.4f\n", alphas[a], mean, expect, tol);
        ck_assert_double_le(fabs(mean - expect), tol);
        free(cnt);
        partition_free(p);
    }
    free(y);
}
END_TEST

START_TEST(shards_partition) {
    FpError err = {0};
    int K = 10, per = 100, n = K * per;
    int32_t *y = make_labels(K, per);
    Partition *p = NULL, *q = NULL;
    RngStream s1 = rng_stream(3, RNG_PARTITION, 0, 0), s2 = rng_stream(3, RNG_PARTITION, 0, 0);
    // 50 clients x 2 shards = 100 shards of 10, each inside one class.
    ck_assert_int_eq(partition_shards(y, n, 50, 2, &s1, &p, &err), FP_OK);
    ck_assert_int_eq(partition_shards(y, n, 50, 2, &s2, &q, &err), FP_OK);
    assert_covers(p, n);
    ck_assert(same_partition(p, q));
    int multi = 0;
    for (int k = 0; k < 50; k++) {
        ck_assert_int_eq(p->count[k], 20);
        int seen[10] = {0}, distinct = 0;
        for (int i = 0; i < p->count[k]; i++)
            distinct += !seen[y[p->idx[k][i]]]++;
        ck_assert_int_le(distinct, 2);
        multi += distinct == 2;
    }
    ck_assert_int_gt(multi, 0); // the shards were dealt at random, not in order
    partition_free(p);
    partition_free(q);
    // Uneven sizes: nothing dropped, shard sizes differ by at most one.
    RngStream s3 = rng_stream(4, RNG_PARTITION, 0, 0);
    ck_assert_int_eq(partition_shards(y, 997, 7, 3, &s3, &p, &err), FP_OK);
    assert_covers(p, 997);
    for (int k = 0; k < 7; k++)
        ck_assert(p->count[k] >= 3 * (997 / 21) && p->count[k] <= 3 * (997 / 21 + 1));
    partition_free(p);
    expect_fail(partition_shards(y, 10, 4, 3, &s1, &p, &err), FP_EPARAM, &err, "12", NULL);
    expect_fail(partition_shards(y, n, 4, 0, &s1, &p, &err), FP_EPARAM, &err, NULL, NULL);
    y[2] = -1;
    expect_fail(partition_shards(y, n, 4, 2, &s1, &p, &err), FP_EPARAM, &err, "negative", NULL);
    ck_assert(p == NULL);
    free(y);
}
END_TEST

Suite *suite_datasets_partition(void) {
    Suite *s = suite_create("datasets_partition");
    TCase *tc = tcase_create("partition");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, iid_partition);
    tcase_add_test(tc, dirichlet_partition);
    tcase_add_test(tc, dirichlet_matches_closed_form);
    tcase_add_test(tc, shards_partition);
    suite_add_tcase(s, tc);
    return s;
}
