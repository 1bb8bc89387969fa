// Hardening (docs/security.md): the secure noise source (ChaCha20 against RFC 8439,
// fresh keys per stream, the statistics of draws and of a mechanism under it, the CLI
// option), and the failure paths: out of memory on a huge model or dataset (setrlimit
// RLIMIT_AS in a forked child), a failing write of a result (RLIMIT_FSIZE in a forked
// child: write() fails with EFBIG) leaving no file behind, and divergence reported in
// the result of `fedpriv train`.
#include <check.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/jsonv.h"
#include "core/rng_secure.h"
#include "datasets/dataset.h"
#include "defenses/dp/mech.h"
#include "models/model.h"

#if defined(__SANITIZE_ADDRESS__)
#define FP_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FP_UNDER_ASAN 1
#endif
#endif
#ifndef FP_UNDER_ASAN
#define FP_UNDER_ASAN 0
#endif

// ---- helpers ------------------------------------------------------------------------

static char tmp_dir[256];

static void make_tmp_dir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/fedpriv-hardening-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
}

static void remove_tmp_dir(void) {
    DIR *d = opendir(tmp_dir);
    if (!d)
        return;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", tmp_dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(tmp_dir);
}

static const char *tmp_file(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", tmp_dir, name);
    return buf;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

// Names in tmp_dir (other than . and ..) that start with prefix.
static int count_files(const char *prefix) {
    DIR *d = opendir(tmp_dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

// Runs fn in a forked child under the given limit (RLIM_INFINITY: none) and returns
// the child's exit status (or 128 + signal).
static int in_child(int resource, rlim_t limit, int (*fn)(void *), void *arg) {
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (limit != RLIM_INFINITY) {
            struct rlimit rl = {limit, limit};
            if (setrlimit(resource, &rl) != 0)
                _exit(99);
        }
        _exit(fn(arg));
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *bin(void) { return getenv("FEDPRIV_BIN"); }

// Runs a shell command; returns its exit status.
static int run_sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static cJSON *load_json(const char *path) {
    cJSON *j = NULL;
    FpError err = {0};
    ck_assert_msg(jv_load_file(path, &j, &err) == FP_OK, "%s", err.msg);
    return j;
}

// A small, learnable CSV classification set (3 classes, 4 features) for CLI runs.
static void write_tiny_csv(const char *path, double scale) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "a,b,c,d,label\n");
    for (int i = 0; i < 240; i++) {
        int y = i % 3;
        fprintf(f, "%g,%g,%g,%g,%d\n", scale * (y + 0.1 * (i % 7)), scale * (0.5 * y - 0.05 * (i % 5)),
                scale * ((i * 7) % 11) / 11.0, scale * (y == 2), y);
    }
    ck_assert_int_eq(fclose(f), 0);
}

// ---- secure noise -----------------------------------------------------------------------

// RFC 8439 §2.3.2: key 00 01 .. 1f, nonce 00 00 00 09 00 00 00 4a 00 00 00 00, counter 1.
START_TEST(chacha20_rfc8439_block) {
    uint32_t key[8], out[16];
    for (int i = 0; i < 8; i++)
        key[i] = (uint32_t)(4 * i) | (uint32_t)(4 * i + 1) << 8 | (uint32_t)(4 * i + 2) << 16 |
                 (uint32_t)(4 * i + 3) << 24;
    const uint32_t nonce[3] = {0x09000000u, 0x4a000000u, 0};
    const uint32_t want[16] = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
                               0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
                               0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2};
    chacha20_block(key, 1, nonce, out);
    for (int i = 0; i < 16; i++)
        ck_assert_uint_eq(out[i], want[i]);
}
END_TEST

START_TEST(secure_streams_fresh_and_indexed) {
    uint64_t seed = 7 | RNG_SEED_SECURE;
    RngStream a = rng_stream(seed, RNG_DEFENSE, 2, 3), b = rng_stream(seed, RNG_DEFENSE, 2, 3);
    ck_assert_uint_eq(a.secure, 1);
    ck_assert(memcmp(a.secure_key, b.secure_key, sizeof a.secure_key) != 0);
    // Two streams for the same coordinates differ; within one, draws are element-indexed.
    int same = 0;
    for (int i = 0; i < 64; i++)
        same += rng_normal_at(&a, (uint64_t)i) == rng_normal_at(&b, (uint64_t)i);
    ck_assert_int_eq(same, 0);
    double x = rng_laplace_at(&a, 1000003);
    for (int i = 0; i < 10; i++)
        (void)rng_uniform_at(&a, (uint64_t)i * 977);
    ck_assert(rng_laplace_at(&a, 1000003) == x);
    // Sequential draws go through rng_block too.
    RngStream c = a;
    uint32_t w[4];
    rng_block(&a, 0, w);
    ck_assert_uint_eq(rng_next_u32(&c), w[0]);
    // Privacy-relevant purposes only: the rest keep the plain seed (same split, same init).
    ck_assert(rng_secure_purpose(RNG_DEFENSE_AUX) && rng_secure_purpose(RNG_CLIENT_SAMPLE));
    RngStream init_s = rng_stream(seed, RNG_INIT, 0, 0), init_p = rng_stream(7, RNG_INIT, 0, 0);
    ck_assert_uint_eq(init_s.secure, 0);
    ck_assert(rng_uniform_at(&init_s, 5) == rng_uniform_at(&init_p, 5));
    // A Philox stream is unchanged by the new fields.
    RngStream p = rng_stream(7, RNG_DEFENSE, 2, 3);
    ck_assert_uint_eq(p.secure, 0);
}
END_TEST

// Moments of n secure draws within 6 standard errors of the law's:
// N(0,1): mean 0 (se 1/√n), E[x²] = 1 (se √(2/n)); Laplace(0,1): mean 0 (se √(2/n)),
// E[x²] = 2 (se √((24 - 4)/n)); U(0,1): mean 1/2 (se √(1/12n)).
START_TEST(secure_draw_moments) {
    const int n = 400000;
    RngStream s = rng_stream(11 | RNG_SEED_SECURE, RNG_DEFENSE, 0, 0);
    double m1 = 0, m2 = 0, l1 = 0, l2 = 0, u1 = 0;
    for (int i = 0; i < n; i++) {
        double z = rng_normal_at(&s, (uint64_t)i), l = rng_laplace_at(&s, (uint64_t)i + n);
        m1 += z;
        m2 += z * z;
        l1 += l;
        l2 += l * l;
        u1 += rng_uniform_at(&s, (uint64_t)i + 2 * (uint64_t)n);
    }
    m1 /= n, m2 /= n, l1 /= n, l2 /= n, u1 /= n;
    ck_assert_double_le(fabs(m1), 6 / sqrt(n));
    ck_assert_double_le(fabs(m2 - 1), 6 * sqrt(2.0 / n));
    ck_assert_double_le(fabs(l1), 6 * sqrt(2.0 / n));
    ck_assert_double_le(fabs(l2 - 2), 6 * sqrt(20.0 / n));
    ck_assert_double_le(fabs(u1 - 0.5), 6 * sqrt(1.0 / (12.0 * n)));
}
END_TEST

// A mechanism under a secure stream: mech_perturb takes the reference path (the
// fast path's inline Philox would ignore the key), and its output still has the
// mechanism's mean within 6 standard errors (variance from mech_variance).
START_TEST(secure_mechanism_statistics) {
    const char *specs[] = {"{\"name\":\"pm\",\"epsilon\":1}", "{\"name\":\"laplace\",\"epsilon\":1,\"clip\":0.5}",
                           "{\"name\":\"spm\",\"variant\":\"corrected\",\"epsilon\":2}"};
    const size_t n = 200000;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    ck_assert(x && y);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        cJSON *j = cJSON_Parse(specs[k]);
        MechSpec spec;
        Mech m;
        FpError err = {0};
        ck_assert_msg(mech_spec_parse(j, "m", MECH_PARSE_AUDIT, NULL, &spec, &err) == FP_OK, "%s", err.msg);
        ck_assert_msg(mech_init(&m, &spec, &err) == FP_OK, "%s", err.msg);
        cJSON_Delete(j);
        const double x0 = 0.3;
        RngStream s = rng_stream(5 | RNG_SEED_SECURE, RNG_DEFENSE, 0, (uint32_t)k);
        for (size_t i = 0; i < n; i++)
            x[i] = y[i] = (float)x0;
        mech_perturb(&m, x, n, &s, 0);
        mech_perturb_ref(&m, y, n, &s, 0);
        ck_assert(memcmp(x, y, n * sizeof(float)) == 0);
        double mean = 0;
        for (size_t i = 0; i < n; i++)
            mean += x[i];
        mean /= (double)n;
        double se = sqrt(mech_variance(&m, x0) / (double)n);
        ck_assert_msg(fabs(mean - mech_mean(&m, x0)) <= 6 * se, "%s: mean %g, expected %g ± 6·%g", specs[k], mean,
                      mech_mean(&m, x0), se);
    }
    free(x);
    free(y);
}
END_TEST

