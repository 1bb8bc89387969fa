// Bring-your-own data (datasets/npy.h, datasets/imagefolder.c, client ids): one
// Fashion-MNIST subset written as a folder of .npy files, as an .npz archive (deflated,
// and again as float32 channels last) and as a PNG image folder trains bit for bit the
// same; a CSV with a client column and a partition file give a natural federation whose
// clients hold exactly their rows; config paths are resolved against the config's folder
// and kept in the result; malformed arrays, headers, shapes, labels and lengths are one
// line naming the file and exit 2. The files are made here from the Debian
// dataset-fashion-mnist package (skipped without it) or from a few numbers.
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>
#include <zlib.h>

#include "cli_run.h"
#include "core/jsonv.h"
#include "core/png.h"
#include "datasets/dataset.h"
#include "datasets/npy.h"
#include "fl/experiment.h"
#include "scratch.h"

// ---- writing arrays ---------------------------------------------------------------------------

// A whole .npy file in memory (malloc'd; *len bytes) as NumPy writes version 1.0: the
// header padded with spaces so that the data start at a multiple of 64.
static unsigned char *npy_bytes(const char *descr, const long long *shape, int ndim, const void *data,
                                size_t data_bytes, size_t *len) {
    char dims[256] = "";
    for (int d = 0; d < ndim; d++)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%lld%s", shape[d], ndim == 1 || d + 1 < ndim ? ", " : "");
    if (ndim == 1)
        dims[strlen(dims) - 1] = 0; // "(5,)"
    char h[512];
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
    while ((10 + n + 1) % 64)
        h[n++] = ' ';
    h[n++] = '\n';
    *len = 10 + (size_t)n + data_bytes;
    unsigned char *b = malloc(*len);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(n & 0xff);
    b[9] = (unsigned char)(n >> 8);
    memcpy(b + 10, h, (size_t)n);
    memcpy(b + 10 + n, data, data_bytes);
    return b;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s", path);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void write_npy(const char *path, const char *descr, const long long *shape, int ndim, const void *data,
                      size_t data_bytes) {
    size_t len;
    unsigned char *b = npy_bytes(descr, shape, ndim, data, data_bytes, &len);
    write_bytes(path, b, len);
    free(b);
}

typedef struct {
    const char *name, *descr;
    long long shape[4];
    int ndim;
    const void *data;
    size_t bytes;
} Member;

// An .npz archive as np.savez_compressed writes it: NAME.npy members, deflated.
static void write_npz(const char *path, const Member *m, int n) {
    int ze = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &ze);
    ck_assert_msg(z != NULL, "zip_open %s: %d", path, ze);
    for (int i = 0; i < n; i++) {
        size_t len;
        unsigned char *b = npy_bytes(m[i].descr, m[i].shape, m[i].ndim, m[i].data, m[i].bytes, &len);
        zip_source_t *src = zip_source_buffer(z, b, len, 1);
        ck_assert_ptr_nonnull(src);
        char name[64];
        snprintf(name, sizeof name, "%s.npy", m[i].name);
        zip_int64_t idx = zip_file_add(z, name, src, ZIP_FL_OVERWRITE);
        ck_assert_int_ge(idx, 0);
        ck_assert_int_eq(zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_DEFLATE, 0), 0);
    }
    ck_assert_msg(zip_close(z) == 0, "zip_close %s", path);
}

// A one-member zip written by hand, so that its sizes can lie: the member's bytes stored
// (method 0) or labelled deflated (8), declaring `declared` uncompressed bytes.
static void put16(FILE *f, unsigned v) { fputc(v & 0xff, f), fputc(v >> 8 & 0xff, f); }
static void put32(FILE *f, unsigned long v) { put16(f, v & 0xffff), put16(f, v >> 16 & 0xffff); }

