// Reference models of the membership attacks: the on-disk cache (attacks/refcache.h:
// round trip, prefix hits, damaged entries, racing writers, with a control that shows a
// torn entry would be seen), the LiRA and RMIA scores against direct formulas, RMIA and
// online LiRA end to end on the synthetic overfit target (and on an untrained one, where
// they must find nothing), sharing between attacks, reruns and matrix cells (models
// trained counted), and bad configs.
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attacks/refcache.h"
#include "attacks/target.h"
#include "defenses/registry.h"
#include "core/jsonv.h"
#include "runner/matrix.h"
#include "tests/cli_run.h"
#include "tests/mia_fixture.h"

// ---------------------------------------------------------------------------------
// The on-disk cache

// An entry of n queries × C classes with recognisable values.
typedef struct {
    int n, C;
    uint32_t *q;
    uint64_t *c;
    float *z;
} Entry;

static Entry entry_make(int n, int C, float shift) {
    Entry e = {n, C, malloc(sizeof(uint32_t) * n), malloc(sizeof(uint64_t) * n), malloc(sizeof(float) * n * C)};
    for (int i = 0; i < n; i++) {
        e.q[i] = (uint32_t)(7 * i + 3);
        e.c[i] = refcache_hash(REFCACHE_HASH_START, &e.q[i], 4);
        for (int k = 0; k < C; k++)
            e.z[i * C + k] = shift + 0.25f * i - 0.5f * k;
    }
    return e;
}

static void entry_free(Entry *e) {
    free(e->q);
    free(e->c);
    free(e->z);
}

static size_t file_bytes(const char *path, unsigned char **data) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(*data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return (size_t)n;
}

