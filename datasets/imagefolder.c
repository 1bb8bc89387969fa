// Image folders in torchvision's ImageFolder layout: ROOT/CLASS/IMAGE.png, one subfolder
// per class. As torchvision numbers them, the classes are the subfolder names sorted
// (bytewise, which is code-point order for UTF-8 names) and numbered 0..K-1, and the
// samples are the classes in that order, each class's images sorted by file name.
// Names starting with '.' are skipped, and so are files not ending in .png (any case);
// images are read through libpng (core/png.h) and must all have one shape (c×h×w).
//
// Splits (dataset_open "imagefolder"): a path with "{split}" names one folder per split;
// else ROOT/train and ROOT/test when ROOT/train exists; else ROOT itself, 1/6 held out
// (dataset_holdout). The classes are always the training folder's, so a test folder
// that lacks a class keeps the others' numbers; a test class unknown to training is
// refused.
#include "datasets/dataset.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/files.h"
#include "core/png.h"

#define IMAGEFOLDER_MAX_FILE ((size_t)64 << 20) // one PNG image
#define IMAGEFOLDER_MAX_ENTRIES (1 << 24)

typedef struct {
    char **name;
    int n, cap;
} Names;

static void names_free(Names *l) {
    for (int i = 0; i < l->n; i++)
        free(l->name[i]);
    free(l->name);
    memset(l, 0, sizeof *l);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_png_name(const char *s) {
    size_t n = strlen(s);
    return n > 4 && strcasecmp(s + n - 4, ".png") == 0;
}

// The sorted entries of dir that are folders (want_dirs) or .png files.
static FpStatus list_dir(const char *dir, int want_dirs, Names *out, FpError *err) {
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d)
        return fp_fail(err, FP_EIO, "%s: cannot open the folder", dir);
    struct dirent *de;
    FpStatus st = FP_OK;
    while (st == FP_OK && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[4400];
        struct stat sb;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= sizeof p || stat(p, &sb) != 0)
            continue;
        if (want_dirs ? !S_ISDIR(sb.st_mode) : !(S_ISREG(sb.st_mode) && is_png_name(de->d_name)))
            continue;
        if (out->n == out->cap) {
            int cap = out->cap ? 2 * out->cap : 64;
            char **nn = cap <= IMAGEFOLDER_MAX_ENTRIES ? realloc(out->name, sizeof(char *) * (size_t)cap) : NULL;
            if (!nn) {
                st = fp_fail(err, cap > IMAGEFOLDER_MAX_ENTRIES ? FP_EFORMAT : FP_ENOMEM, "%s: too many entries", dir);
                break;
            }
            out->name = nn;
            out->cap = cap;
        }
        if (!(out->name[out->n] = strdup(de->d_name)))
            st = fp_fail(err, FP_ENOMEM, "%s: out of memory", dir);
        else
            out->n++;
    }
    closedir(d);
    if (st != FP_OK) {
        names_free(out);
        return st;
    }
    if (out->n)
        qsort(out->name, (size_t)out->n, sizeof(char *), cmp_name);
    return FP_OK;
}

