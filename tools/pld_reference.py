#!/usr/bin/python3
# Reference epsilons for the PLD accountant's tests (tests/test_accountant_pld.c), computed
# independently of defenses/dp/accountant_pld.c: no discretised loss grid, no FFT, no
# connect-the-dots construction, only mpmath numerical integration at 30 digits.
#
# The mechanism: k steps of the Poisson-subsampled Gaussian mechanism with sampling rate q
# and noise multiplier sigma, add/remove neighbours. One step's pair of output laws is
#   remove: P = (1-q) N(0, s^2) + q N(1, s^2),  Q = N(0, s^2)
#   add:    P = N(0, s^2),                      Q = (1-q) N(0, s^2) + q N(1, s^2)
# with privacy loss L = ln(dP/dQ). Writing D(x) = 1 - q + q exp((2x - 1) / (2 s^2)) (the
# likelihood ratio of the mixture to N(0, s^2)), L = ln D(x) under P (remove) and
# L = -ln D(x) under P = N(0, s^2) (add). The composed loss S is a sum of k independent
# copies of L, and delta(eps) = E[(1 - exp(eps - S))_+] (the hockey-stick divergence).
#
# Method (the characteristic-function route of Zhu, Dong and Wang 2022, "Optimal
# accounting of differential privacy via characteristic function", with an exponential
# tilt): for any beta > 0,
#   delta(eps) = (1/pi) * Integral_0^inf Re[ exp(-a eps) M(a)^k / (a (a + 1)) ] dw,
#   a = beta + i w,   M(a) = E[exp(a L)]   (one step),
# because g(s) = (1 - exp(eps - s))_+ exp(-beta s) has Fourier transform
# exp(-a eps) / (a (a + 1)). One step's M(a) is an integral against N(0, s^2):
#   remove: M(a) = E_{N(0,s^2)}[D(x)^(a+1)],  add: M(a) = E_{N(0,s^2)}[D(x)^(-a)],
# done by Gauss-Legendre panels (width s/4, 24 nodes each) over a range wide enough that
# the neglected tails are below 1e-40 of the integral. The outer integral over w uses
# Gauss-Legendre panels (12 nodes each) scaled to the width of |M(a)|^k and stops once the
# integrand bound is below 1e-25 of delta. beta is the Chernoff saddle point at the first guess;
# eps(delta) is the root of delta(eps) = delta by Newton's method on the same nodes
# (d delta / d eps has the kernel -exp(-a eps) / (a + 1)). The answer for add/remove
# neighbours is the larger of the two directions' eps.
#
# Self-checks (the script stops if one fails): the inner integral against the exact RDP
# moments at integer orders and total mass 1; the inversion at q = 1 against the closed form
# of the Gaussian mechanism (Balle & Wang 2018 Thm 8); three settings recomputed with other
# nodes (24-point instead of 12-point panels, inner and outer), agreeing to 1e-12.
#
# Usage: /usr/bin/python3 tools/pld_reference.py [INDEX ...]   (default: every setting)
# Prints one C initialiser line per setting of SETTINGS (or those of the given indices):
# {q, sigma, steps, delta, eps_remove, eps_add}, then two one-step settings whose eps comes
# from the closed-form hockey-stick divergence. A few CPU-minutes per setting, four times
# that for the ones in FINE_CHECKED.
import sys

import mpmath as mp

mp.mp.dps = 30

SETTINGS = [
    # q, sigma, steps, delta
    (mp.mpf(1024) / 50000, mp.mpf("1.54"), 1464, mp.mpf("1e-5")),
    (mp.mpf(256) / 60000, mp.mpf("1.1"), 14062, mp.mpf("1e-5")),
    (mp.mpf("0.04"), mp.mpf("1.5"), 2250, mp.mpf("1e-5")),
    (mp.mpf("0.01"), mp.mpf("4.0"), 10000, mp.mpf("1e-5")),
    (mp.mpf("0.1"), mp.mpf("1.0"), 100, mp.mpf("1e-6")),
    (mp.mpf("0.5"), mp.mpf("2.0"), 50, mp.mpf("1e-5")),
    (mp.mpf("0.2"), mp.mpf("0.8"), 20, mp.mpf("1e-5")),
    (mp.mpf(1), mp.mpf("5.0"), 50, mp.mpf("1e-5")),
]
# Settings recomputed with 24-point panels instead of 12-point ones (the required one, a
# short and a long composition): the script stops unless both agree to 1e-12.
FINE_CHECKED = (0, 4, 6)
ONE_STEP = [
    (mp.mpf("0.05"), mp.mpf("0.8"), mp.mpf("1e-5")),
    (mp.mpf("0.3"), mp.mpf("2.0"), mp.mpf("1e-3")),
]

_GL_CACHE = {}