static const char *train_config(char *buf, size_t n, const char *csv, const char *extra, double lr) {
    snprintf(buf, n,
             "{\"seed\": 4, \"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"logreg\"},"
             " \"federation\": {\"clients\": 4, \"rounds\": 2, \"batch_size\": 16, \"lr\": %g, \"partition\": \"iid\"},"
             " \"defense\": {\"name\": \"gaussian-dpfedavg\", \"epsilon\": 4, \"clip\": 1}, \"threads\": 1%s}",
             csv, lr, extra);
    return buf;
}

// Two secure runs differ (their noise), two Philox runs agree, every result says which
// generator it used, and a bad "rng" value is exit 2 naming the key.
START_TEST(cli_secure_rng) {
    if (!bin()) {
        printf("SKIP: cli_secure_rng (FEDPRIV_BIN unset)\n");
        return;
    }
    make_tmp_dir();
    char csv[512], cfg[512], cfg2[512], text[2048], cmd[4096], out[4][512];
    write_tiny_csv(tmp_file("tiny.csv", csv, sizeof csv), 1.0);
    write_text(tmp_file("plain.json", cfg, sizeof cfg), train_config(text, sizeof text, csv, "", 0.1));
    write_text(tmp_file("secure.json", cfg2, sizeof cfg2),
               train_config(text, sizeof text, csv, ", \"rng\": \"secure\"", 0.1));
    const char *runs[4][2] = {{cfg, ""}, {cfg, ""}, {cfg2, ""}, {cfg, "--secure-rng"}};
    cJSON *res[4];
    for (int r = 0; r < 4; r++) {
        char name[32];
        snprintf(name, sizeof name, "out%d.json", r);
        tmp_file(name, out[r], sizeof out[r]);
        snprintf(cmd, sizeof cmd, "%s train --config %s --out %s %s 2>/dev/null", bin(), runs[r][0], out[r],
                 runs[r][1]);
        ck_assert_int_eq(run_sh(cmd), 0);
        res[r] = load_json(out[r]);
        ck_assert_str_eq(cJSON_GetObjectItem(res[r], "rng")->valuestring, r < 2 ? "philox" : "secure");
        ck_assert_double_eq(cJSON_GetObjectItem(res[r], "seed")->valuedouble, 4);
        ck_assert_str_eq(cJSON_GetObjectItem(res[r], "status")->valuestring, "ok");
    }
    // Compare the per-round test losses: equal for Philox, different under secure noise.
    double loss[4];
    for (int r = 0; r < 4; r++)
        loss[r] = cJSON_GetObjectItem(cJSON_GetObjectItem(res[r], "final"), "test_loss")->valuedouble;
    ck_assert(loss[0] == loss[1]);
    ck_assert(loss[2] != loss[3]);
    ck_assert(loss[2] != loss[0] && loss[3] != loss[0]);
    for (int r = 0; r < 4; r++)
        cJSON_Delete(res[r]);
    write_text(cfg2, train_config(text, sizeof text, csv, ", \"rng\": \"chacha\"", 0.1));
    snprintf(cmd, sizeof cmd, "%s train --config %s 2>&1 >/dev/null | grep -q 'rng: unknown value'", bin(), cfg2);
    ck_assert_int_eq(run_sh(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s train --config %s >/dev/null 2>&1", bin(), cfg2);
    ck_assert_int_eq(run_sh(cmd), 2);
    remove_tmp_dir();
}
END_TEST

// ---- failure paths ----------------------------------------------------------------------

// model_create of mlp hidden [1e6, 1e6] (10^12 weights) under a 1 GiB address space.
static int child_huge_model(void *arg) {
    (void)arg;
    cJSON *cfg = cJSON_Parse("{\"name\": \"mlp\", \"hidden\": [1000000, 1000000]}");
    DataShape shape = {.c = 1, .h = 28, .w = 28, .n_classes = 10};
    FpError err = {0};
    Model *m = model_create(cfg, "model", &shape, backend_cpu(), &err);
    cJSON_Delete(cfg);
    if (m)
        return 1;
    if (err.code != FP_ENOMEM || !strstr(err.msg, "out of memory"))
        return 2;
    // A model that fits still works in the same process afterwards.
    cfg = cJSON_Parse("{\"name\": \"mlp\", \"hidden\": [32]}");
    m = model_create(cfg, "model", &shape, backend_cpu(), &err);
    cJSON_Delete(cfg);
    if (!m)
        return 3;
    model_free(m);
    return 0;
}

// A dataset of 2^30 CIFAR-sized samples (12 TiB of floats).
static int child_huge_dataset(void *arg) {
    (void)arg;
    FpError err = {0};
    Dataset *d = dataset_create("huge", 1 << 30, 3, 32, 32, 10, 0, &err);
    if (d)
        return 1;
    return err.code == FP_ENOMEM && err.msg[0] ? 0 : 2;
}

START_TEST(oom_is_an_error) {
    if (FP_UNDER_ASAN) {
        // ASan reserves terabytes of shadow memory, so an address-space limit cannot be
        // applied, and it aborts on such requests unless allocator_may_return_null=1.
        printf("SKIP: oom_is_an_error (address sanitizer build)\n");
        return;
    }
    ck_assert_int_eq(in_child(RLIMIT_AS, (rlim_t)1 << 30, child_huge_model, NULL), 0);
    ck_assert_int_eq(in_child(RLIMIT_AS, (rlim_t)1 << 30, child_huge_dataset, NULL), 0);
}
END_TEST

START_TEST(cli_huge_model_exit_2) {
    if (!bin() || FP_UNDER_ASAN) {
        printf("SKIP: cli_huge_model_exit_2 (FEDPRIV_BIN unset or address sanitizer build)\n");
        return;
    }
    make_tmp_dir();
    char csv[512], cfg[512], errf[512], cmd[4096];
    write_tiny_csv(tmp_file("tiny.csv", csv, sizeof csv), 1.0);
    snprintf(cmd, sizeof cmd,
             "{\"dataset\": {\"name\": \"csv\", \"path\": \"%s\"}, \"model\": {\"name\": \"mlp\", \"hidden\": "
             "[1000000, 1000000]}}",
             csv);
    write_text(tmp_file("huge.json", cfg, sizeof cfg), cmd);
    tmp_file("err.txt", errf, sizeof errf);
    // ulimit -v in KiB: 2 GiB of address space for the whole process.
    snprintf(cmd, sizeof cmd, "ulimit -v 2097152; %s train --config %s > /dev/null 2> %s", bin(), cfg, errf);
    ck_assert_int_eq(run_sh(cmd), 2);
    snprintf(cmd, sizeof cmd, "grep -q 'out of memory' %s", errf);
    ck_assert_int_eq(run_sh(cmd), 0);
    remove_tmp_dir();
}
END_TEST

// jv_write_file_atomic under a 4 KiB file-size limit: the write fails with EFBIG
// (SIGXFSZ ignored), the earlier file is untouched and no temporary file remains.
static int child_atomic_write(void *arg) {
    const char *path = arg;
    signal(SIGXFSZ, SIG_IGN);
    cJSON *big = cJSON_CreateArray();
    for (int i = 0; i < 4000; i++)
        cJSON_AddItemToArray(big, cJSON_CreateNumber(i * 1.25));
    FpError err = {0};
    FpStatus st = jv_write_file_atomic(path, big, &err);
    cJSON_Delete(big);
    if (st != FP_EIO)
        return 1;
    return strstr(err.msg, "write failed") ? 0 : 2;
}

START_TEST(atomic_write_failure_leaves_nothing) {
    make_tmp_dir();
    char path[512];
    tmp_file("result.json", path, sizeof path);
    ck_assert_int_eq(in_child(RLIMIT_FSIZE, 4096, child_atomic_write, path), 0);
    ck_assert(!file_exists(path));
    ck_assert_int_eq(count_files("result.json"), 0);
    // With an earlier result in place, a failed rewrite keeps it whole.
    write_text(path, "{\"earlier\": true}\n");
    ck_assert_int_eq(in_child(RLIMIT_FSIZE, 4096, child_atomic_write, path), 0);
    cJSON *j = load_json(path);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "earlier")));
    cJSON_Delete(j);
    ck_assert_int_eq(count_files("result.json"), 1);
    remove_tmp_dir();
}
END_TEST