static void write_forged_zip(const char *path, const char *name, const unsigned char *data, unsigned long n,
                             int method, unsigned long declared) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned long crc = crc32(0, data, (unsigned)n), nl = strlen(name);
    put32(f, 0x04034b50), put16(f, 20), put16(f, 0), put16(f, (unsigned)method), put32(f, 0);
    put32(f, crc), put32(f, n), put32(f, declared), put16(f, (unsigned)nl), put16(f, 0);
    fwrite(name, 1, nl, f);
    fwrite(data, 1, n, f);
    long cd = ftell(f);
    put32(f, 0x02014b50), put16(f, 20), put16(f, 20), put16(f, 0), put16(f, (unsigned)method), put32(f, 0);
    put32(f, crc), put32(f, n), put32(f, declared), put16(f, (unsigned)nl), put16(f, 0), put16(f, 0);
    put16(f, 0), put16(f, 0), put32(f, 0), put32(f, 0);
    fwrite(name, 1, nl, f);
    long end = ftell(f);
    put32(f, 0x06054b50), put16(f, 0), put16(f, 0), put16(f, 1), put16(f, 1);
    put32(f, (unsigned long)(end - cd)), put32(f, (unsigned long)cd), put16(f, 0);
    ck_assert_int_eq(fclose(f), 0);
}

// ---- the Fashion-MNIST subset -------------------------------------------------------------------

#define FM_TRAIN 120
#define FM_TEST 40

typedef struct {
    int n;
    unsigned char px[FM_TRAIN][784];
    long long y[FM_TRAIN];
} Subset;

static int cmp_label(const void *a, const void *b) {
    const int *x = a, *y = b; // {label, index}: by label, then by position (a stable sort)
    return x[0] != y[0] ? x[0] - y[0] : x[1] - y[1];
}

// Samples [from, from + n) of Fashion-MNIST's test split, in ImageFolder's order (by
// class, then by position), so that every format holds them in one order.
static int fm_subset(int from, int n, Subset *s) {
    char img[512], lab[512];
    snprintf(img, sizeof img, "%s/t10k-images-idx3-ubyte.gz", DATASET_FASHION_MNIST_DIR);
    snprintf(lab, sizeof lab, "%s/t10k-labels-idx1-ubyte.gz", DATASET_FASHION_MNIST_DIR);
    struct stat st;
    if (stat(img, &st) != 0)
        return 0;
    Dataset *d = NULL;
    FpError err = {0};
    ck_assert_msg(idx_load(img, lab, "fm", &d, &err) == FP_OK, "%s", err.msg);
    int order[FM_TRAIN][2];
    for (int i = 0; i < n; i++)
        order[i][0] = d->y[from + i], order[i][1] = from + i;
    qsort(order, (size_t)n, sizeof order[0], cmp_label);
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->y[i] = order[i][0];
        for (int k = 0; k < 784; k++)
            s->px[i][k] = (unsigned char)lrintf(d->x[(size_t)order[i][1] * 784 + k] * 255.0f);
    }
    dataset_free(d);
    return 1;
}

static void write_image_folder(const char *root, const Subset *s) {
    mkdir(root, 0700);
    FpError err = {0};
    for (int i = 0; i < s->n; i++) {
        char dir[900], path[1000];
        snprintf(dir, sizeof dir, "%s/%lld", root, s->y[i]);
        mkdir(dir, 0700);
        snprintf(path, sizeof path, "%s/%05d.png", dir, i);
        float img[784];
        for (int k = 0; k < 784; k++)
            img[k] = (float)s->px[i][k] / 255.0f;
        ck_assert_msg(png_write_gray(path, img, 28, 28, &err) == FP_OK, "%s", err.msg);
    }
}

static void write_config(const char *path, const char *dataset_json) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"seed\": 7, \"threads\": 1, \"dataset\": %s, \"model\": {\"name\": \"mlp\", \"hidden\": [16]},"
               " \"federation\": {\"clients\": 3, \"rounds\": 2, \"batch_size\": 8, \"lr\": 0.1}}",
            dataset_json);
    ck_assert_int_eq(fclose(f), 0);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

