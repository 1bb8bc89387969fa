// Output-law arithmetic (defenses/dp/mech.h): moments and interval probabilities of a
// mixture of atoms, uniforms, Laplace and normal laws, equally spaced grids and the safe
// samplers' clamped lattices.
#include <math.h>

#include "defenses/dp/mech.h"

// P(K = k) of a lattice piece: K = clamp(n + J, kmin, kmax).
static double lattice_p(const LawPiece *p, long k) {
    const Mech *m = p->m;
    double (*ge)(const Mech *, long) = m->sampler->lattice_ge;
    if (k < m->lat_kmin || k > m->lat_kmax)
        return 0;
    if (k == m->lat_kmin)
        return 1 - ge(m, k + 1 - p->n);
    if (k == m->lat_kmax)
        return ge(m, k - p->n);
    return ge(m, k - p->n) - ge(m, k - p->n + 1);
}

// The value of lattice atom k, as the kernels compute it.
static double lattice_value(const LawPiece *p, long k) {
    return (double)fmaf(p->m->f_b, (float)k + (float)p->a, p->m->f_lo);
}

// E[(Y - s)^k] of one piece, k in 1..4.
static double piece_moment(const LawPiece *p, double s, int k) {
    switch (p->kind) {
    case LAW_ATOM: return pow(p->a - s, k);
    case LAW_UNIFORM: {
        double a = p->a - s, b = p->b - s;
        if (b == a)
            return pow(a, k);
        return (pow(b, k + 1) - pow(a, k + 1)) / ((k + 1) * (b - a));
    }
    case LAW_LAPLACE:
    case LAW_NORMAL:
    case LAW_GRID: {
        // Y - s = d + Z with Z symmetric: E Z^2 = v, E Z^4 = z4 (Laplace 2b², 24b⁴; normal
        // σ², 3σ⁴; n equally spaced atoms b apart: b²(n²-1)/12, b⁴(n²-1)(3n²-7)/240), odd
        // moments 0.
        double d, v, z4;
        if (p->kind == LAW_GRID) {
            double n = (double)p->n;
            d = p->a + p->b * (n - 1) / 2 - s;
            v = p->b * p->b * (n * n - 1) / 12;
            z4 = pow(p->b, 4) * (n * n - 1) * (3 * n * n - 7) / 240;
        } else {
            d = p->a - s;
            v = p->kind == LAW_LAPLACE ? 2 * p->b * p->b : p->b * p->b;
            z4 = p->kind == LAW_LAPLACE ? 6 * v * v : 3 * v * v;
        }
        switch (k) {
        case 1: return d;
        case 2: return d * d + v;
        case 3: return d * d * d + 3 * d * v;
        default: return d * d * d * d + 6 * d * d * v + z4;
        }
    }
    case LAW_LATTICE: {
        double acc = 0;
        for (long q = p->m->lat_kmin; q <= p->m->lat_kmax; q++)
            acc += lattice_p(p, q) * pow(lattice_value(p, q) - s, k);
        return acc;
    }
    }
    return NAN;
}

double law_mean(const MechLaw *law) {
    double m = 0;
    for (int i = 0; i < law->n; i++)
        m += law->p[i].weight * piece_moment(&law->p[i], 0, 1);
    return m;
}

double law_central_moment(const MechLaw *law, int k) {
    double mu = law_mean(law), m = 0;
    for (int i = 0; i < law->n; i++)
        m += law->p[i].weight * piece_moment(&law->p[i], mu, k);
    return m;
}

static double piece_cdf(const LawPiece *p, double y) {   // P[Y < y]
    switch (p->kind) {
    case LAW_ATOM: return p->a < y ? 1 : 0;
    case LAW_UNIFORM:
        if (y <= p->a)
            return 0;
        if (y >= p->b)
            return 1;
        return (y - p->a) / (p->b - p->a);
    case LAW_LAPLACE: {
        if (isinf(y))
            return y > 0 ? 1 : 0;
        double z = (y - p->a) / p->b;
        return z < 0 ? 0.5 * exp(z) : 1 - 0.5 * exp(-z);
    }
    case LAW_NORMAL:
        if (isinf(y))
            return y > 0 ? 1 : 0;
        return 0.5 * erfc(-(y - p->a) / (p->b * sqrt(2.0)));
    case LAW_GRID: {   // atoms a + b·i < y: i < (y - a)/b
        if (isinf(y))
            return y > 0 ? 1 : 0;
        double i = ceil((y - p->a) / p->b);
        i = i < 0 ? 0 : i > (double)p->n ? (double)p->n : i;
        return i / (double)p->n;
    }
    case LAW_LATTICE: {
        double acc = 0;
        for (long q = p->m->lat_kmin; q <= p->m->lat_kmax && lattice_value(p, q) < y; q++)
            acc += lattice_p(p, q);
        return acc;
    }
    }
    return NAN;
}

double law_prob(const MechLaw *law, double lo, double hi) {
    double pr = 0;
    for (int i = 0; i < law->n; i++)
        pr += law->p[i].weight * (piece_cdf(&law->p[i], hi) - piece_cdf(&law->p[i], lo));
    return pr;
}
