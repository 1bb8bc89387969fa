// Log-space helpers the RDP accountants share (accountant_rdp.c, accountant_sampled.c,
// accountant_discrete.c): their binomial sums are evaluated as ln-terms with lgamma and
// a running log-sum-exp, so no term overflows at large orders.
#ifndef FEDPRIV_DEFENSES_DP_ACCOUNTANT_LOGSPACE_H
#define FEDPRIV_DEFENSES_DP_ACCOUNTANT_LOGSPACE_H

#include <math.h>

// ln Γ(x), through the reentrant form: lgamma() writes the global signgam.
static inline double lgam(double x) {
    int sign;
    return lgamma_r(x, &sign);
}

// ln C(n, k) for 0 <= k <= n.
static inline double log_binom(double n, double k) { return lgam(n + 1.0) - lgam(k + 1.0) - lgam(n - k + 1.0); }

// Adds e^x to the running sum m + ln(sum) (start from m = -INFINITY, sum = 0).
static inline void lse_push(double *m, double *sum, double x) {
    if (x == -INFINITY)
        return;
    if (x > *m) {
        *sum = *sum * exp(*m - x) + 1.0;
        *m = x;
    } else {
        *sum += exp(x - *m);
    }
}

#endif