START_TEST(same_subset_trains_the_same_in_every_format) {
    SKIP_UNLESS_BIN();
    static Subset tr, te;
    if (!fm_subset(0, FM_TRAIN, &tr) || !fm_subset(FM_TRAIN, FM_TEST, &te)) {
        fprintf(stderr, "SKIP: no %s\n", DATASET_FASHION_MNIST_DIR);
        return;
    }
    char dir[512], sub[PATH_MAX], p[PATH_MAX + 200];
    scratch_make(dir, sizeof dir, "byo");
    snprintf(p, sizeof p, "%s/cfg", dir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    ck_assert_ptr_nonnull(realpath(p, sub)); // what the result records
    long long ishape[2][4] = {{FM_TRAIN, 28, 28}, {FM_TEST, 28, 28}}, lshape[2] = {FM_TRAIN, FM_TEST};
    // A folder of .npy files.
    snprintf(p, sizeof p, "%s/fm-npy", sub);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/fm-npy/x_train.npy", sub);
    write_npy(p, "|u1", ishape[0], 3, tr.px, sizeof tr.px);
    snprintf(p, sizeof p, "%s/fm-npy/y_train.npy", sub);
    write_npy(p, "<i8", &lshape[0], 1, tr.y, sizeof tr.y);
    snprintf(p, sizeof p, "%s/fm-npy/x_test.npy", sub);
    write_npy(p, "|u1", ishape[1], 3, te.px, (size_t)FM_TEST * 784);
    snprintf(p, sizeof p, "%s/fm-npy/y_test.npy", sub);
    write_npy(p, "<i8", &lshape[1], 1, te.y, sizeof(long long) * FM_TEST);
    // The same arrays in an .npz, and as float32 N×H×W×C (v/255, as the loaders compute it)
    // with uint8 test labels.
    Member m[4] = {{"x_train", "|u1", {FM_TRAIN, 28, 28}, 3, tr.px, sizeof tr.px},
                   {"y_train", "<i8", {FM_TRAIN}, 1, tr.y, sizeof tr.y},
                   {"x_test", "|u1", {FM_TEST, 28, 28}, 3, te.px, (size_t)FM_TEST * 784},
                   {"y_test", "<i8", {FM_TEST}, 1, te.y, sizeof(long long) * FM_TEST}};
    snprintf(p, sizeof p, "%s/fm.npz", sub);
    write_npz(p, m, 4);
    static float ftr[FM_TRAIN * 784], fte[FM_TEST * 784];
    unsigned char yte8[FM_TEST];
    for (int i = 0; i < FM_TRAIN * 784; i++)
        ftr[i] = (float)tr.px[i / 784][i % 784] / 255.0f;
    for (int i = 0; i < FM_TEST * 784; i++)
        fte[i] = (float)te.px[i / 784][i % 784] / 255.0f;
    for (int i = 0; i < FM_TEST; i++)
        yte8[i] = (unsigned char)te.y[i];
    Member mf[4] = {{"x_train", "<f4", {FM_TRAIN, 28, 28, 1}, 4, ftr, sizeof ftr},
                    {"y_train", "<i8", {FM_TRAIN}, 1, tr.y, sizeof tr.y},
                    {"x_test", "<f4", {FM_TEST, 28, 28, 1}, 4, fte, sizeof fte},
                    {"y_test", "|u1", {FM_TEST}, 1, yte8, sizeof yte8}};
    snprintf(p, sizeof p, "%s/fm-f32.npz", sub);
    write_npz(p, mf, 4);
    // A PNG image folder, ROOT/train/CLASS/IMAGE.png and ROOT/test/...
    snprintf(p, sizeof p, "%s/fm-png", sub);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/fm-png/train", sub);
    write_image_folder(p, &tr);
    snprintf(p, sizeof p, "%s/fm-png/test", sub);
    write_image_folder(p, &te);

    // The loaders agree with the IDX data bit for bit.
    FpError err = {0};
    static const char *const kinds[][2] = {{"npy", "fm-npy"}, {"npz", "fm.npz"}, {"npz", "fm-f32.npz"},
                                           {"imagefolder", "fm-png"}};
    Dataset *first = NULL;
    for (int k = 0; k < 4; k++) {
        Dataset *d = NULL;
        snprintf(p, sizeof p, "%s/%s", sub, kinds[k][1]);
        ck_assert_msg(dataset_open(kinds[k][0], "train", p, &d, &err) == FP_OK, "%s: %s", kinds[k][1], err.msg);
        ck_assert_int_eq(d->n, FM_TRAIN);
        ck_assert_int_eq(d->c * 100 + d->h * 1000 + d->w, 1 * 100 + 28 * 1000 + 28);
        ck_assert_int_eq(d->n_classes, (int)tr.y[FM_TRAIN - 1] + 1);
        for (int i = 0; i < FM_TRAIN; i++) {
            ck_assert_int_eq(d->y[i], (int)tr.y[i]);
            for (int j = 0; j < 784; j++)
                ck_assert_msg(d->x[(size_t)i * 784 + j] == (float)tr.px[i][j] / 255.0f, "%s: sample %d pixel %d",
                              kinds[k][1], i, j);
        }
        if (!first)
            first = d;
        else
            dataset_free(d);
    }
    dataset_free(first);

    // Training from each: the same rounds and the same saved model, byte for byte. The
    // configs name their data relative to their own folder; the binary runs elsewhere.
    char *rounds0 = NULL, *model0 = NULL;
    size_t model0_len = 0;
    for (int k = 0; k < 4; k++) {
        char cfg[PATH_MAX + 100], res[900], model[900], ds[300], out[8192], errs[8192];
        snprintf(ds, sizeof ds, "{\"name\": \"%s\", \"path\": \"%s\"}", kinds[k][0], kinds[k][1]);
        snprintf(cfg, sizeof cfg, "%s/c%d.json", sub, k);
        snprintf(res, sizeof res, "%s/r%d.json", dir, k);
        snprintf(model, sizeof model, "%s/m%d.bin", dir, k);
        write_config(cfg, ds);
        const char *args[] = {"train", "--config", cfg, "--out", res, "--save-model", model, NULL};
        int rc = cli_run(args, out, errs, sizeof out);
        ck_assert_msg(rc == 0, "%s: rc %d: %s", kinds[k][1], rc, errs);
        cJSON *r = NULL;
        ck_assert_msg(jv_load_file(res, &r, &err) == FP_OK, "%s", err.msg);
        const cJSON *dj = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "config"), "dataset");
        char want[PATH_MAX + 100];
        snprintf(want, sizeof want, "%s/%s", sub, kinds[k][1]);
        const cJSON *kept = cJSON_GetObjectItem(dj, "path");
        ck_assert_msg(cJSON_IsString(kept), "the result's config drops dataset.path");
        ck_assert_str_eq(kept->valuestring, want); // resolved, and kept
        cJSON *rj = cJSON_GetObjectItem(r, "rounds"), *round;
        cJSON_ArrayForEach(round, rj) { // timings differ from run to run
            cJSON_DeleteItemFromObject(round, "seconds");
            cJSON_DeleteItemFromObject(round, "train_seconds");
        }
        char *rounds = cJSON_PrintUnformatted(rj);
        cJSON_Delete(r);
        size_t len;
        char *mb = slurp(model, &len);
        if (!rounds0) {
            rounds0 = rounds;
            model0 = mb;
            model0_len = len;
            continue;
        }
        ck_assert_msg(strcmp(rounds, rounds0) == 0, "%s trains otherwise:\n%s\n%s", kinds[k][1], rounds, rounds0);
        ck_assert_msg(len == model0_len && memcmp(mb, model0, len) == 0, "%s: another saved model", kinds[k][1]);
        free(rounds);
        free(mb);
    }
    free(rounds0);
    free(model0);
    scratch_remove(dir);
}
END_TEST

