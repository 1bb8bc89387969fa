// core/progress.h.
#include "core/progress.h"

#include <stdarg.h>

#include "core/clock.h"
#include "core/status.h"

FpProgress fp_progress_start(FILE *f, long long total, double first, double every, const char *unit,
                             const char *label_fmt, ...) {
    double t0 = fp_monotonic_seconds();
    FpProgress p = {.f = f, .unit = unit, .t0 = t0, .next = t0 + first, .every = every, .total = total};
    va_list ap;
    va_start(ap, label_fmt);
    vsnprintf(p.label, sizeof p.label, label_fmt, ap);
    va_end(ap);
    return p;
}

void fp_progress_add(FpProgress *p, long long n) {
    p->done += n;
    if (!p->f || p->done >= p->total)
        return;
    double now = fp_monotonic_seconds();
    if (now < p->next)
        return;
    double el = now - p->t0, eta = el * (double)(p->total - p->done) / (double)p->done;
    int hours = eta >= 7200;
    // The label may hold a config's text (a matrix cell's): escaped, as every line is.
    fp_print_line(p->f, "%s: %lld of %lld %s (%.0f s, ETA %.0f %s)", p->label, p->done, p->total, p->unit, el,
                  hours ? eta / 3600 : eta, hours ? "h" : "s");
    fflush(p->f);
    p->next = now + p->every;
}