static void file_write(const char *path, const unsigned char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

// Files in dir whose name contains needle.
static int count_files(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strstr(de->d_name, needle) != NULL;
    closedir(d);
    return n;
}

START_TEST(refcache_round_trip_and_prefix) {
    char dir[512], sub[600];
    make_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/refs", dir); // created by the first store
    Entry e = entry_make(6, 3, 1.0f);
    FpError err = {0};
    const char *id = "{\"procedure\":\"p\",\"seed\":1}";
    const unsigned char codes[6] = {MIA_Q_OUT, MIA_Q_IN, MIA_Q_OTHER, MIA_Q_IN, MIA_Q_OUT, MIA_Q_IN};
    ck_assert_int_eq(refcache_store(sub, id, e.q, e.c, 6, 3, e.z, codes, 0.75, &err), FP_OK);
    float got[18];
    unsigned char got_codes[6] = {9, 9, 9, 9, 9, 9};
    double acc = 0;
    int hit = 0;
    ck_assert_int_eq(refcache_load(sub, id, e.q, e.c, 6, 3, got, got_codes, &acc, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 1);
    ck_assert_double_eq(acc, 0.75);
    ck_assert_mem_eq(got, e.z, sizeof got);
    ck_assert_mem_eq(got_codes, codes, sizeof codes);
    // A prefix of the queries is served; more queries, other indices, other content,
    // another class count or another identity are misses, never wrong numbers.
    memset(got, 0, sizeof got);
    ck_assert_int_eq(refcache_load(sub, id, e.q, e.c, 4, 3, got, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 1);
    ck_assert_mem_eq(got, e.z, sizeof(float) * 12);
    Entry big = entry_make(7, 3, 1.0f);
    ck_assert_int_eq(refcache_load(sub, id, big.q, big.c, 7, 3, got, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 0);
    uint32_t q2[6];
    memcpy(q2, e.q, sizeof q2);
    q2[5]++;
    ck_assert_int_eq(refcache_load(sub, id, q2, e.c, 6, 3, got, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 0);
    uint64_t c2[6];
    memcpy(c2, e.c, sizeof c2);
    c2[0] ^= 1;
    ck_assert_int_eq(refcache_load(sub, id, e.q, c2, 6, 3, got, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(refcache_load(sub, id, e.q, e.c, 6, 2, got, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(refcache_load(sub, "{\"procedure\":\"p\",\"seed\":2}", e.q, e.c, 6, 3, got, NULL, NULL, &hit, &err),
                     FP_OK);
    ck_assert_int_eq(hit, 0);
    // Storing the same entry again gives the same bytes (nothing run-dependent is kept).
    char path[700];
    refcache_path(sub, id, path, sizeof path);
    unsigned char *a, *b;
    size_t na = file_bytes(path, &a);
    ck_assert_int_eq(refcache_store(sub, id, e.q, e.c, 6, 3, e.z, codes, 0.75, &err), FP_OK);
    size_t nb = file_bytes(path, &b);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(a, b, na);
    ck_assert_int_eq(count_files(sub, ".ref"), 1);
    ck_assert_int_eq(count_files(sub, ".tmp."), 0);
    free(a);
    free(b);
    entry_free(&e);
    entry_free(&big);
    remove_tree(dir);
}
END_TEST

START_TEST(refcache_damaged_entries_are_misses) {
    char dir[512];
    make_tmpdir(dir, sizeof dir);
    Entry e = entry_make(5, 4, -2.0f);
    const char *id = "{\"x\":1}";
    FpError err = {0};
    ck_assert_int_eq(refcache_store(dir, id, e.q, e.c, 5, 4, e.z, NULL, 0.5, &err), FP_OK);
    char path[700];
    refcache_path(dir, id, path, sizeof path);
    unsigned char *good;
    size_t n = file_bytes(path, &good);
    unsigned char *bad = malloc(n);
    float got[20];
    int hit = 1;
    struct { size_t len; size_t flip; const char *needle; } cases[] = {
        {n - 1, (size_t)-1, "truncated"},          // the last byte missing
        {40, (size_t)-1, "truncated"},             // cut inside the identity
        {3, (size_t)-1, "not a reference-model"},  // cut inside the magic
        {n, n - 20, "checksum"},                   // a logit changed
        {n, 0, "not a reference-model"},           // the magic changed
        {0, (size_t)-1, "not a reference-model"},  // empty
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(bad, good, n);
        if (cases[k].flip != (size_t)-1)
            bad[cases[k].flip] ^= 0x40;
        file_write(path, bad, cases[k].len);
        hit = 1;
        memset(&err, 0, sizeof err);
        ck_assert_int_eq(refcache_load(dir, id, e.q, e.c, 5, 4, got, NULL, NULL, &hit, &err), FP_EFORMAT);
        ck_assert_int_eq(hit, 0);
        ck_assert_msg(strstr(err.msg, cases[k].needle) && strstr(err.msg, path), "case %zu: %s", k, err.msg);
    }
    // A store repairs it.
    ck_assert_int_eq(refcache_store(dir, id, e.q, e.c, 5, 4, e.z, NULL, 0.5, &err), FP_OK);
    ck_assert_int_eq(refcache_load(dir, id, e.q, e.c, 5, 4, got, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 1);
    free(good);
    free(bad);
    entry_free(&e);
    remove_tree(dir);
}
END_TEST

// Writers that race on one entry while this process reads it: every read is a miss
// (before the first rename) or a hit with exactly the written numbers; never a damaged
// entry. The entry is large (2.5 MB) so that a non-atomic write would be caught
// mid-way; the control below shows such a write is seen.
START_TEST(refcache_racing_writers_never_tear) {
    char dir[512];
    make_tmpdir(dir, sizeof dir);
    enum { N = 25000, C = 25, WRITERS = 3, ROUNDS = 12 };
    Entry e = entry_make(N, C, 0.5f);
    const char *id = "{\"race\":true}";
    pid_t kids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        fflush(NULL);
        kids[w] = fork();
        ck_assert_int_ge(kids[w], 0);
        if (kids[w] == 0) {
            int ok = 1;
            for (int r = 0; r < ROUNDS && ok; r++)
                ok = refcache_store(dir, id, e.q, e.c, N, C, e.z, NULL, 0.25, NULL) == FP_OK;
            _exit(ok ? 0 : 1);
        }
    }
    float *got = malloc(sizeof(float) * N * C);
    int hits = 0, reads = 0, done = 0;
    while (!done) {
        int hit = 0;
        FpError err = {0};
        FpStatus st = refcache_load(dir, id, e.q, e.c, N, C, got, NULL, NULL, &hit, &err);
        ck_assert_msg(st == FP_OK, "read %d: %s", reads, err.msg);
        if (hit) {
            ck_assert_mem_eq(got, e.z, sizeof(float) * N * C);
            hits++;
        }
        reads++;
        done = 1;
        for (int w = 0; w < WRITERS; w++)
            if (kill(kids[w], 0) == 0) {
                int status;
                if (waitpid(kids[w], &status, WNOHANG) == 0)
                    done = 0;
                else
                    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            }
    }
    for (int w = 0; w < WRITERS; w++)
        waitpid(kids[w], NULL, 0);
    ck_assert_int_ge(reads, 2);
    ck_assert_int_eq(count_files(dir, ".tmp."), 0);
    int hit = 0;
    ck_assert_int_eq(refcache_load(dir, id, e.q, e.c, N, C, got, NULL, NULL, &hit, NULL), FP_OK);
    ck_assert_int_eq(hit, 1);
    free(got);
    entry_free(&e);
    remove_tree(dir);
}
END_TEST

// Control: an entry written in place (no temp file and rename) and read half-written is
// reported as damaged, so the check above would catch a torn entry.
START_TEST(refcache_in_place_writer_is_caught) {
    char dir[512];
    make_tmpdir(dir, sizeof dir);
    Entry e = entry_make(2000, 10, 0.5f);
    const char *id = "{\"torn\":true}";
    ck_assert_int_eq(refcache_store(dir, id, e.q, e.c, 2000, 10, e.z, NULL, 0.25, NULL), FP_OK);
    char path[700];
    refcache_path(dir, id, path, sizeof path);
    unsigned char *data;
    size_t n = file_bytes(path, &data);
    int go[2], half[2];
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(half), 0);
    fflush(NULL);
    pid_t kid = fork();
    ck_assert_int_ge(kid, 0);
    if (kid == 0) { // truncate, write the first half, wait, write the rest
        FILE *f = fopen(path, "wb");
        fwrite(data, 1, n / 2, f);
        fflush(f);
        char c = 1;
        if (write(half[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(1);
        fwrite(data + n / 2, 1, n - n / 2, f);
        fclose(f);
        _exit(0);
    }
    char c;
    ck_assert_int_eq(read(half[0], &c, 1), 1);
    float *got = malloc(sizeof(float) * 20000);
    int hit = 1;
    FpError err = {0};
    ck_assert_int_eq(refcache_load(dir, id, e.q, e.c, 2000, 10, got, NULL, NULL, &hit, &err), FP_EFORMAT);
    ck_assert_int_eq(hit, 0);
    ck_assert_int_eq(write(go[1], &c, 1), 1);
    int status;
    waitpid(kid, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(refcache_load(dir, id, e.q, e.c, 2000, 10, got, NULL, NULL, &hit, &err), FP_OK);
    ck_assert_int_eq(hit, 1);
    free(got);
    free(data);
    entry_free(&e);
    remove_tree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------
// Scores against direct formulas

START_TEST(lira_scores_match_direct_formulas) {
    // 3 candidates, 4 models. Online: models 0 and 1 IN for candidate 0, ... (2 each).
    enum { n = 3, N = 4 };
    const double phi_obs[n] = {2.0, -0.5, 1.0};
    const double ref[N][n] = {{3.0, 0.1, 0.5}, {2.5, -0.3, 1.5}, {0.5, 0.4, -0.2}, {-0.1, -1.2, 0.6}};
    const unsigned char in[N][n] = {{1, 0, 1}, {1, 1, 0}, {0, 0, 1}, {0, 1, 0}};
    double phi_refs[N * n];
    unsigned char member[N * n], out[N * n] = {0};
    for (int j = 0; j < N; j++)
        for (int i = 0; i < n; i++) {
            phi_refs[j * n + i] = ref[j][i];
            member[j * n + i] = in[j][i] ? MIA_Q_IN : MIA_Q_OUT;
        }
    double score[n], sigma;
    FpError err = {0};
    for (int fixed = 0; fixed < 2; fixed++) {
        // Direct: per candidate, the IN and OUT values, their means and population variances.
        double mi[n], mo[n], vi[n], vo[n], pooled = 0;
        for (int i = 0; i < n; i++) {
            double a[2], b[2];
            int ka = 0, kb = 0;
            for (int j = 0; j < N; j++)
                in[j][i] ? (a[ka++] = ref[j][i]) : (b[kb++] = ref[j][i]);
            mi[i] = (a[0] + a[1]) / 2;
            mo[i] = (b[0] + b[1]) / 2;
            vi[i] = ((a[0] - mi[i]) * (a[0] - mi[i]) + (a[1] - mi[i]) * (a[1] - mi[i])) / 2;
            vo[i] = ((b[0] - mo[i]) * (b[0] - mo[i]) + (b[1] - mo[i]) * (b[1] - mo[i])) / 2;
            pooled += (vi[i] + vo[i]) / 2 / n;
        }
        ck_assert_int_eq(mia_lira_scores(phi_obs, phi_refs, member, n, N, &(MiaLiraScoring){.online = 1, .fixed_variance = fixed, .n_aug = 1}, score, &sigma, &err), FP_OK);
        ck_assert_double_eq_tol(sigma, sqrt(pooled), 1e-14);
        for (int i = 0; i < n; i++) {
            double si = fixed ? sqrt(pooled) : sqrt(vi[i]), so = fixed ? sqrt(pooled) : sqrt(vo[i]);
            double pin = exp(-0.5 * pow((phi_obs[i] - mi[i]) / si, 2)) / (si * sqrt(2 * M_PI));
            double pout = exp(-0.5 * pow((phi_obs[i] - mo[i]) / so, 2)) / (so * sqrt(2 * M_PI));
            ck_assert_double_eq_tol(score[i], log(pin / pout), 1e-9);
        }
        // Offline: every model OUT.
        double mean[n] = {0}, var[n] = {0}, pv = 0;
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < N; j++)
                mean[i] += ref[j][i] / N;
            for (int j = 0; j < N; j++)
                var[i] += (ref[j][i] - mean[i]) * (ref[j][i] - mean[i]) / N;
            pv += var[i] / n;
        }
        ck_assert_int_eq(mia_lira_scores(phi_obs, phi_refs, out, n, N, &(MiaLiraScoring){.online = 0, .fixed_variance = fixed, .n_aug = 1}, score, &sigma, &err), FP_OK);
        for (int i = 0; i < n; i++)
            ck_assert_double_eq_tol(score[i], (phi_obs[i] - mean[i]) / sqrt(fixed ? pv : var[i]), 1e-12);
    }
    // The designs are checked: an online candidate IN for 3 of 4, an offline one IN once.
    member[2 * n + 0] = MIA_Q_IN;
    ck_assert_int_eq(mia_lira_scores(phi_obs, phi_refs, member, n, N, &(MiaLiraScoring){.online = 1, .fixed_variance = 0, .n_aug = 1}, score, &sigma, &err), FP_EPARAM);
    out[1] = MIA_Q_IN;
    ck_assert_int_eq(mia_lira_scores(phi_obs, phi_refs, out, n, N, &(MiaLiraScoring){.online = 0, .fixed_variance = 0, .n_aug = 1}, score, &sigma, &err), FP_EPARAM);
    // Online with fewer IN models than half (a reference client that never took part)
    // still fits; with none it cannot.
    member[2 * n + 0] = MIA_Q_OUT;
    member[0 * n + 0] = MIA_Q_OUT; // candidate 0: IN for model 1 only
    ck_assert_int_eq(mia_lira_scores(phi_obs, phi_refs, member, n, N, &(MiaLiraScoring){.online = 1, .fixed_variance = 1, .n_aug = 1}, score, &sigma, &err), FP_OK);
    member[1 * n + 0] = MIA_Q_OUT; // and for none
    ck_assert_int_eq(mia_lira_scores(phi_obs, phi_refs, member, n, N, &(MiaLiraScoring){.online = 1, .fixed_variance = 1, .n_aug = 1}, score, &sigma, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "shadow_models"));
}
END_TEST

START_TEST(rmia_scores_match_direct_formulas) {
    // 4 candidates, 5 population samples, 2 models; probabilities, not logs.
    enum { n = 4, Z = 5, Q = n + Z, N = 2 };
    const double pt[Q] = {0.9, 0.6, 0.3, 0.05, 0.5, 0.7, 0.2, 0.95, 0.4};
    const double pr[N][Q] = {{0.5, 0.7, 0.2, 0.3, 0.45, 0.6, 0.3, 0.8, 0.5},
                             {0.6, 0.4, 0.35, 0.1, 0.55, 0.75, 0.1, 0.9, 0.2}};
    double lpt[Q], lpr[N * Q];
    unsigned char off[N * Q] = {0}, on[N * Q] = {0};
    for (int q = 0; q < Q; q++) {
        lpt[q] = log(pt[q]);
        for (int j = 0; j < N; j++)
            lpr[j * Q + q] = log(pr[j][q]);
    }
    for (int i = 0; i < n; i++) // online: model 0 IN for candidates 0, 2; model 1 for 1, 3
        on[(i % 2) * Q + i] = MIA_Q_IN;
    off[1 * Q + n + 1] = MIA_Q_OTHER; // population sample 1 was trained on by model 1 (not by model 0)
    on[1 * Q + n + 1] = MIA_Q_OTHER;
    off[0 * Q + n + 4] = off[1 * Q + n + 4] = MIA_Q_IN; // sample 4: by both, so it is left out
    on[0 * Q + n + 4] = on[1 * Q + n + 4] = MIA_Q_IN;
    const double as[3] = {0.3, 0.0, 1.0}, gammas[3] = {1.0, 2.0, 1.0};
    for (int online = 0; online < 2; online++)
        for (int k = 0; k < 3; k++) {
            double a = as[k], g = gammas[k];
            const unsigned char *mem = online ? on : off;
            // Direct: Pr(q) from the models that qualify, r(q), then Pr_z[r(x)/r(z) >= γ].
            double r[Q];
            int usable[Q];
            for (int q = 0; q < Q; q++) {
                double s = 0;
                int c = 0;
                for (int j = 0; j < N; j++)
                    if ((online && q < n) || mem[j * Q + q] == MIA_Q_OUT) {
                        s += pr[j][q];
                        c++;
                    }
                usable[q] = c > 0;
                double m = c ? s / c : 0, p = online && q < n ? m : 0.5 * ((1 + a) * m + (1 - a));
                r[q] = pt[q] / p;
            }
            double score[n], lr[n];
            int used = 0;
            FpError err = {0};
            ck_assert_int_eq(mia_rmia_scores(lpt, lpr, mem, n, Z, N, online, a, g, score, lr, &used, &err), FP_OK);
            ck_assert_int_eq(used, Z - 1);
            for (int i = 0; i < n; i++) {
                int beat = 0;
                for (int z = n; z < Q; z++)
                    beat += usable[z] && r[i] / r[z] >= g;
                ck_assert_msg(score[i] == (double)beat / (Z - 1), "online %d a %g gamma %g x %d: %g vs %d/%d", online,
                              a, g, i, score[i], beat, Z - 1);
                ck_assert_double_eq_tol(lr[i], log(r[i]), 1e-12);
            }
        }
    // Every population sample trained on by every model: no population left.
    unsigned char all[N * Q];
    memset(all, MIA_Q_OUT, sizeof all);
    for (int j = 0; j < N; j++)
        for (int z = n; z < Q; z++)
            all[j * Q + z] = MIA_Q_OTHER;
    double score[n], lr[n];
    int used;
    FpError err = {0};
    ck_assert_int_eq(mia_rmia_scores(lpt, lpr, all, n, Z, N, 0, 0.3, 1, score, lr, &used, &err), FP_EPARAM);
    ck_assert_ptr_nonnull(strstr(err.msg, "population"));
}
END_TEST

// ---------------------------------------------------------------------------------
// End to end

static double auc_6sd(int m) { return 6.0 * sqrt((2.0 * m + 1) / (12.0 * m * (double)m)); }

static const cJSON *refs_of(const cJSON *r) { return cJSON_GetObjectItem(r, "reference_models"); }

static void expect_counts_reused(const cJSON *r, int reused) {
    const cJSON *rf = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "run"), "reference_models");
    ck_assert_int_eq((int)num(rf, "trained_now"), 0);
    ck_assert_int_eq((int)num(rf, "reused_from_earlier_attack"), reused);
}

// Where an attack's reference models came from (run-dependent: the result's "run").
static const cJSON *came_from(const cJSON *r) {
    return cJSON_GetObjectItem(cJSON_GetObjectItem(r, "run"), "reference_models");
}

START_TEST(e2e_rmia_and_online_lira_share_and_leak) {
    Fixture fx;
    fixture_open(&fx, 0.1, 100);
    AttackCache *cache = attack_cache_create();
    cJSON *l4 = run_attack(&fx, "lira", "{\"shadow_models\": 4}", cache);
    cJSON *r4 = run_attack(&fx, "rmia", "{\"shadow_models\": 4}", cache);
    cJSON *lo = run_attack(&fx, "lira", "{\"shadow_models\": 8, \"variant\": \"online\"}", cache);
    cJSON *ro = run_attack(&fx, "rmia", "{\"shadow_models\": 8, \"variant\": \"online\"}", cache);
    cJSON *l8 = run_attack(&fx, "lira", "{\"shadow_models\": 8}", cache);
    cJSON *all[5] = {l4, r4, lo, ro, l8};
    const char *names[5] = {"lira offline 4", "rmia offline 4", "lira online 8", "rmia online 8", "lira offline 8"};
    // Models trained by each: RMIA reuses LiRA's, the offline 8 add 4 to the first 4.
    const int trained[5] = {4, 0, 8, 0, 4}, reused[5] = {0, 4, 0, 8, 4};
    for (int i = 0; i < 5; i++) {
        check_result_shape(all[i], 100);
        ck_assert_msg(num(all[i], "auc") > 0.5 + auc_6sd(100), "%s auc %g", names[i], num(all[i], "auc"));
        const cJSON *rf = came_from(all[i]);
        ck_assert_int_eq((int)num(rf, "trained_now"), trained[i]);
        ck_assert_int_eq((int)num(rf, "reused_from_earlier_attack"), reused[i]);
        ck_assert_int_eq((int)num(rf, "read_from_disk_cache"), 0);
    }
    // Every client takes part: each candidate is IN for exactly half of the online models.
    for (int i = 2; i < 4; i++) {
        const cJSON *c = cJSON_GetObjectItem(refs_of(all[i]), "in_models_per_candidate");
        ck_assert_int_eq((int)num(c, "min"), 4);
        ck_assert_int_eq((int)num(c, "max"), 4);
    }
    // RMIA's point (the paper's Fig. 1): with the same 4 reference models it finds more
    // members than offline LiRA at 1% FPR (here 0.41 against 0.07).
    ck_assert_double_ge(num(cJSON_GetObjectItem(r4, "tpr_at_fpr"), "0.01"),
                        num(cJSON_GetObjectItem(l4, "tpr_at_fpr"), "0.01"));
    // The population's CDF only coarsens the ranking of Pr(x|θ)/Pr(x) (rmia.c).
    ck_assert_double_le(fabs(num(r4, "auc") - num(cJSON_GetObjectItem(r4, "ratio_without_population"), "auc")),
                        0.01);
    ck_assert_int_eq((int)num(r4, "population"), 1000);
    ck_assert_int_le((int)num(r4, "population_used"), 1000);
    for (int i = 0; i < 5; i++)
        cJSON_Delete(all[i]);
    attack_cache_free(cache);
    fixture_close(&fx);
}
END_TEST

START_TEST(e2e_references_independent_of_threads) {
    // Reference models train in parallel workers; the numbers must not depend on how many.
    Fixture fx;
    fixture_open_sized(&fx, 0.1, 50, 1, 5, 16);
    cJSON *r[2][2];
    for (int k = 0; k < 2; k++) {
        fx.ex.threads = k + 1;
        AttackCache *cache = attack_cache_create();
        r[k][0] = run_attack(&fx, "lira", "{\"shadow_models\": 2, \"variant\": \"online\"}", cache);
        r[k][1] = run_attack(&fx, "rmia", "{\"shadow_models\": 2, \"variant\": \"online\"}", cache);
        attack_cache_free(cache);
    }
    for (int a = 0; a < 2; a++) {
        ck_assert_double_eq(num(r[0][a], "auc"), num(r[1][a], "auc"));
        ck_assert(cJSON_Compare(cJSON_GetObjectItem(r[0][a], "roc"), cJSON_GetObjectItem(r[1][a], "roc"), 1));
        ck_assert_double_eq(num(refs_of(r[0][a]), "test_accuracy_mean"), num(refs_of(r[1][a]), "test_accuracy_mean"));
    }
    for (int k = 0; k < 4; k++)
        cJSON_Delete(r[k / 2][k % 2]);
    fixture_close(&fx);
}
END_TEST

START_TEST(e2e_online_references_count_only_clients_that_took_part) {
    // 4 clients, 2 sampled per round for 2 rounds: in a reference federation a client is
    // left out of both rounds with probability 1/4, and its records are OUT there.
    Fixture fx;
    fixture_open_sized(&fx, 0.1, 50, 1, 5, 16); // for the CSV
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"seed\": 5, \"dataset\": {\"name\": \"csv\", \"path\": \"%s/mixture.csv\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
             " \"federation\": {\"clients\": 4, \"sample_rate\": 0.5, \"rounds\": 2, \"local_epochs\": 3,"
             " \"samples_per_client\": 50, \"batch_size\": 20, \"lr\": 0.1}, \"threads\": 2}", fx.dir);
    cJSON *root = cJSON_Parse(cfg);
    Experiment ex;
    FpError err = {0};
    ck_assert_msg(experiment_load(root, NULL, "cpu", 2, defense_find, &ex, &err) == FP_OK, "%s", err.msg);
    Experiment keep = fx.ex;
    fx.ex = ex;
    AttackCache *cache = attack_cache_create();
    cJSON *l = run_attack(&fx, "lira", "{\"shadow_models\": 16, \"variant\": \"online\"}", cache);
    cJSON *r = run_attack(&fx, "rmia", "{\"shadow_models\": 16, \"variant\": \"online\"}", cache);
    const cJSON *c = cJSON_GetObjectItem(refs_of(l), "in_models_per_candidate");
    ck_assert_int_eq((int)num(c, "max"), 8);
    ck_assert_int_ge((int)num(c, "min"), 1);
    ck_assert_double_lt(num(c, "mean"), 8); // about 6: a quarter of the IN placements were never trained
    ck_assert_double_gt(num(c, "mean"), 4);
    expect_counts_reused(r, 16);
    ck_assert(cJSON_Compare(c, cJSON_GetObjectItem(refs_of(r), "in_models_per_candidate"), 1));
    cJSON_Delete(l);
    cJSON_Delete(r);
    attack_cache_free(cache);
    fx.ex = keep;
    experiment_free(&ex);
    cJSON_Delete(root);
    fixture_close(&fx);
}
END_TEST

// The first .ref file of dir (path into out).
static void first_entry(const char *dir, char *out, size_t n) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    out[0] = 0;
    while ((de = readdir(d)))
        if (strstr(de->d_name, ".ref") && !strstr(de->d_name, ".tmp.")) {
            snprintf(out, n, "%s/%s", dir, de->d_name);
            break;
        }
    closedir(d);
    ck_assert_msg(out[0], "no entry in %s", dir);
}

static void expect_counts(const cJSON *r, int trained, int read, int reused) {
    const cJSON *rf = came_from(r);
    ck_assert_int_eq((int)num(rf, "trained_now"), trained);
    ck_assert_int_eq((int)num(rf, "read_from_disk_cache"), read);
    ck_assert_int_eq((int)num(rf, "reused_from_earlier_attack"), reused);
}

static void expect_same_attack(const cJSON *a, const cJSON *b) {
    ck_assert_double_eq(num(a, "auc"), num(b, "auc"));
    ck_assert(cJSON_Compare(cJSON_GetObjectItem(a, "roc"), cJSON_GetObjectItem(b, "roc"), 1));
    ck_assert(cJSON_Compare(cJSON_GetObjectItem(a, "tpr_at_fpr"), cJSON_GetObjectItem(b, "tpr_at_fpr"), 1));
}

START_TEST(e2e_disk_cache_reruns_train_nothing) {
    Fixture fx;
    fixture_open_sized(&fx, 0.1, 50, 1, 5, 16); // small and quick: this test trains a target per run
    char refdir[700], entry[1000];
    snprintf(refdir, sizeof refdir, "%s/reference-models", fx.dir);
    const char *l4 = "{\"shadow_models\": 4}";
    // Separate runs (no in-process cache): the second trains nothing and agrees bit for bit.
    cJSON *a = run_attack_in(&fx, "lira", l4, NULL, refdir);
    expect_counts(a, 4, 0, 0);
    ck_assert_int_eq(count_files(refdir, ".ref"), 4);
    cJSON *b = run_attack_in(&fx, "lira", l4, NULL, refdir);
    expect_counts(b, 0, 4, 0);
    expect_same_attack(a, b);
    ck_assert_double_eq(num(refs_of(a), "test_accuracy_mean"), num(refs_of(b), "test_accuracy_mean"));
    // RMIA in a later run reads LiRA's models.
    cJSON *r = run_attack_in(&fx, "rmia", l4, NULL, refdir);
    expect_counts(r, 0, 4, 0);
    // A damaged entry is trained again (and rewritten); the numbers do not change.
    first_entry(refdir, entry, sizeof entry);
    ck_assert_int_eq(truncate(entry, 100), 0);
    cJSON *c = run_attack_in(&fx, "lira", l4, NULL, refdir);
    expect_counts(c, 1, 3, 0);
    expect_same_attack(a, c);
    cJSON *c2 = run_attack_in(&fx, "lira", l4, NULL, refdir);
    expect_counts(c2, 0, 4, 0);
    // More population samples than the entries were scored on: trained again, once.
    const char *big = "{\"shadow_models\": 4, \"population\": 1500}";
    cJSON *p1 = run_attack_in(&fx, "rmia", big, NULL, refdir);
    expect_counts(p1, 4, 0, 0);
    cJSON *p2 = run_attack_in(&fx, "rmia", big, NULL, refdir);
    expect_counts(p2, 0, 4, 0);
    expect_same_attack(p1, p2);
    cJSON *p3 = run_attack_in(&fx, "lira", l4, NULL, refdir); // entries scored on more serve fewer
    expect_counts(p3, 0, 4, 0);
    expect_same_attack(a, p3);
    // The ML-Leaks / Basic-MIA shadow goes through the same cache.
    cJSON *m1 = run_attack_in(&fx, "ml-leaks", "{}", NULL, refdir);
    cJSON *m2 = run_attack_in(&fx, "basic-mia", "{}", NULL, refdir);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(m1, "run"), "shadow_read_from_disk_cache")));
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(m2, "run"), "shadow_read_from_disk_cache")));
    ck_assert_int_eq(count_files(refdir, ".tmp."), 0);
    cJSON *all[] = {a, b, r, c, c2, p1, p2, p3, m1, m2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        cJSON_Delete(all[i]);
    fixture_close(&fx);
}
END_TEST

// The reference models trained by the attacks of the cells in dir: sums of
// run.reference_models.trained_now, read_from_disk_cache and reused_from_earlier_attack.
// Every cell's LiRA must have the same AUC (*lira_auc: negative until the first).
static void matrix_counts(const char *dir, int *trained, int *read, int *reused, double *lira_auc) {
    char cells[700];
    snprintf(cells, sizeof cells, "%s/cells", dir);
    DIR *d = opendir(cells);
    ck_assert_ptr_nonnull(d);
    *trained = *read = *reused = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        char path[1000];
        snprintf(path, sizeof path, "%s/%s", cells, de->d_name);
        cJSON *j = NULL;
        ck_assert_int_eq(jv_load_file(path, &j, NULL), FP_OK);
        const cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(j, "attacks")) {
            ck_assert_str_eq(cJSON_GetObjectItem(a, "status")->valuestring, "done");
            const cJSON *res = cJSON_GetObjectItem(a, "result");
            *trained += (int)num(came_from(res), "trained_now");
            *read += (int)num(came_from(res), "read_from_disk_cache");
            *reused += (int)num(came_from(res), "reused_from_earlier_attack");
            if (strcmp(cJSON_GetObjectItem(a, "name")->valuestring, "lira") == 0) {
                if (*lira_auc >= 0)
                    ck_assert_double_eq(num(res, "auc"), *lira_auc);
                *lira_auc = num(res, "auc");
            }
        }
        cJSON_Delete(j);
    }
    closedir(d);
}