// ---- client ids: a CSV client column, a partition file ----------------------------------------------

static const char *const CLIENT_NAMES[] = {"north", "south", "east"}; // sorted: east 0, north 1, south 2
static int client_of_row(int i) { return (i * 7 + i / 5) % 3; }       // an irregular assignment
static int sorted_id(int named) { return named == 2 ? 0 : named + 1; }

static void write_client_csv(const char *path, int rows) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "x1,client,x2,label\n");
    for (int i = 0; i < rows; i++)
        fprintf(f, "%g,%s,%g,%d\n", 0.1 * i, CLIENT_NAMES[client_of_row(i)], 1.0 - 0.03 * i, (i / 2) % 2);
    ck_assert_int_eq(fclose(f), 0);
}

// The partition of the experiment's federation for the config at cfg (*root: the parsed
// config, which the experiment points into: delete it after experiment_free).
static const Partition *federation_partition(const char *cfg, Experiment *ex, Federation **f, cJSON **rootp) {
    cJSON *root = NULL;
    FpError err = {0};
    ck_assert_msg(jv_load_file(cfg, &root, &err) == FP_OK, "%s", err.msg);
    ck_assert_msg(experiment_resolve_paths(root, cfg, &err) == FP_OK, "%s", err.msg);
    ck_assert_msg(experiment_load(root, NULL, "cpu", 1, NULL, ex, &err) == FP_OK, "%s", err.msg);
    *f = experiment_federation(ex, NULL, 1, &err);
    ck_assert_msg(*f != NULL, "%s", err.msg);
    *rootp = root;
    return fed_partition(*f);
}

