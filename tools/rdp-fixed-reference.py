#!/usr/bin/env python3
"""Reference values for tests/test_accountant.c: RDP of the Gaussian mechanism on a
fixed-size sample without replacement (Wang, Balle, Kasiviswanathan 2019, Thm 9) and the
joint-convexity bound, evaluated with 50-digit mpmath arithmetic and exact binomials,
independently of the C code's log-space sums.

sigma is the noise multiplier for replace-one neighbours: the base mechanism has
eps(j) = j / (2 sigma^2) and eps(inf) = inf.

    python3 tools/rdp-fixed-reference.py    # prints the C table rows
"""

import mpmath as mp

mp.mp.dps = 50


def wbk_moment(q, sigma, alpha):
    """Thm 9's A at integer alpha >= 2 (so that (alpha-1) eps'(alpha) <= ln A)."""
    q, s2 = mp.mpf(q), mp.mpf(sigma) ** 2
    e2 = 2 / (2 * s2)
    a = 1 + q ** 2 * mp.binomial(alpha, 2) * min(4 * (mp.e ** e2 - 1), 2 * mp.e ** e2)
    for j in range(3, alpha + 1):
        a += 2 * q ** j * mp.binomial(alpha, j) * mp.e ** ((j - 1) * j / (2 * s2))
    return a


def joint_convexity(q, sigma, alpha):
    q, alpha = mp.mpf(q), mp.mpf(alpha)
    base = alpha / (2 * mp.mpf(sigma) ** 2)
    return min(base, mp.log(1 - q + q * mp.e ** ((alpha - 1) * base)) / (alpha - 1))


def fixed(q, sigma, alpha):
    alpha = mp.mpf(alpha)
    if alpha <= 2:
        w = mp.log(wbk_moment(q, sigma, 2))
    elif alpha == mp.floor(alpha):
        w = mp.log(wbk_moment(q, sigma, int(alpha))) / (alpha - 1)
    else:
        lo = int(mp.floor(alpha))
        t = alpha - lo
        w = ((1 - t) * mp.log(wbk_moment(q, sigma, lo)) + t * mp.log(wbk_moment(q, sigma, lo + 1))) / (alpha - 1)
    return min(w, joint_convexity(q, sigma, alpha))


CASES = [  # (q, sigma, alpha)
    (0.2, 0.5, 2), (0.2, 0.5, 3), (0.2, 0.5, 2.5), (0.2, 0.5, 1.5),
    (0.01, 2.0, 10), (0.01, 2.0, 32), (0.01, 2.0, 63), (0.05, 1.0, 8), (0.05, 1.0, 12.3),
    (0.001, 4.0, 256), (0.1, 3.0, 1024), (0.5, 1.0, 4),
]

if __name__ == "__main__":
    for q, s, a in CASES:
        print("        {%r, %r, %r, %s, %s}," % (q, s, a, mp.nstr(fixed(q, s, a), 17),
                                                 mp.nstr(joint_convexity(q, s, a), 17)))
