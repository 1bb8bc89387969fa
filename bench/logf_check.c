// The float log of the mechanism kernels (mech_logf, defenses/dp/mech_internal.h) on every
// float in [2^-34, 1]: its largest error against the long-double log, in units of the
// documented bound 2^-23(1 + |ln u|) (MECH_LOGF_ERR), and whether it is non-decreasing
// (the float laplace sampler's exact inverse search relies on it). About a minute.
// Built and run by bench/run-logf.sh; exit 1 if either property fails.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "defenses/dp/mech_internal.h"

int main(void) {
    float lo = 0x1p-34f, hi = 1.0f, prev = -INFINITY, worst_u = 0;
    uint32_t b0, b1;
    memcpy(&b0, &lo, 4);
    memcpy(&b1, &hi, 4);
    double worst = 0;
    long long decreasing = 0, n = 0;
    for (uint32_t b = b0; b <= b1; b++, n++) {
        float u;
        memcpy(&u, &b, 4);
        double l = (double)logl((long double)u);
        float lf = mech_logf(u);
        double r = fabs((double)lf - l) / MECH_LOGF_ERR(l);
        if (r > worst) {
            worst = r;
            worst_u = u;
        }
        decreasing += lf < prev;
        prev = lf;
    }
    printf("mech_logf on %lld floats in [2^-34, 1]: largest error %.4f of the bound 2^-23(1 + |ln u|) (at u = %a); "
           "%lld decreasing steps\n",
           n, worst, worst_u, decreasing);
    return worst <= 1 && decreasing == 0 ? 0 : 1;
}