def gl_nodes(degree):
    """Gauss-Legendre nodes and weights on [-1, 1] (3 * 2^(degree-1) of them)."""
    if degree not in _GL_CACHE:
        _GL_CACHE[degree] = mp.calculus.quadrature.GaussLegendre(mp.mp).calc_nodes(degree, mp.mp.prec)
    return _GL_CACHE[degree]


def panels(lo, hi, width, degree):
    """Nodes and weights of Gauss-Legendre panels covering [lo, hi]."""
    n = int(mp.ceil((hi - lo) / width))
    h = (hi - lo) / n
    out = []
    for p in range(n):
        a = lo + p * h
        for x, w in gl_nodes(degree):
            out.append((a + (x + 1) * h / 2, w * h / 2))
    return out


class Step:
    """One step of the subsampled Gaussian in one direction: M(a) = E[exp(a L)]."""

    def __init__(self, q, sigma, direction, beta_max, fine=False):
        self.q, self.s, self.dir = q, sigma, direction
        s = sigma
        # The integrand's Gaussian factor is centred at 0 for add and between 0 and
        # (beta + 1) for remove (D^(beta+1) tilts N(0, s^2) towards larger x).
        lo = -22 * s
        hi = 1 + 22 * s + (beta_max + 1 if direction == "remove" else 0)
        self.nodes = []
        for x, w in panels(lo, hi, s / 4, 4 if fine else 3):
            dens = mp.npdf(x, 0, s)
            logd = mp.log1p(q * mp.expm1((2 * x - 1) / (2 * s * s))) if q < 1 else (2 * x - 1) / (2 * s * s)
            self.nodes.append((w * dens, logd))

    def M(self, a):
        c = a + 1 if self.dir == "remove" else -a
        return mp.fsum(wd * mp.exp(c * logd) for wd, logd in self.nodes)


def chernoff_start(step, k, delta):
    """eps0 = min_beta (k ln M(beta) - ln delta) / beta (an upper bound on eps) and its beta."""
    best = None
    for j in range(-12, 13):  # beta in [1/8, 8]: the range the coarse nodes cover
        beta = mp.mpf(2) ** (mp.mpf(j) / 4)
        e = (k * mp.log(step.M(beta)) - mp.log(delta)) / beta
        if best is None or e < best[0]:
            best = (e, beta)
    return best


def eps_for_delta(q, sigma, k, delta, direction, fine=False):
    # First guess and tilt from a coarse step object, then the real one.
    coarse = Step(q, sigma, direction, 8)
    eps0, beta = chernoff_start(coarse, k, delta)
    step = Step(q, sigma, direction, float(beta) + 2, fine)
    mk = lambda w: step.M(beta + 1j * w) ** k
    # Width of |M|^k around w = 0: the variance of S under the tilt, by central differences.
    h = mp.mpf("1e-4")
    lm = lambda b: k * mp.log(step.M(b))
    var = (lm(beta + h) - 2 * lm(beta) + lm(beta - h)) / h**2
    width = 1 / mp.sqrt(var)
    # Outer nodes: panels of width/2, extended until the integrand's modulus
    # |exp(-a eps0) M(a)^k / (a (a+1))| falls below 1e-25 delta.
    pw = width / 2
    nodes, vals = [], []
    w_lo = mp.mpf(0)
    while True:
        ps = panels(w_lo, w_lo + pw, pw, 4 if fine else 3)
        small = True
        for w, wt in ps:
            v = mk(w)
            nodes.append((w, wt))
            vals.append(v)
            a = beta + 1j * w
            if abs(v) * mp.exp(-beta * eps0) / abs(a * (a + 1)) > mp.mpf("1e-25") * delta:
                small = False
        w_lo += pw
        if small and w_lo > 4 * width:
            break
        if len(nodes) > 200000:
            raise RuntimeError("outer integral does not converge")

    def delta_and_slope(eps):
        d = ds = mp.mpf(0)
        for (w, wt), v in zip(nodes, vals):
            a = beta + 1j * w
            e = mp.exp(-a * eps) * v
            d += wt * (e / (a * (a + 1))).real
            ds += wt * (-e / (a + 1)).real
        return d / mp.pi, ds / mp.pi

    # Newton's method on ln delta(eps), which is close to linear in eps, with each step
    # kept inside the bracket [lo, hi] known so far (delta(lo) > target > delta(hi)) and
    # at most 1 long; bisection when Newton leaves the bracket.
    lo = hi = None
    eps = eps0
    for _ in range(200):
        d, ds = delta_and_slope(eps)
        if d > delta:
            lo = eps if lo is None else max(lo, eps)
        else:
            hi = eps if hi is None else min(hi, eps)
        nxt = eps - (mp.log(d) - mp.log(delta)) / (ds / d) if d > 0 and ds < 0 else eps + (1 if d > delta else -1)
        nxt = min(max(nxt, eps - 1), eps + 1)
        if lo is not None and hi is not None and not lo < nxt < hi:
            nxt = (lo + hi) / 2
        if abs(nxt - eps) < mp.mpf("1e-22") * (1 + abs(eps)):
            eps = nxt
            break
        eps = nxt
    else:
        raise RuntimeError("root search did not converge")
    return eps