// Reads ROOT (classes: the names that number the labels; ROOT's own subfolders must be
// among them) into *out.
static FpStatus load_root(const char *root, const Names *classes, const char *name, Dataset **out, FpError *err) {
    *out = NULL;
    Names sub = {0};
    FP_TRY(list_dir(root, 1, &sub, err));
    Names *files = fp_calloc((size_t)(sub.n ? sub.n : 1), sizeof(Names), err);
    int *label = fp_calloc((size_t)(sub.n ? sub.n : 1), sizeof(int), err);
    FpStatus st = files && label ? FP_OK : FP_ENOMEM;
    long long n = 0;
    char p[8800];
    for (int k = 0; st == FP_OK && k < sub.n; k++) {
        char **hit = bsearch(&sub.name[k], classes->name, (size_t)classes->n, sizeof(char *), cmp_name);
        if (!hit) {
            char e[80];
            st = fp_fail(err, FP_EFORMAT, "%s/%s: a class the training folder does not have", root,
                         fp_escape(sub.name[k], e, sizeof e));
            break;
        }
        label[k] = (int)(hit - classes->name);
        snprintf(p, sizeof p, "%s/%s", root, sub.name[k]);
        st = list_dir(p, 0, &files[k], err);
        if (st == FP_OK && files[k].n == 0)
            st = fp_fail(err, FP_EFORMAT, "%s: a class folder without .png images", p);
        n += files[k].n;
    }
    if (st == FP_OK && sub.n == 0)
        st = fp_fail(err, FP_EFORMAT, "%s: no class folders (ImageFolder layout: ROOT/CLASS/IMAGE.png)", root);
    if (st == FP_OK && n > (1 << 30))
        st = fp_fail(err, FP_EFORMAT, "%s: more than 2^30 images", root);
    Dataset *d = NULL;
    long long i = 0;
    for (int k = 0; st == FP_OK && k < sub.n; k++)
        for (int f = 0; st == FP_OK && f < files[k].n; f++, i++) {
            snprintf(p, sizeof p, "%s/%s/%s", root, sub.name[k], files[k].name[f]);
            char *buf = NULL;
            size_t len = 0;
            float *img = NULL;
            int c, h, w;
            st = fp_read_input(p, IMAGEFOLDER_MAX_FILE, &buf, &len, err);
            if (st == FP_OK)
                st = png_read_memory(p, buf, len, &img, &c, &h, &w, err);
            free(buf);
            if (st == FP_OK && !d && !(d = dataset_create(name, (int)n, c, h, w, classes->n, 0, err)))
                st = err ? err->code : FP_ENOMEM;
            if (st == FP_OK && (c != d->c || h != d->h || w != d->w))
                st = fp_fail(err, FP_EFORMAT, "%s: a %dx%dx%d image (channels x height x width); the first image of "
                             "the folder is %dx%dx%d", p, c, h, w, d->c, d->h, d->w);
            if (st == FP_OK) {
                memcpy(d->x + (size_t)i * dataset_sample_size(d), img, sizeof(float) * dataset_sample_size(d));
                d->y[i] = label[k];
            }
            free(img);
        }
    for (int k = 0; files && k < sub.n; k++)
        names_free(&files[k]);
    free(files);
    free(label);
    names_free(&sub);
    if (st != FP_OK) {
        dataset_free(d);
        return st == FP_ENOMEM && err && !err->msg[0] ? fp_fail(err, FP_ENOMEM, "%s: out of memory", root) : st;
    }
    snprintf(d->source, sizeof d->source, "%.300s", root);
    *out = d;
    return FP_OK;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

FpStatus imagefolder_open(const char *split, const char *path, Dataset **out, FpError *err) {
    *out = NULL;
    if (!path)
        return fp_fail(err, FP_EPARAM, "imagefolder: no path given (a folder ROOT/CLASS/IMAGE.png, with train/ and "
                       "test/ or \"{split}\" in the path)");
    char dir[4096], train_dir[4096];
    const char *mark = strstr(path, "{split}");
    int whole = 0;
    if (mark) {
        if ((size_t)snprintf(dir, sizeof dir, "%.*s%s%s", (int)(mark - path), path, split, mark + 7) >= sizeof dir ||
            (size_t)snprintf(train_dir, sizeof train_dir, "%.*strain%s", (int)(mark - path), path, mark + 7) >=
                sizeof train_dir)
            return fp_fail(err, FP_EPARAM, "imagefolder: path too long: %.200s", path);
    } else {
        if ((size_t)snprintf(train_dir, sizeof train_dir, "%s/train", path) >= sizeof train_dir)
            return fp_fail(err, FP_EPARAM, "imagefolder: path too long: %.200s", path);
        whole = !is_dir(train_dir);
        if (whole)
            snprintf(train_dir, sizeof train_dir, "%s", path);
        snprintf(dir, sizeof dir, "%s/%s", path, split);
        if (whole)
            snprintf(dir, sizeof dir, "%s", path);
    }
    if (!is_dir(train_dir))
        return fp_fail(err, FP_EIO, "imagefolder: %s: not a folder", train_dir);
    if (!is_dir(dir))
        return fp_fail(err, FP_EIO, "imagefolder: %s: not a folder", dir);
    Names classes = {0};
    FP_TRY(list_dir(train_dir, 1, &classes, err));
    char name[64];
    snprintf(name, sizeof name, "imagefolder/%s", split);
    Dataset *d = NULL;
    FpStatus st = load_root(dir, &classes, name, &d, err);
    names_free(&classes);
    if (st != FP_OK || !whole) {
        *out = d;
        return st;
    }
    st = dataset_holdout(d, DATASET_HOLDOUT_DENOM, split, out, err);
    dataset_free(d);
    if (st == FP_OK)
        snprintf((*out)->name, sizeof (*out)->name, "%s", name);
    return st;
}
