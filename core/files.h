// Files without surprises: outputs created fresh and never through a symbolic link,
// run-folder files read back only from inside the folder, and outputs checked for
// writability before any work starts (so a long run cannot end in "cannot write").
//
// A run folder (`fedpriv matrix --out DIR`) is written by fedpriv and read back by
// `fedpriv report` and `fedpriv check`; anyone who can write into it can plant links.
// Reading through fp_read_beneath, a path from a result ("cells/X/0-dlg/rec.png") opens
// component by component with O_NOFOLLOW: a link anywhere on the way, "..", an absolute
// path or anything but a regular file is refused, so a report never inlines a file from
// outside DIR.
#ifndef FEDPRIV_CORE_FILES_H
#define FEDPRIV_CORE_FILES_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

// A new file at path, open for writing: created exclusively (an old file of that name,
// or a link planted there, is removed first, never followed). For the temporary names
// of atomic writes ("X.tmp.PID"). NULL with FP_EIO on failure.
FILE *fp_create_new(const char *path, FpError *err);

// Opens rel (relative, no "..", no empty component) beneath the folder dir for reading,
// refusing a symbolic link at any component and anything but a regular file (a FIFO
// does not block the open). Returns the descriptor, or -1 with FP_EIO (missing: the
// message says "no such file") or FP_EFORMAT (a link, a bad path, not a file).
int fp_open_beneath(const char *dir, const char *rel, FpError *err);

// Reads such a file whole into *buf (malloc'd, NUL-terminated; free it), at most max
// bytes (larger: FP_EFORMAT). *missing (when not NULL) is set to 1 when the file does
// not exist.
FpStatus fp_read_beneath(const char *dir, const char *rel, size_t max, char **buf, size_t *len, int *missing,
                         FpError *err);

// Before work starts: path can be written as a file (it is not a folder, its folder
// exists, and a file can be created there: a probe is created and removed).
FpStatus fp_check_writable_file(const char *path, FpError *err);

// Before work starts: dir is (or can be made as) a writable folder: an existing dir must
// be a folder that accepts a new file; a missing one needs a writable nearest existing
// parent.
FpStatus fp_check_writable_dir(const char *dir, FpError *err);

#endif
