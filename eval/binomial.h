// Confidence intervals of a binomial proportion and of an AUC, for the figures the
// membership attacks report (attacks/mia_metrics.c). Both are stated at a two-sided
// level 1 − alpha (0.05 in every report).
//   Clopper–Pearson (1934): the exact interval of k successes in n trials,
//     lo = B⁻¹(alpha/2; k, n − k + 1), hi = B⁻¹(1 − alpha/2; k + 1, n − k),
//     with lo = 0 at k = 0 and hi = 1 at k = n; found by bisection on the regularised
//     incomplete beta function I_x(a, b) (Numerical Recipes §6.4's continued fraction).
//   Hanley & McNeil (1982), eq. 2: the standard error of an AUC A from n1 positives and
//     n0 negatives, Q1 = A / (2 − A), Q2 = 2A² / (1 + A),
//     SE² = (A(1 − A) + (n1 − 1)(Q1 − A²) + (n0 − 1)(Q2 − A²)) / (n1 n0),
//     and the normal interval A ± z SE, clipped to [0, 1]. At A = ½ it is the
//     Mann–Whitney null's SE² ≈ (n1 + n0) / (12 n1 n0).
#ifndef FEDPRIV_EVAL_BINOMIAL_H
#define FEDPRIV_EVAL_BINOMIAL_H

// I_x(a, b), a, b > 0.
double binom_beta_inc(double a, double b, double x);
// The two-sided Clopper–Pearson interval of k successes in n >= 1 trials at level 1 − alpha.
void binom_cp_interval(long long k, long long n, double alpha, double *lo, double *hi);
// The Hanley–McNeil interval of an AUC at level 1 − alpha.
void binom_auc_interval(double auc, long long n_pos, long long n_neg, double alpha, double *lo, double *hi);

#endif
