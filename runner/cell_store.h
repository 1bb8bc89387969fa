// The cells of a matrix run on disk, written by any number of processes at once: the
// processes of one run (--jobs), shards of a Slurm job array, MPI ranks, on one machine
// or on many that share the folder over NFS. Correctness never rests on a lock (flock
// is not reliable over NFS); it rests on atomic renames and on names no two writers
// share. Layout inside DIR/cells/:
//
//   ID.json                  the cell's result; its appearance (atomic rename of a
//                            temp file) is the commit. Finished = status done or
//                            diverged with the current spec hash.
//   ID/                      its artifacts, complete: renamed into place from a work
//                            folder before ID.json is written
//   ID.partial.TAG/          a writer's work folder while the cell runs (TAG = HOST.PID,
//                            core/proc.h): two writers of one cell never share it
//   ID.running               the claim: who runs the cell (host, pid, shard, rank, since
//                            when), rewritten atomically by each writer that starts it,
//                            removed when the cell is committed; information only
//   *.tmp.TAG, ID.stale.TAG  a writer's temp file, a folder being removed
//
// Two writers of one cell (a shard run twice, a rerun while the first still runs) both
// compute it, deterministically; the first to commit a finished result wins and the
// second discards its own: a finished cell is never replaced, except a diverged one by
// its retry (runner/matrix.h). A failed attempt never
// displaces artifacts already in place. Only when two writers commit at the same instant
// may ID.json come from one and ID/ from the other; with the reproducible RNG their
// contents are the same (timings aside).
//
// Leftovers of a killed writer (work folder, temp files, claim) are removed by any later
// run on the same host once that PID is dead; a writer's leftovers on another host stay
// until a run there (they are ignored by every reader and never mistaken for results).
#ifndef FEDPRIV_RUNNER_CELL_STORE_H
#define FEDPRIV_RUNNER_CELL_STORE_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "core/status.h"
#include "reports/results.h"

// mkdir -p.
FpStatus store_make_dirs(const char *dir, FpError *err);
// Removes a folder and what is in it (links are removed, not followed).
void store_rm_tree(const char *path);

// DIR/cells/ID.json, DIR/cells/ID (n bytes each).
void store_cell_json_path(const char *dir, const char *id, char *buf, size_t n);
void store_cell_dir_path(const char *dir, const char *id, char *buf, size_t n);

// The status recorded in DIR/cells/ID.json when it holds spec hash `hash`; CELL_PENDING
// when missing, unreadable or another spec. Its "message" into message (may be NULL).
CellStatus store_cell_status(const char *dir, const char *id, const char *hash, char *message, size_t n);
// The same, and (retries not NULL) the cell's "run": {"diverged_retries"} (0 when absent).
CellStatus store_cell_status_retries(const char *dir, const char *id, const char *hash, char *message, size_t n,
                                     int *retries);

// Claims cell ID for this process: writes DIR/cells/ID.running with `who` (an object:
// shard, rank, job ...) plus host, pid, tag and the start time.
FpStatus store_claim(const char *dir, const char *id, const char *hash, const cJSON *who, FpError *err);
// The claim of cell ID, or NULL when there is none (or it cannot be read).
cJSON *store_claim_read(const char *dir, const char *id);

// Creates this process's work folder for cell ID (emptied first when a dead process with
// the same tag left one) into partial (n bytes).
FpStatus store_partial_create(const char *dir, const char *id, char *partial, size_t n, FpError *err);

// Commits a cell: cell_json (with "status" and "spec_hash") and the artifacts in partial.
// When DIR/cells/ID.json already holds a finished result for the same hash, ours is
// discarded and *kept_existing is 1 (a diverged result is finished for a writer with no
// more "run": {"diverged_retries"} than it: a retry replaces it, a second writer of the
// same retry does not). The claim is removed either way.
FpStatus store_commit(const char *dir, const char *id, const char *hash, const char *partial, const cJSON *cell_json,
                      int *kept_existing, FpError *err);

// Removes the leftovers of dead writers on this host (work folders, stale folders, temp
// files, claims). exclusive = 1 (this process alone writes the folder, by a lock) also
// removes leftovers of older fedpriv versions, whose names carry no host.
void store_clean_leftovers(const char *dir, int exclusive);

// Before a run or a status: nothing in DIR/cells is a symbolic link or anything but a
// regular file or a folder (a FIFO, socket or device planted there). FP_EFORMAT naming
// the first one; FP_OK when DIR/cells does not exist. The readers and writers refuse
// such files anyway (core/files.h); this says so once, up front, instead of treating
// the cell as pending.
FpStatus store_check_files(const char *dir, FpError *err);

#endif
