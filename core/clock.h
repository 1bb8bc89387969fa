// Seconds on a POSIX clock, for progress lines, ETAs and the time a result reports:
// CLOCK_MONOTONIC for elapsed time, CLOCK_THREAD_CPUTIME_ID for the calling thread's CPU
// time. Never an input to a result's values.
#ifndef FEDPRIV_CORE_CLOCK_H
#define FEDPRIV_CORE_CLOCK_H

#include <time.h>

static inline double fp_clock_seconds(clockid_t clk) {
    struct timespec t;
    clock_gettime(clk, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline double fp_monotonic_seconds(void) { return fp_clock_seconds(CLOCK_MONOTONIC); }

#endif
