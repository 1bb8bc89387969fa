// NumPy arrays in: the .npy format (NEP 1, versions 1.0, 2.0 and 3.0), alone or as the
// members of an .npz archive, and the datasets made of them.
//
// A .npy file is "\x93NUMPY", a major and a minor version byte, the header's length
// (2 bytes little endian in 1.0, 4 bytes in 2.0 and 3.0), then the header: a Python dict
// literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
// padded with spaces and ended by '\n', then the data, C order. The header is parsed
// strictly: exactly the three keys, once each, in any order; a descr this reader knows
// (|u1, |i1, <i4, <i8, <f4, <f8: big-endian, object, string and other arrays are
// refused, naming the descr); fortran_order False; a shape of at most
// NPY_MAX_DIMS non-negative integers whose product times the item size is exactly the
// bytes that follow the header. So nothing is allocated beyond what the file holds.
//
// Datasets (dataset_open "npy" and "npz", datasets/open.c): features x, labels y and
// optional client ids per split, the arrays named as Keras' mnist.npz names them:
//   x_train, y_train, x_test, y_test       (or x, y alone: 1/6 held out, dataset_holdout)
//   client_train (optional)               one client id per training sample
// "npz": path = the archive (np.savez / np.savez_compressed: each member NAME.npy);
// "npy": path = a folder holding the same names as files NAME.npy.
// x is N×F (a table), N×H×W (gray images), or N×C×H×W or N×H×W×C (channels first when
// the second dimension is at most 4 and the last is larger, channels last in the mirror
// case; any other 4-D shape is refused as ambiguous). uint8 values become v/255 (as the
// PNG and IDX loaders compute them); float32 and float64 are taken as they are (images
// must then lie in [0,1]). y: integers (|u1, <i4, <i8) in [0, max + 1); client ids the
// same, numbered as given (clients 0 .. max; each must hold at least one sample when
// the natural partition is used). Every array's first dimension must be N.
#ifndef FEDPRIV_DATASETS_NPY_H
#define FEDPRIV_DATASETS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "datasets/dataset.h"

#define NPY_MAX_DIMS 8
// The largest header accepted (NumPy itself writes at most a few hundred bytes).
#define NPY_MAX_HEADER 65536

typedef enum { NPY_U1 = 0, NPY_I1, NPY_I4, NPY_I8, NPY_F4, NPY_F8 } NpyDtype;

typedef struct NpyArray {
    NpyDtype dtype;
    int ndim;                       // 0 for a scalar
    int64_t shape[NPY_MAX_DIMS];
    size_t count;                   // product of shape (1 for a scalar)
    const unsigned char *data;      // count items, little endian, into the caller's buffer
} NpyArray;

// Parses a whole .npy file held in buf (len bytes; name for messages). On success a
// view into buf. FP_EFORMAT with one line naming the file for anything else.
FpStatus npy_parse(const char *name, const unsigned char *buf, size_t len, NpyArray *out, FpError *err);

// Item i as a double (exact for every dtype but i8 beyond 2^53).
double npy_get(const NpyArray *a, size_t i);
int npy_is_integer(const NpyArray *a);
const char *npy_dtype_name(NpyDtype t);

// The arrays of a split, by name, from a folder of NAME.npy files or an .npz archive.
typedef struct NpySource NpySource;
// path: a folder (npz = 0) or an .npz file (npz = 1, datasets/npz.c).
FpStatus npy_source_open(const char *path, int npz, NpySource **out, FpError *err);
void npy_source_free(NpySource *s);
// Whether the source holds an array called name (without ".npy").
int npy_source_has(const NpySource *s, const char *name);
// Reads the array called name: *buf (caller frees) holds the file, *a views into it.
// *where names it for messages ("dir/x_train.npy", "data.npz:x_train.npy").
FpStatus npy_source_read(const NpySource *s, const char *name, unsigned char **buf, NpyArray *a, char *where,
                         size_t where_size, FpError *err);

// npz.c's half of NpySource: the archive's member name.npy into a malloc'd buffer.
typedef struct NpzArchive NpzArchive;
FpStatus npz_open(const char *path, NpzArchive **out, FpError *err);
void npz_close(NpzArchive *z);
int npz_has(const NpzArchive *z, const char *member);
FpStatus npz_read(const NpzArchive *z, const char *member, unsigned char **buf, size_t *len, FpError *err);

// A dataset from arrays x (features) and y (labels, or NULL: unlabelled) and client ids
// (or NULL), named name, messages naming xw / yw / cw. The shapes and ranges above.
FpStatus npy_make_dataset(const char *name, const NpyArray *x, const char *xw, const NpyArray *y, const char *yw,
                          const NpyArray *client, const char *cw, Dataset **out, FpError *err);

// dataset_open's "npy" and "npz" (datasets/open.c).
FpStatus npy_open(const char *split, const char *path, Dataset **out, FpError *err);
FpStatus npz_open_dataset(const char *split, const char *path, Dataset **out, FpError *err);

// One integer per sample for a whole array: a 1-D integer array of n items whose values
// lie in [0, 2^31 − 1). *ids is malloc'd; *n_ids = max + 1. what names the array.
FpStatus npy_int_column(const NpyArray *a, const char *what, int n, int32_t **ids, int *n_ids, FpError *err);

#endif
