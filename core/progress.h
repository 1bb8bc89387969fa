// Progress of long work with a known total: one line on a stream at most every so many
// seconds, "LABEL: D of T UNIT (E s, ETA X s)" (the ETA in hours from 2 h), and none once
// the work is done. For the commands whose work grows with their inputs without bound
// (audit draws, inversion steps), so a mistyped size shows its cost at once. Not thread
// safe: a caller shared by threads holds its own lock around fp_progress_add.
#ifndef FEDPRIV_CORE_PROGRESS_H
#define FEDPRIV_CORE_PROGRESS_H

#include <stdio.h>

typedef struct FpProgress {
    FILE *f;             // NULL: silent
    char label[256];     // the line's prefix
    const char *unit;    // "draws", "inversion steps"
    double t0, next, every;
    long long done, total;
} FpProgress;

// The first line is due `first` seconds in, the next ones every `every` seconds; the
// label is formatted like printf.
FpProgress fp_progress_start(FILE *f, long long total, double first, double every, const char *unit,
                             const char *label_fmt, ...) __attribute__((format(printf, 6, 7)));

// Counts n more done, and prints the line when it is due.
void fp_progress_add(FpProgress *p, long long n);

#endif