static Matrix *load_matrix(const char *csv, const char *rmia_extra) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"seed\": 3, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
             " \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
             " \"federation\": {\"clients\": 2, \"rounds\": 1, \"local_epochs\": 5, \"samples_per_client\": 50,"
             " \"batch_size\": 20, \"lr\": 0.1, \"momentum\": 0.9}, \"threads\": 2, \"device\": \"cpu\","
             " \"defenses\": [{\"name\": \"none\"}],"
             " \"attacks\": [{\"name\": \"lira\", \"shadow_models\": 16},"
             " {\"name\": \"rmia\", \"shadow_models\": 16%s}]}",
             csv, rmia_extra);
    cJSON *root = cJSON_Parse(text);
    ck_assert_ptr_nonnull(root);
    MatrixOptions mo = {0};
    Matrix *m = NULL;
    FpError err = {0};
    ck_assert_msg(matrix_load(root, &mo, &m, &err) == FP_OK, "%s", err.msg);
    cJSON_Delete(root);
    return m;
}

START_TEST(matrix_lira_and_rmia_train_16_then_none) {
    Fixture fx;
    fixture_open_sized(&fx, 0.1, 50, 1, 5, 16); // for the CSV; the matrix has its own settings
    char csv[600], dir[700];
    snprintf(csv, sizeof csv, "%s/mixture.csv", fx.dir);
    snprintf(dir, sizeof dir, "%s/run", fx.dir);
    MatrixRunOptions ro = {.jobs = 1};
    MatrixSummary sum;
    FpError err = {0};
    int trained, read, reused;
    double auc = -1;
    // LiRA 16 and RMIA 16 against one target: 16 models, not 32.
    Matrix *m = load_matrix(csv, "");
    ck_assert_msg(matrix_run(m, dir, &ro, &sum, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(sum.done, 1);
    matrix_counts(dir, &trained, &read, &reused, &auc);
    ck_assert_int_eq(trained, 16);
    ck_assert_int_eq(read, 0);
    ck_assert_int_eq(reused, 16);
    char refdir[800];
    snprintf(refdir, sizeof refdir, "%s/reference-models", dir);
    ck_assert_int_eq(count_files(refdir, ".ref"), 16);
    // The same matrix again: the cell is finished, nothing runs.
    ck_assert_int_eq(matrix_run(m, dir, &ro, &sum, &err), FP_OK);
    ck_assert_int_eq(sum.skipped, 1);
    matrix_free(m);
    // A cell that must run again (another attack setting, so another cell) trains none.
    m = load_matrix(csv, ", \"gamma\": 2");
    ck_assert_int_eq(matrix_run(m, dir, &ro, &sum, &err), FP_OK);
    ck_assert_int_eq(sum.done, 1);
    ck_assert_int_eq(sum.skipped, 0);
    int t2 = 0, r2 = 0, u2 = 0;
    matrix_counts(dir, &t2, &r2, &u2, &auc); // both cells: the first one's counts plus these
    ck_assert_int_eq(t2 - trained, 0);
    ck_assert_int_eq(r2 - read, 16);
    ck_assert_int_eq(u2 - reused, 16);
    ck_assert_int_eq(count_files(refdir, ".ref"), 16);
    matrix_free(m);
    fixture_close(&fx);
}
END_TEST

// DIR/mixture.csv and the config DIR/c.json (into cfg) of the CLI tests below: 2 clients,
// online LiRA/RMIA with 2 reference models.
static void write_cli_config(const char *dir, int seed, char *cfg, size_t n) {
    char csv[600];
    snprintf(csv, sizeof csv, "%s/mixture.csv", dir);
    write_mixture_csv(csv, 1200);
    snprintf(cfg, n, "%s/c.json", dir);
    FILE *f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"seed\": %d, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"},"
               " \"model\": {\"name\": \"mlp\", \"hidden\": [16]}, \"threads\": 1,"
               " \"federation\": {\"clients\": 2, \"rounds\": 1, \"local_epochs\": 5, \"samples_per_client\": 50},"
               " \"attack\": {\"shadow_models\": 2, \"variant\": \"online\"}}", seed, csv);
    fclose(f);
}