def gaussian_delta(mu, eps):
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def one_step_delta(q, s, eps, direction):
    """Closed-form hockey-stick divergence of one step (no integration)."""
    g = mp.exp(eps)
    if direction == "remove":
        if g <= 1 - q:
            return 1 - g
        x = s * s * mp.log((g - 1 + q) / q) + mp.mpf(1) / 2
        return (1 - q - g) * mp.ncdf(-x / s) + q * mp.ncdf(-(x - 1) / s)
    if g * (1 - q) >= 1:
        return mp.mpf(0)
    x = s * s * mp.log((1 - g * (1 - q)) / (g * q)) + mp.mpf(1) / 2
    return (1 - g * (1 - q)) * mp.ncdf(x / s) - g * q * mp.ncdf((x - 1) / s)


def self_checks():
    # The inner integral: at real integer orders the remove direction's M(beta) is the RDP
    # moment A_(beta+1) = sum_j C(beta+1, j) (1-q)^(beta+1-j) q^j exp((j^2 - j) / (2 s^2))
    # (Mironov, Talwar, Zhang 2019), and both directions integrate to 1 at a = -1.
    for q, s in ((mp.mpf("0.02048"), mp.mpf("1.54")), (mp.mpf("0.2"), mp.mpf("0.8"))):
        for b in (1, 3, 6):
            step = Step(q, s, "remove", b + 1)
            al = b + 1
            exact = mp.fsum(mp.binomial(al, j) * (1 - q) ** (al - j) * q ** j * mp.exp((j * j - j) / (2 * s * s))
                            for j in range(al + 1))
            assert abs(step.M(mp.mpf(b)) / exact - 1) < mp.mpf("1e-25"), ("moment", q, s, b)
        for direction in ("remove", "add"):
            assert abs(Step(q, s, direction, 2).M(mp.mpf(-1)) - 1) < mp.mpf("1e-25"), ("mass", direction)
    # The inversion: q = 1 is the Gaussian mechanism, S ~ N(mu^2/2, mu^2) with
    # mu = sqrt(k)/sigma, whose delta(eps) has a closed form (Balle & Wang 2018 Thm 8).
    q, s, k, delta = mp.mpf(1), mp.mpf("5.0"), 50, mp.mpf("1e-5")
    e = eps_for_delta(q, s, k, delta, "remove")
    exact = gaussian_delta(mp.sqrt(k) / s, e)
    assert abs(exact / delta - 1) < mp.mpf("1e-12"), ("gaussian", exact, delta)
    print("# self-checks passed (RDP moments, total mass, q = 1 closed form)", file=sys.stderr)


def one_step_eps(q, s, delta, direction):
    return mp.findroot(lambda t: one_step_delta(q, s, t, direction) - delta, mp.mpf("0.5"))


def main():
    self_checks()
    only = [int(a) for a in sys.argv[1:]]
    print("// {q, sigma, steps, delta, eps_remove, eps_add}: characteristic-function inversion")
    for i, (q, s, k, delta) in enumerate(SETTINGS):
        if only and i not in only:
            continue
        out = []
        for direction in ("remove", "add"):
            e = eps_for_delta(q, s, k, delta, direction)
            if i in FINE_CHECKED:
                e_fine = eps_for_delta(q, s, k, delta, direction, fine=True)
                assert abs(e_fine - e) < mp.mpf("1e-12") * abs(e), (q, s, k, direction, e, e_fine)
            out.append(e)
        print("    {%s, %s, %d, %s, %s, %s}," % (mp.nstr(q, 17), mp.nstr(s, 17), k, mp.nstr(delta, 17),
                                                mp.nstr(out[0], 15), mp.nstr(out[1], 15)), flush=True)
    print("// one step: the closed-form hockey-stick divergence, eps by mpmath findroot")
    for q, s, delta in ONE_STEP:
        out = [one_step_eps(q, s, delta, d) for d in ("remove", "add")]
        for d, e in zip(("remove", "add"), out):
            assert abs(one_step_delta(q, s, e, d) / delta - 1) < mp.mpf("1e-20")
        print("    {%s, %s, 1, %s, %s, %s}," % (mp.nstr(q, 17), mp.nstr(s, 17), mp.nstr(delta, 17),
                                               mp.nstr(out[0], 15), mp.nstr(out[1], 15)), flush=True)


if __name__ == "__main__":
    main()
