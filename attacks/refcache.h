// The on-disk reference-model cache of the membership attacks. A reference (shadow)
// model is identified by its identity text: the training procedure (architecture,
// federation settings, defense, target kind, backend), its training data (indices and a
// hash of their content), its seed, and the version of the training code
// (FEDPRIV_VERSION, as in a matrix cell's identity: a change to what training computes
// must raise it). Once trained, only its logits on the queried samples are kept, not
// its weights: an entry holds n_query × n_classes floats, so the cache grows with
// candidates × models, not with models × parameters. (LiRA's augmented queries store
// every view of a query in its row: n_classes is then views × classes, and the identity
// names the views, so one-view and augmented entries never meet.)
//
// One file per identity, DIR/HASH.ref (HASH: 32 hex digits of two 64-bit hashes of the
// identity text; the text itself is stored and compared, so a collision is a miss, not a
// wrong answer). Layout (host byte order; a byte-order mark rejects a foreign file):
//
//   "FPREFLG1"  u32 0x01020304  u32 format (1)  u32 identity_len  u32 n_query  u32 n_classes
//   f64 test_accuracy           of the model on the shadow test set
//   identity bytes
//   u32 query[n_query]          indices into the training set
//   u64 content[n_query]        a hash of each queried sample (features and label)
//   u8  member[n_query]         what the model's training was to each query (MIA_Q_* of
//                               attacks/target.h: out, in its member set, another client's)
//   f32 logits[n_query × n_classes]
//   u32 crc32 of everything before it (zlib)
//
// DIR is a run folder's cache folder, "RUN/reference-models": RUN is the user's choice (a
// link is followed), DIR's last component and the entries are opened through the one
// opener of core/files.h (fp_open_beneath): a DIR that is a symbolic link (to a folder
// outside the run), an entry that is a link, a FIFO or anything but a regular file is
// refused, never followed, read or waited on. An entry's size (fstat) is checked against
// the format's limit (REFCACHE_MAX_BYTES, 1 GiB) and its header (magic first) read before
// the rest, so a large file that is not an entry is refused after 36 bytes.
//
// Writing is atomic like the matrix's cells: a temp file of a unique name in DIR
// (O_EXCL | O_NOFOLLOW at DIR's descriptor), fsync, rename at that descriptor. Processes or threads that race on one entry (matrix shards,
// MPI ranks, parallel workers) each rename a complete file; the last rename wins and a
// reader sees one complete file or none, never a torn one. Entries of one identity and
// query list are byte-identical wherever they are computed (the training is
// deterministic and no timing is stored).
// A lookup hits when the identity matches and the entry's queries start with the
// requested ones (same indices, same content hashes): an entry scored on more
// population samples serves a request for fewer.
#ifndef FEDPRIV_ATTACKS_REFCACHE_H
#define FEDPRIV_ATTACKS_REFCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

// A 64-bit hash (not a security boundary): h0 the start value (REFCACHE_HASH_START or a
// previous result to continue).
#define REFCACHE_HASH_START 0xcbf29ce484222325ull
uint64_t refcache_hash(uint64_t h0, const void *data, size_t n);

// The entry's file name for an identity: DIR/HASH.ref (out: at least len(dir) + 40 bytes).
void refcache_path(const char *dir, const char *identity, char *out, size_t n);

// Looks up identity in dir. *hit = 1 and logits (n_query × n_classes) and member
// (n_query codes; may be NULL) filled when a valid entry covers the queries; *hit = 0 when there is none (or it covers other
// queries). A damaged entry (truncated, bad checksum, foreign format, a link or not a
// regular file, and, checksum or not, a logit that is not finite or a test accuracy
// outside [0, 1]: no trained model gives those) is FP_EFORMAT with the file named,
// *hit = 0: the caller reports it, retrains and overwrites it.
FpStatus refcache_load(const char *dir, const char *identity, const uint32_t *query, const uint64_t *content,
                       int n_query, int n_classes, float *logits, unsigned char *member, double *test_accuracy,
                       int *hit, FpError *err);

// Writes the entry atomically (creates dir when missing; its parent must exist). member
// may be NULL (all zero). Logits that are not finite are not stored (FP_EPARAM).
FpStatus refcache_store(const char *dir, const char *identity, const uint32_t *query, const uint64_t *content,
                        int n_query, int n_classes, const float *logits, const unsigned char *member,
                        double test_accuracy, FpError *err);

// Before a run: dir, when it exists, is a folder and not a symbolic link, and holds no
// link, FIFO, socket or device (FP_EFORMAT naming the first; the loads would refuse them
// one by one anyway); a missing dir is fine (the first store makes it).
FpStatus refcache_check_dir(const char *dir, FpError *err);

#endif