static void assert_clients_hold_their_rows(const Partition *p, const int *client, int n) {
    ck_assert_int_eq(p->n_clients, 3);
    int total = 0;
    for (int k = 0; k < 3; k++) {
        int at = 0;
        for (int i = 0; i < n; i++)
            if (client[i] == k) {
                ck_assert_msg(at < p->count[k] && p->idx[k][at] == (uint32_t)i, "client %d lacks row %d", k, i);
                at++;
            }
        ck_assert_int_eq(at, p->count[k]);
        total += at;
    }
    ck_assert_int_eq(total, n);
}

START_TEST(csv_client_column_gives_the_natural_partition) {
    char dir[512], train[700], test[700], cfg[700];
    scratch_make(dir, sizeof dir, "byo");
    write_client_csv(scratch_path(dir, "t-train.csv", train, sizeof train), 45);
    write_client_csv(scratch_path(dir, "t-test.csv", test, sizeof test), 12);
    scratch_path(dir, "c.json", cfg, sizeof cfg);
    write_text(cfg, "{\"seed\": 2, \"threads\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"t-{split}.csv\"},"
                    " \"model\": {\"name\": \"logreg\"},"
                    " \"federation\": {\"clients\": 3, \"rounds\": 2, \"partition\": \"natural\"}}");
    Experiment ex;
    Federation *f = NULL;
    cJSON *root = NULL;
    const Partition *p = federation_partition(cfg, &ex, &f, &root);
    int client[45];
    for (int i = 0; i < 45; i++)
        client[i] = sorted_id(client_of_row(i));
    ck_assert_int_eq(ex.train->w, 2); // the client column is no feature
    assert_clients_hold_their_rows(p, client, 45);
    fed_free(f);
    experiment_free(&ex);
    cJSON_Delete(root);
    // It trains through the CLI, and a federation of another size is refused in one line.
    if (cli_have_bin()) {
        char out[8192], err[8192];
        const char *args[] = {"train", "--config", cfg, NULL};
        int rc = cli_run(args, out, err, sizeof out);
        ck_assert_msg(rc == 0, "rc %d: %s", rc, err);
        write_text(cfg, "{\"seed\": 2, \"dataset\": {\"name\": \"csv\", \"path\": \"t-{split}.csv\"},"
                        " \"model\": {\"name\": \"logreg\"},"
                        " \"federation\": {\"clients\": 4, \"rounds\": 1, \"partition\": \"natural\"}}");
        rc = cli_run(args, out, err, sizeof out);
        ck_assert_int_eq(rc, 2);
        assert_one_clean_line(err);
        ck_assert_msg(strstr(err, "t-train.csv") && strstr(err, "3 clients"), "%s", err);
    }
    scratch_remove(dir);
}
END_TEST