// model_save (weights) fails the same way, leaving no weight file.
static int child_model_save(void *arg) {
    const char *path = arg;
    signal(SIGXFSZ, SIG_IGN);
    cJSON *cfg = cJSON_Parse("{\"name\": \"mlp\", \"hidden\": [256]}");
    DataShape shape = {.c = 1, .h = 28, .w = 28, .n_classes = 10};
    FpError err = {0};
    Model *m = model_create(cfg, "model", &shape, backend_cpu(), &err);
    cJSON_Delete(cfg);
    if (!m)
        return 3;
    ck_assert_int_eq(model_init(m, 1, NULL), FP_OK);
    FpStatus st = model_save(m, path, &err);
    model_free(m);
    return st == FP_EIO ? 0 : 1;
}

START_TEST(model_save_failure_leaves_nothing) {
    make_tmp_dir();
    char path[512];
    tmp_file("weights.fpmw", path, sizeof path);
    ck_assert_int_eq(in_child(RLIMIT_FSIZE, 4096, child_model_save, path), 0);
    ck_assert_int_eq(count_files("weights.fpmw"), 0);
    remove_tmp_dir();
}
END_TEST

// `fedpriv train --out` under a 2 KiB file-size limit (the shell ignores SIGXFSZ for
// the child): bad output is exit 2 with the reason, and no result or temporary file.
START_TEST(cli_result_write_failure) {
    if (!bin()) {
        printf("SKIP: cli_result_write_failure (FEDPRIV_BIN unset)\n");
        return;
    }
    make_tmp_dir();
    char csv[512], cfg[512], out[512], errf[512], text[2048], cmd[4096];
    write_tiny_csv(tmp_file("tiny.csv", csv, sizeof csv), 1.0);
    write_text(tmp_file("cfg.json", cfg, sizeof cfg), train_config(text, sizeof text, csv, "", 0.1));
    tmp_file("result.json", out, sizeof out);
    tmp_file("err.txt", errf, sizeof errf);
    snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 2; %s train --config %s --out %s 2> %s", bin(), cfg, out,
             errf);
    ck_assert_int_eq(run_sh(cmd), 2);
    ck_assert_int_eq(count_files("result.json"), 0);
    snprintf(cmd, sizeof cmd, "grep -q 'result.json: write failed' %s", errf);
    ck_assert_int_eq(run_sh(cmd), 0);
    remove_tmp_dir();
}
END_TEST

