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

// Which files may be links. A path given on the command line (a config, a matrix, a
// baseline, a dataset, the run or output folder DIR itself) is the user's choice: it may
// be a symbolic link and is followed (configs kept in a dotfiles repository and linked
// into place are common). Everything fedpriv opens INSIDE a run or output folder (cells,
// claims, results.json, the locks, the reference-model cache and its folder, audit files
// such as multi-run.txt) can have been planted by anyone who can write there, so it goes
// through fp_open_beneath, for reads and writes alike: no link at any component below
// DIR, nothing but a regular file (or, asked for, a folder), and a FIFO never blocks.
// Atomic writes create their temporary name with fp_create_new (or O_EXCL | O_NOFOLLOW at
// a folder descriptor) and rename it into place, which replaces a planted link instead
// of writing through it. JSON input files (jv_load_file) are opened with fp_open_input:
// followed, but a regular file only, so a FIFO named as a config does not hang a command
// (and `--config <(...)` is refused: write the config to a file).

// The one opener of a file inside a run or output folder: rel (relative, no "..", no
// "." or empty component) beneath dir. Each component is opened with O_NOFOLLOW (the
// folders with O_DIRECTORY), the last with O_NONBLOCK, then fstat'd: a symbolic link
// anywhere below dir, or anything but a regular file, is refused (FP_EFORMAT); O_NONBLOCK
// is then cleared. flags: O_RDONLY, O_WRONLY or O_RDWR, with any of
//   O_CREAT      create the file (mode 0666 & ~umask) when missing, never through a link;
//   O_APPEND     writes go to the end;
//   O_TRUNC      the file is cut to 0 bytes, after the checks (only a regular file is cut);
//   O_DIRECTORY  rel names a folder (returned open O_RDONLY, for openat/renameat); with
//                O_CREAT its last component is made when missing.
// A file opened for writing must have one name (st_nlink 1): written in place, a hard
// link's other name would change too. Returns the descriptor (O_CLOEXEC), or -1 with
// FP_EIO (missing: the message says "no such file" and *missing, when not NULL, is 1)
// or FP_EFORMAT (a link, a bad path, not a regular file, a hard link written to).
int fp_open_beneath(const char *dir, const char *rel, int flags, int *missing, FpError *err);

// Reads such a file whole into *buf (malloc'd, NUL-terminated; free it), at most max
// bytes (fstat's size is checked before anything is read; larger: FP_EFORMAT). *missing
// (when not NULL) is set to 1 when the file does not exist.
FpStatus fp_read_beneath(const char *dir, const char *rel, size_t max, char **buf, size_t *len, int *missing,
                         FpError *err);

// A user input file given by path (a link is followed): opened O_RDONLY | O_NONBLOCK and
// refused unless fstat says it is a regular file (FP_EFORMAT: a FIFO, device or folder),
// then O_NONBLOCK cleared. -1 with FP_EIO when it cannot be opened.
int fp_open_input(const char *path, FpError *err);

// fp_open_input, then the file read whole like fp_read_beneath (at most max bytes).
FpStatus fp_read_input(const char *path, size_t max, char **buf, size_t *len, FpError *err);

// Before work starts: path can be written as a file (it is not a folder, its folder
// exists, and a file can be created there: a probe is created and removed).
FpStatus fp_check_writable_file(const char *path, FpError *err);

// Before work starts: dir is (or can be made as) a writable folder: an existing dir must
// be a folder that accepts a new file; a missing one needs a writable nearest existing
// parent.
FpStatus fp_check_writable_dir(const char *dir, FpError *err);

// Would writing the file out replace the input in? 1 when out exists and is in (the same
// device and inode: another spelling, a link or a hard link of it), or in is a folder and
// out lies beneath it (by realpath). An out that does not exist replaces nothing (0).
int fp_output_replaces(const char *out, const char *in);

#endif