START_TEST(partition_file_gives_any_dataset_clients) {
    char dir[512], p[700], cfg[700];
    scratch_make(dir, sizeof dir, "byo");
    snprintf(p, sizeof p, "%s/arr", dir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    // A table as .npy: 40 rows of 3 float64 features, labels 0/1.
    double x[40][3];
    long long y[40];
    int32_t ids[40];
    for (int i = 0; i < 40; i++) {
        for (int j = 0; j < 3; j++)
            x[i][j] = sin(i * 1.3 + j);
        y[i] = i % 2;
        ids[i] = (i * 5 + 1) % 3;
    }
    long long xs[2] = {40, 3}, ys[1] = {40};
    write_npy(scratch_path(dir, "arr/x_train.npy", p, sizeof p), "<f8", xs, 2, x, sizeof x);
    write_npy(scratch_path(dir, "arr/y_train.npy", p, sizeof p), "<i8", ys, 1, y, sizeof y);
    write_npy(scratch_path(dir, "arr/x_test.npy", p, sizeof p), "<f8", xs, 2, x, sizeof x);
    write_npy(scratch_path(dir, "arr/y_test.npy", p, sizeof p), "<i8", ys, 1, y, sizeof y);
    // The partition file as text, then as .npy: the same clients.
    FILE *f = fopen(scratch_path(dir, "parts.txt", p, sizeof p), "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "client\n");
    for (int i = 0; i < 40; i++)
        fprintf(f, "%d\n", ids[i]);
    fclose(f);
    long long is[1] = {40};
    write_npy(scratch_path(dir, "parts.npy", p, sizeof p), "<i4", is, 1, ids, sizeof ids);
    static const char *const files[] = {"parts.txt", "parts.npy"};
    for (int k = 0; k < 2; k++) {
        char json[600];
        snprintf(json, sizeof json,
                 "{\"seed\": 2, \"threads\": 1, \"dataset\": {\"name\": \"npy\", \"path\": \"arr\", \"partition_file\": "
                 "\"%s\"}, \"model\": {\"name\": \"logreg\"},"
                 " \"federation\": {\"clients\": 3, \"rounds\": 1, \"partition\": \"natural\"}}",
                 files[k]);
        write_text(scratch_path(dir, "c.json", cfg, sizeof cfg), json);
        Experiment ex;
        Federation *fed = NULL;
        cJSON *root = NULL;
        const Partition *part = federation_partition(cfg, &ex, &fed, &root);
        int client[40];
        for (int i = 0; i < 40; i++)
            client[i] = ids[i];
        assert_clients_hold_their_rows(part, client, 40);
        fed_free(fed);
        experiment_free(&ex);
        cJSON_Delete(root);
    }
    // One id too few: one line naming the file, exit 2.
    if (cli_have_bin()) {
        write_npy(scratch_path(dir, "parts.npy", p, sizeof p), "<i4", (long long[]){39}, 1, ids, sizeof ids - 4);
        char out[8192], err[8192];
        const char *args[] = {"train", "--config", cfg, NULL};
        ck_assert_int_eq(cli_run(args, out, err, sizeof out), 2);
        assert_one_clean_line(err);
        ck_assert_msg(strstr(err, "parts.npy") && strstr(err, "39 client ids for the 40 samples"), "%s", err);
    }
    scratch_remove(dir);
}
END_TEST

// A config's data path is its folder's, not the working directory's, and the result keeps it.
START_TEST(config_paths_are_relative_to_the_config) {
    SKIP_UNLESS_BIN();
    char dir[512], sub[PATH_MAX], p[PATH_MAX + 100], cfg[PATH_MAX + 100], res[800];
    scratch_make(dir, sizeof dir, "byo");
    snprintf(p, sizeof p, "%s/project", dir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    ck_assert_ptr_nonnull(realpath(p, sub)); // what the result records
    write_client_csv(scratch_path(sub, "t.csv", p, sizeof p), 36);
    scratch_path(sub, "c.json", cfg, sizeof cfg);
    write_text(cfg, "{\"seed\": 1, \"threads\": 1, \"dataset\": {\"name\": \"csv\", \"path\": \"t.csv\"},"
                    " \"model\": {\"name\": \"logreg\"}, \"federation\": {\"clients\": 2, \"rounds\": 1}}");
    scratch_path(dir, "r.json", res, sizeof res);
    char out[8192], err[8192];
    const char *args[] = {"train", "--config", cfg, "--out", res, NULL};
    int rc = cli_run(args, out, err, sizeof out);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, err);
    cJSON *r = NULL;
    FpError e = {0};
    ck_assert_msg(jv_load_file(res, &r, &e) == FP_OK, "%s", e.msg);
    const cJSON *path = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "config"), "dataset"), "path");
    ck_assert_msg(cJSON_IsString(path), "the result's config drops dataset.path");
    ck_assert_str_eq(path->valuestring, p);
    cJSON_Delete(r);
    scratch_remove(dir);
}
END_TEST

// ---- refusals --------------------------------------------------------------------------------------

static FpStatus parse_header(const char *header_text, size_t data_bytes, FpError *err) {
    size_t hl = strlen(header_text);
    size_t len = 10 + hl + data_bytes;
    unsigned char *b = calloc(1, len + 1);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(hl & 0xff);
    b[9] = (unsigned char)(hl >> 8);
    memcpy(b + 10, header_text, hl);
    NpyArray a;
    FpStatus st = npy_parse("h.npy", b, len, &a, err);
    free(b);
    return st;
}