// Features of 1e30 and lr 1e3 overflow the logits: the run stops with exit 1 and the
// result says "diverged", with the round and a null final record.
START_TEST(cli_divergence_reported) {
    if (!bin()) {
        printf("SKIP: cli_divergence_reported (FEDPRIV_BIN unset)\n");
        return;
    }
    make_tmp_dir();
    char csv[512], cfg[512], out[512], text[2048], cmd[4096];
    write_tiny_csv(tmp_file("huge.csv", csv, sizeof csv), 1e30);
    write_text(tmp_file("cfg.json", cfg, sizeof cfg), train_config(text, sizeof text, csv, "", 1000));
    tmp_file("result.json", out, sizeof out);
    snprintf(cmd, sizeof cmd, "%s train --config %s --out %s 2>/dev/null", bin(), cfg, out);
    ck_assert_int_eq(run_sh(cmd), 1);
    cJSON *res = load_json(out);
    ck_assert_str_eq(cJSON_GetObjectItem(res, "status")->valuestring, "diverged");
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(res, "diverged_round")));
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(res, "final")));
    cJSON_Delete(res);
    remove_tmp_dir();
}
END_TEST

// ---- fuzz regressions -----------------------------------------------------------------

// fuzz/corpus/cifar/regress-gzip-error-message-use-after-free (byte 0 is the target's
// mode byte): a corrupt gzip member made dataset_read_file format zlib's message after
// gzclose had freed it. It must fail cleanly, naming the gzip error (valgrind and ASan
// builds also see the read).
START_TEST(regress_gzip_error_message) {
    const char *src = "fuzz/corpus/cifar/regress-gzip-error-message-use-after-free";
    FILE *f = fopen(src, "rb");
    if (!f) {
        printf("SKIP: regress_gzip_error_message (run from the repository root)\n");
        return;
    }
    unsigned char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(n, 1);
    make_tmp_dir();
    char path[512];
    tmp_file("batch.bin", path, sizeof path);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf + 1, 1, n - 1, f), n - 1);
    ck_assert_int_eq(fclose(f), 0);
    const char *files[1] = {path};
    Dataset *d = NULL;
    FpError err = {0};
    ck_assert_int_eq(cifar10_load(files, 1, &d, &err), FP_EFORMAT);
    ck_assert_ptr_null(d);
    ck_assert_msg(strstr(err.msg, "batch.bin") && strstr(err.msg, "gzip"), "%s", err.msg);
    remove_tmp_dir();
}
END_TEST

Suite *suite_hardening(void) {
    Suite *s = suite_create("hardening");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, chacha20_rfc8439_block);
    tcase_add_test(tc, secure_streams_fresh_and_indexed);
    tcase_add_test(tc, secure_draw_moments);
    tcase_add_test(tc, secure_mechanism_statistics);
    tcase_add_test(tc, cli_secure_rng);
    tcase_add_test(tc, oom_is_an_error);
    tcase_add_test(tc, cli_huge_model_exit_2);
    tcase_add_test(tc, atomic_write_failure_leaves_nothing);
    tcase_add_test(tc, model_save_failure_leaves_nothing);
    tcase_add_test(tc, cli_result_write_failure);
    tcase_add_test(tc, cli_divergence_reported);
    tcase_add_test(tc, regress_gzip_error_message);
    suite_add_tcase(s, tc);
    return s;
}