START_TEST(cli_attack_rerun_trains_nothing) {
    char dir[512], cfg[600], out[700], res[800], refdir[800];
    make_tmpdir(dir, sizeof dir);
    write_cli_config(dir, 2, cfg, sizeof cfg);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(res, sizeof res, "%s/result.json", out);
    snprintf(refdir, sizeof refdir, "%s/reference-models", out);
    const char *args[] = {"attack", "rmia", "--config", cfg, "--out", out, NULL};
    static char so[1 << 16], se[1 << 16];
    for (int run = 0; run < 2; run++) {
        int rc = cli_run(args, so, se, sizeof so);
        if (rc == -1) {
            printf("SKIP: cli_attack_rerun_trains_nothing (FEDPRIV_BIN unset; make test sets it)\n");
            remove_tree(dir);
            return;
        }
        ck_assert_msg(rc == 0, "exit %d: %s", rc, se);
        cJSON *r = NULL;
        ck_assert_int_eq(jv_load_file(res, &r, NULL), FP_OK);
        expect_counts(r, run ? 0 : 2, run ? 2 : 0, 0);
        cJSON_Delete(r);
        ck_assert_int_eq(count_files(refdir, ".ref"), 2);
    }
    remove_tree(dir);
}
END_TEST

// Two attacks, each with its own --out, share one set of reference models through
// --reference-models: RMIA after LiRA trains none (reads LiRA's 2); the control, RMIA into
// a folder of its own without the option, trains its 2 again. LiRA's folder itself stays
// LiRA's (another attack into it is refused).
START_TEST(cli_attacks_share_reference_models_across_folders) {
    char dir[512], cfg[600], lira[700], rmia[700], alone[700], refdir[800], res[800];
    make_tmpdir(dir, sizeof dir);
    write_cli_config(dir, 3, cfg, sizeof cfg);
    snprintf(lira, sizeof lira, "%s/lira", dir);
    snprintf(rmia, sizeof rmia, "%s/rmia", dir);
    snprintf(alone, sizeof alone, "%s/rmia-alone", dir);
    snprintf(refdir, sizeof refdir, "%s/reference-models", lira);
    static char so[1 << 16], se[1 << 16];
    const char *first[] = {"attack", "lira", "--config", cfg, "--out", lira, NULL};
    int rc = cli_run(first, so, se, sizeof so);
    if (rc == -1) {
        printf("SKIP: cli_attacks_share_reference_models_across_folders (FEDPRIV_BIN unset; make test sets it)\n");
        remove_tree(dir);
        return;
    }
    ck_assert_msg(rc == 0, "lira: exit %d: %s", rc, se);
    const char *shared[] = {"attack", "rmia", "--config", cfg, "--out", rmia, "--reference-models", refdir, NULL};
    const char *own[] = {"attack", "rmia", "--config", cfg, "--out", alone, NULL};
    const char *const *runs[2] = {shared, own};
    const char *outs[2] = {rmia, alone};
    for (int k = 0; k < 2; k++) {
        rc = cli_run(runs[k], so, se, sizeof so);
        ck_assert_msg(rc == 0, "rmia %d: exit %d: %s", k, rc, se);
        snprintf(res, sizeof res, "%s/result.json", outs[k]);
        cJSON *r = NULL;
        ck_assert_int_eq(jv_load_file(res, &r, NULL), FP_OK);
        expect_counts(r, k ? 2 : 0, k ? 0 : 2, 0);
        cJSON_Delete(r);
    }
    snprintf(res, sizeof res, "%s/reference-models", rmia);
    ck_assert_int_eq(count_files(res, ".ref"), 0); // the shared models stayed where they were
    const char *into_lira[] = {"attack", "rmia", "--config", cfg, "--out", lira, NULL};
    rc = cli_run(into_lira, so, se, sizeof so);
    ck_assert_msg(rc == 2 && strstr(se, "give each attack its own --out"), "exit %d: %s", rc, se);
    remove_tree(dir);
}
END_TEST

Suite *suite_mia_ref(void) {
    Suite *s = suite_create("mia_ref");
    TCase *u = tcase_create("unit");
    tcase_add_test(u, refcache_round_trip_and_prefix);
    tcase_add_test(u, refcache_damaged_entries_are_misses);
    tcase_add_test(u, refcache_racing_writers_never_tear);
    tcase_add_test(u, refcache_in_place_writer_is_caught);
    tcase_add_test(u, lira_scores_match_direct_formulas);
    tcase_add_test(u, rmia_scores_match_direct_formulas);
    suite_add_tcase(s, u);
    TCase *e = tcase_create("end_to_end");
    tcase_set_timeout(e, 120);
    tcase_add_test(e, e2e_rmia_and_online_lira_share_and_leak);
    tcase_add_test(e, e2e_references_independent_of_threads);
    tcase_add_test(e, e2e_online_references_count_only_clients_that_took_part);
    tcase_add_test(e, e2e_disk_cache_reruns_train_nothing);
    tcase_add_test(e, matrix_lira_and_rmia_train_16_then_none);
    tcase_add_test(e, cli_attack_rerun_trains_nothing);
    tcase_add_test(e, cli_attacks_share_reference_models_across_folders);
    suite_add_tcase(s, e);
    return s;
}