START_TEST(npy_headers_are_parsed_strictly) {
    FpError err = {0};
    ck_assert_msg(parse_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }  \n", 24, &err) == FP_OK,
                  "%s", err.msg);
    ck_assert_msg(parse_header("{\"shape\": (6,), \"descr\": \"|u1\", \"fortran_order\": False}\n", 6, &err) == FP_OK,
                  "%s", err.msg);
    static const struct {
        const char *header;
        size_t data;
        const char *needle;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 20, "declares 6 items"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000000000), }\n", 8, "declares"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n", 4, "dtype '>f4'"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }\n", 8, "dtype"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }\n", 4, "Fortran-order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}\n", 4, "unknown key 'extra'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n", 4, "repeated key"},
        {"{'descr': '<f4', 'shape': (1,)}\n", 4, "lacks 'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4, "newline"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x\n", 4, "text after"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n", 4, "shape"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", 4, "structured"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }\n", 4, "at most 8"},
        {"{'descr': '<f4',\x01 'fortran_order': False, 'shape': (1,), }\n", 4, "control byte"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        ck_assert_msg(parse_header(bad[i].header, bad[i].data, &err) == FP_EFORMAT, "accepted: %s", bad[i].header);
        ck_assert_msg(strstr(err.msg, "h.npy") && strstr(err.msg, bad[i].needle), "%zu: \"%s\" lacks \"%s\"", i,
                      err.msg, bad[i].needle);
        ck_assert(strchr(err.msg, '\n') == NULL);
    }
    // A header length beyond the file, a bad magic, an unknown version.
    unsigned char b[16] = "\x93NUMPY\x01\x00\xff\xff{}\n";
    NpyArray a;
    ck_assert_int_eq(npy_parse("h.npy", b, sizeof b, &a, &err), FP_EFORMAT);
    b[6] = 9;
    ck_assert_int_eq(npy_parse("h.npy", b, sizeof b, &a, &err), FP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "version 9.0"));
    b[0] = 'P';
    ck_assert_int_eq(npy_parse("h.npy", b, sizeof b, &a, &err), FP_EFORMAT);
}
END_TEST

// Bad arrays through the CLI: exit 2, one line naming the file, no result written.
START_TEST(bad_arrays_are_refused_naming_the_file) {
    SKIP_UNLESS_BIN();
    char dir[512], p[800], cfg[800], res[800];
    scratch_make(dir, sizeof dir, "byo");
    static unsigned char px[10 * 6 * 6];
    static const long long y[10] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, ybad[10] = {0, 1, -1, 0, 1, 2, 0, 1, 2, 0};
    static float fx[10 * 36];
    for (int i = 0; i < 10 * 36; i++)
        fx[i] = 1.5f;
    static const struct {
        const char *case_name, *x_descr;
        long long xshape[4];
        int xndim;
        const void *x;
        size_t xbytes;
        long long ylen;
        const long long *y;
        const char *needle;
    } cases[] = {
        {"lengths", "|u1", {10, 6, 6}, 3, px, sizeof px, 9, y, "y_train.npy: shape (9,) for 10 samples"},
        {"label", "|u1", {10, 6, 6}, 3, px, sizeof px, 10, ybad, "y_train.npy: value -1 at index 2"},
        {"layout", "|u1", {10, 3, 3, 4}, 4, px, sizeof px, 10, y, "x_train.npy: shape (10, 3, 3, 4) is neither"},
        {"range", "<f4", {10, 6, 6}, 3, fx, sizeof fx, 10, y, "x_train.npy: sample 0 value 0 is 1.5"},
        {"dims", "|u1", {360}, 1, px, sizeof px, 10, y, "x_train.npy: a 1-dimensional array"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char sub[700];
        snprintf(sub, sizeof sub, "%s/%s", dir, cases[c].case_name);
        ck_assert_int_eq(mkdir(sub, 0700), 0);
        write_npy(scratch_path(sub, "x_train.npy", p, sizeof p), cases[c].x_descr, cases[c].xshape, cases[c].xndim,
                  cases[c].x, cases[c].xbytes);
        write_npy(scratch_path(sub, "y_train.npy", p, sizeof p), "<i8", &cases[c].ylen, 1, cases[c].y,
                  sizeof(long long) * (size_t)cases[c].ylen);
        write_npy(scratch_path(sub, "x_test.npy", p, sizeof p), cases[c].x_descr, cases[c].xshape, cases[c].xndim,
                  cases[c].x, cases[c].xbytes);
        write_npy(scratch_path(sub, "y_test.npy", p, sizeof p), "<i8", &cases[c].ylen, 1, cases[c].y,
                  sizeof(long long) * (size_t)cases[c].ylen);
        char json[400];
        snprintf(json, sizeof json, "{\"dataset\": {\"name\": \"npy\", \"path\": \"%s\"}, \"model\": {\"name\": "
                 "\"logreg\"}, \"federation\": {\"clients\": 2, \"rounds\": 1}}", cases[c].case_name);
        write_text(scratch_path(dir, "c.json", cfg, sizeof cfg), json);
        scratch_path(dir, "r.json", res, sizeof res);
        char out[8192], err[8192];
        const char *args[] = {"train", "--config", cfg, "--out", res, NULL};
        ck_assert_msg(cli_run(args, out, err, sizeof out) == 2, "%s: %s", cases[c].case_name, err);
        assert_one_clean_line(err);
        ck_assert_msg(strstr(err, cases[c].needle) && strstr(err, sub), "%s: \"%s\" lacks \"%s\"", cases[c].case_name,
                      err, cases[c].needle);
        struct stat st;
        ck_assert_msg(stat(res, &st) != 0, "%s: a result was written", cases[c].case_name);
    }
    // An .npz that is not a zip; an image folder with images of two sizes.
    write_text(scratch_path(dir, "bad.npz", p, sizeof p), "PK\x03\x04 not really a zip");
    write_text(cfg, "{\"dataset\": {\"name\": \"npz\", \"path\": \"bad.npz\"}, \"model\": {\"name\": \"logreg\"}}");
    char out[8192], err[8192];
    const char *args[] = {"train", "--config", cfg, NULL};
    ck_assert_int_eq(cli_run(args, out, err, sizeof out), 2);
    assert_one_clean_line(err);
    ck_assert_msg(strstr(err, "bad.npz: not a readable .npz"), "%s", err);
    // Members whose declared size their stored or deflated bytes cannot hold: refused
    // before anything of that size is allocated.
    size_t nlen;
    long long s1[1] = {4};
    unsigned char *member = npy_bytes("|u1", s1, 1, "abcd", 4, &nlen);
    static const struct {
        int method;
        unsigned long declared;
    } forged[] = {{0, 0x7fffffffUL}, {8, 0xfffffff0UL}};
    for (int k = 0; k < 2; k++) {
        write_forged_zip(scratch_path(dir, "bad.npz", p, sizeof p), "x_train.npy", member, (unsigned long)nlen,
                         forged[k].method, forged[k].declared);
        ck_assert_int_eq(cli_run(args, out, err, sizeof out), 2);
        assert_one_clean_line(err);
        ck_assert_msg(strstr(err, "bad.npz:x_train.npy: declares") && strstr(err, "not a size it can hold"), "%s",
                      err);
    }
    // The same member with its true size is read (and then lacks its labels).
    write_forged_zip(p, "x_train.npy", member, (unsigned long)nlen, 0, (unsigned long)nlen);
    ck_assert_int_eq(cli_run(args, out, err, sizeof out), 2);
    ck_assert_msg(strstr(err, "no labels"), "%s", err);
    free(member);
    snprintf(p, sizeof p, "%s/img", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/img/a", dir);
    mkdir(p, 0700);
    float img[64] = {0};
    FpError e = {0};
    ck_assert(png_write_gray(scratch_path(dir, "img/a/1.png", p, sizeof p), img, 6, 6, &e) == FP_OK);
    ck_assert(png_write_gray(scratch_path(dir, "img/a/2.png", p, sizeof p), img, 8, 8, &e) == FP_OK);
    write_text(cfg, "{\"dataset\": {\"name\": \"imagefolder\", \"path\": \"img\"}, \"model\": {\"name\": \"logreg\"}}");
    ck_assert_int_eq(cli_run(args, out, err, sizeof out), 2);
    assert_one_clean_line(err);
    ck_assert_msg(strstr(err, "img/a/2.png: a 1x8x8 image"), "%s", err);
    scratch_remove(dir);
}
END_TEST

Suite *suite_byo_data(void) {
    Suite *s = suite_create("byo_data");
    TCase *tc = tcase_create("formats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, same_subset_trains_the_same_in_every_format);
    tcase_add_test(tc, csv_client_column_gives_the_natural_partition);
    tcase_add_test(tc, partition_file_gives_any_dataset_clients);
    tcase_add_test(tc, config_paths_are_relative_to_the_config);
    tcase_add_test(tc, npy_headers_are_parsed_strictly);
    tcase_add_test(tc, bad_arrays_are_refused_naming_the_file);
    suite_add_tcase(s, tc);
    return s;
}
