// CPU convolution and pooling. Convolution is im2col + one OpenBLAS GEMM per group of
// samples (groups keep the column buffer near 8 MB); backward-data is either the adjoint
// of that (GEMM, then col2im) or, where measured faster, one forward convolution of dy
// with the stride phases' kernels stacked (the sub-pixel form, no col2im). The direct
// loop cpu_conv2d_forward_naive is kept beside them as the oracle the tests compare with.
//
// Shapes: x (n, c_in, h_in, w_in), w (c_out, c_in, kh, kw), y (n, c_out, h_out, w_out).
// cols (ckk, g·hw) with ckk = c_in·kh·kw, hw = h_out·w_out, g samples per group.
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu/cpu_kernels.h"


static void cpu_gemm_rm(int ta, int tb, int m, int n, int k, float alpha, const float *a, const float *b, float beta,
                        float *c) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
                ta ? m : k, b, tb ? k : n, beta, c, n);
}

static int group_size(const ConvGeom *g) {
    size_t per_sample = (size_t)g->c_in * g->kh * g->kw * g->h_out * g->w_out;
    size_t budget = (size_t)2 << 20; // floats
    int gs = (int)(budget / (per_sample ? per_sample : 1));
    if (gs < 1)
        gs = 1;
    return gs < g->n ? gs : g->n;
}

// The output positions o in [0, size_out) whose input position i = o·stride − pad + k
// (kernel offset k) lies inside [0, size_in) form one interval [lo, hi); the others read
// the zero padding. col2im computes it once per kernel row/column, which takes the
// bounds checks out of its inner loops without changing what it computes.
static void valid_range(int size_in, int size_out, int stride, int pad, int k, int *lo, int *hi) {
    int first = pad - k;              // i >= 0          <=>  o·stride >= first
    int last = size_in - 1 + pad - k; // i <= size_in-1  <=>  o·stride <= last
    int l = first > 0 ? (first + stride - 1) / stride : 0;
    int h = last < 0 ? 0 : last / stride + 1;
    if (h > size_out)
        h = size_out;
    *lo = l < h ? l : h;
    *hi = h;
}

// The window of the zero-padded input that the convolution reads: rows and columns
// [0, (out−1)·stride + k) in padded coordinates (input index + pad).
static size_t padded_size(const ConvGeom *g) {
    return (size_t)((g->h_out - 1) * g->stride + g->kh) * (size_t)((g->w_out - 1) * g->stride + g->kw);
}

// plane (hp, wp) = that window of one input plane xc (h_in, w_in), zeros in the padding.
static void pad_plane(const ConvGeom *g, const float *xc, int hp, int wp, float *plane) {
    memset(plane, 0, sizeof(float) * (size_t)hp * wp);
    int r1 = g->pad + g->h_in < hp ? g->pad + g->h_in : hp, c1 = g->pad + g->w_in < wp ? g->pad + g->w_in : wp;
    for (int py = g->pad; py < r1 && g->pad < c1; py++)
        memcpy(plane + (size_t)py * wp + g->pad, xc + (size_t)(py - g->pad) * g->w_in,
               sizeof(float) * (size_t)(c1 - g->pad));
}

// im2col for kernels larger than the stride, built for small images (LeNet's 7×7
// outputs make rows of a few elements, where per-row loop overhead dominates). Each
// input plane is copied once into its zero-padded window (the group's gs planes of a
// channel side by side), so no bounds are checked; then most rows of cols are a shifted
// copy of an earlier row: row (ki, kj) at output column ox equals row (ki, kj − stride)
// at ox + 1, so it is that row moved left by one element with the last column of each
// output row fetched afresh; likewise row (ki, kj) is row (ki − stride, kj) moved up one
// output row, with the last output row fetched afresh. A row of cols holds the group's
// samples one after another, so one copy moves all of them: the elements it carries
// across a sample's end are in the last column or the last output row, which are fetched
// afresh. Only the rows with ki, kj < stride are gathered element by element.
static void im2col_shifted(const ConvGeom *g, const float *x, int n0, int gs, float *cols, float *planes) {
    int ho = g->h_out, wo = g->w_out, hw = ho * wo, st = g->stride, kh = g->kh, kw = g->kw;
    int hp = (ho - 1) * st + kh, wp = (wo - 1) * st + kw;
    size_t ld = (size_t)gs * hw, psz = (size_t)hp * wp;
    for (int c = 0; c < g->c_in; c++) {
        for (int s = 0; s < gs; s++)
            pad_plane(g, x + ((size_t)(n0 + s) * g->c_in + c) * g->h_in * g->w_in, hp, wp, planes + s * psz);
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++) {
                float *row = cols + (size_t)((c * kh + ki) * kw + kj) * ld;
                if (kj >= st) { // from row (ki, kj − st)
                    memcpy(row, row - (size_t)st * ld + 1, sizeof(float) * (ld - 1));
                    for (int s = 0; s < gs; s++) {
                        float *r = row + (size_t)s * hw;
                        const float *pc = planes + s * psz + (size_t)ki * wp + (size_t)(wo - 1) * st + kj;
                        for (int oy = 0; oy < ho; oy++)
                            r[(size_t)oy * wo + wo - 1] = pc[(size_t)oy * st * wp];
                    }
                } else if (ki >= st) { // from row (ki − st, kj)
                    memcpy(row, row - (size_t)st * kw * ld + wo, sizeof(float) * (ld - (size_t)wo));
                    for (int s = 0; s < gs; s++) {
                        const float *pr = planes + s * psz + (size_t)((ho - 1) * st + ki) * wp + kj;
                        float *rl = row + (size_t)s * hw + (size_t)(ho - 1) * wo;
                        for (int ox = 0; ox < wo; ox++)
                            rl[ox] = pr[ox * st];
                    }
                } else {
                    for (int s = 0; s < gs; s++)
                        for (int oy = 0; oy < ho; oy++) {
                            const float *pr = planes + s * psz + (size_t)(oy * st + ki) * wp + kj;
                            float *ro = row + (size_t)s * hw + (size_t)oy * wo;
                            for (int ox = 0; ox < wo; ox++)
                                ro[ox] = pr[ox * st];
                        }
                }
            }
    }
}

// im2col row by row, each row of cols gathered straight from x (a branch-free select at
// the borders): for kernels hardly larger than the stride (1×1, 3×3 stride 2), where few
// rows of cols could be shifted copies of others.
static void im2col_direct(const ConvGeom *g, const float *x, int n0, int gs, float *cols) {
    int hw = g->h_out * g->w_out, ld = gs * hw;
    for (int c = 0; c < g->c_in; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                float *row = cols + (size_t)((c * g->kh + ki) * g->kw + kj) * ld;
                for (int s = 0; s < gs; s++) {
                    const float *xc = x + ((size_t)(n0 + s) * g->c_in + c) * g->h_in * g->w_in;
                    float *r = row + (size_t)s * hw;
                    for (int oy = 0; oy < g->h_out; oy++) {
                        int iy = oy * g->stride - g->pad + ki;
                        float *ro = r + oy * g->w_out;
                        if (iy < 0 || iy >= g->h_in) {
                            memset(ro, 0, sizeof(float) * g->w_out);
                            continue;
                        }
                        const float *xr = xc + (size_t)iy * g->w_in;
                        for (int ox = 0; ox < g->w_out; ox++) {
                            int ix = ox * g->stride - g->pad + kj;
                            ro[ox] = (ix >= 0 && ix < g->w_in) ? xr[ix] : 0.0f;
                        }
                    }
                }
            }
}

// cols[(c,ki,kj), s*hw + p] = x[n0+s, c, oy*stride - pad + ki, ox*stride - pad + kj]
// (zero in the padding); planes is scratch of gs·padded_size(g) floats. Both paths only
// move data, so the choice does not change results: the shifted one when at most a
// quarter of the rows must be gathered (measured: 5×5 stride 2 and 3×3 stride 1 gain
// 2-3×, 3×3 stride 2 and 1×1 stride 2 lose).
static void im2col(const ConvGeom *g, const float *x, int n0, int gs, float *cols, float *planes) {
    int sh = g->stride < g->kh ? g->stride : g->kh, sw = g->stride < g->kw ? g->stride : g->kw;
    if (g->kh * g->kw >= 4 * sh * sw)
        im2col_shifted(g, x, n0, gs, cols, planes);
    else
        im2col_direct(g, x, n0, gs, cols);
}

// The adjoint of im2col: dx += scatter of cols. The loops visit the valid positions in
// the same order as a bounds-checked loop would, so every dx element receives its
// contributions in the same order (bit-identical sums).
static void col2im(const ConvGeom *g, const float *cols, int n0, int gs, float *dx) {
    int hw = g->h_out * g->w_out, ld = gs * hw, wo = g->w_out, st = g->stride;
    for (int c = 0; c < g->c_in; c++)
        for (int ki = 0; ki < g->kh; ki++) {
            int ylo, yhi;
            valid_range(g->h_in, g->h_out, st, g->pad, ki, &ylo, &yhi);
            for (int kj = 0; kj < g->kw; kj++) {
                int xlo, xhi, off = kj - g->pad;
                valid_range(g->w_in, g->w_out, st, g->pad, kj, &xlo, &xhi);
                const float *row = cols + (size_t)((c * g->kh + ki) * g->kw + kj) * ld;
                for (int s = 0; s < gs; s++) {
                    float *xc = dx + ((size_t)(n0 + s) * g->c_in + c) * g->h_in * g->w_in;
                    const float *r = row + (size_t)s * hw;
                    for (int oy = ylo; oy < yhi; oy++) {
                        float *restrict xr = xc + (size_t)(oy * st - g->pad + ki) * g->w_in;
                        const float *restrict ro = r + (size_t)oy * wo;
                        if (st == 1)
                            for (int ox = xlo; ox < xhi; ox++)
                                xr[ox + off] += ro[ox];
                        else
                            for (int ox = xlo; ox < xhi; ox++)
                                xr[ox * st + off] += ro[ox];
                    }
                }
            }
        }
}

// (c_out, gs·hw) <-> (gs, c_out, hw)
static void to_sample_major(const float *src, int c_out, int gs, int hw, float *dst) {
    for (int s = 0; s < gs; s++)
        for (int co = 0; co < c_out; co++)
            memcpy(dst + ((size_t)s * c_out + co) * hw, src + ((size_t)co * gs + s) * hw, sizeof(float) * hw);
}

static void to_channel_major(const float *src, int c_out, int gs, int hw, float *dst) {
    for (int s = 0; s < gs; s++)
        for (int co = 0; co < c_out; co++)
            memcpy(dst + ((size_t)co * gs + s) * hw, src + ((size_t)s * c_out + co) * hw, sizeof(float) * hw);
}

// One sample per group (DLG's batches of one) or one output channel: the channel-major
// GEMM layout (c_out, gs·hw) and the sample-major tensor layout (gs, c_out, hw) are the
// same memory, so the GEMM reads and writes the tensor itself and the copy is skipped.
static int same_layout(const ConvGeom *g, int cur) { return cur == 1 || g->c_out == 1; }

// Floats of a group's columns and padded planes (im2col's scratch) for gs samples.
static size_t group_scratch_size(const ConvGeom *g, int gs) {
    return ((size_t)g->c_in * g->kh * g->kw * g->h_out * g->w_out + padded_size(g)) * gs;
}

// The columns a caller may keep: only where the whole batch is one group (at most the
// group budget, 8 MB), so that the kept columns are exactly those the group loop builds.
size_t cpu_conv2d_columns_size(const ConvGeom *g) {
    return group_size(g) < g->n ? 0 : group_scratch_size(g, g->n);
}

// The columns of group [n0, n0 + cur): the caller's (built there when not filled; they
// hold the whole batch, one group) or built in scratch (ckk·gs·hw floats + gs planes).
static const float *group_columns(const ConvGeom *g, const float *x, int n0, int cur, float *kept, int filled,
                                  float *scratch, int gs) {
    size_t ncols = (size_t)g->c_in * g->kh * g->kw * gs * g->h_out * g->w_out;
    if (kept) {
        if (!filled)
            im2col(g, x, n0, cur, kept, kept + ncols);
        return kept;
    }
    im2col(g, x, n0, cur, scratch, scratch + ncols);
    return scratch;
}

void cpu_conv2d_forward(const ConvGeom *g, const float *x, const float *w, float *y, float *kept, int filled) {
    int gs = group_size(g), hw = g->h_out * g->w_out, ckk = g->c_in * g->kh * g->kw;
    float *cols = kept ? NULL : malloc(sizeof(float) * group_scratch_size(g, gs));
    float *tmp = same_layout(g, gs) ? NULL : malloc(sizeof(float) * (size_t)g->c_out * gs * hw);
    for (int n0 = 0; n0 < g->n; n0 += gs) {
        int cur = g->n - n0 < gs ? g->n - n0 : gs;
        float *yg = y + (size_t)n0 * g->c_out * hw;
        const float *cg = group_columns(g, x, n0, cur, kept, filled, cols, gs);
        cpu_gemm_rm(0, 0, g->c_out, cur * hw, ckk, 1.0f, w, cg, 0.0f, same_layout(g, cur) ? yg : tmp);
        if (!same_layout(g, cur))
            to_sample_major(tmp, g->c_out, cur, hw, yg);
    }
    free(cols);
    free(tmp);
}

// Backward data as one forward convolution of dy (the "sub-pixel" form of the transposed
// convolution). With s the stride, the input rows iy with iy + pad = s·q + ry (phase ry in
// [0, s)) receive only the kernel rows ki = ry + s·j, from the output rows oy = q − j;
// likewise for columns. With T = ceil(kh / s) taps per phase and t = T − 1 − j,
//   dx[b, ci, s·q − pad + ry, s·r − pad + rx]
//     = Σ_{co, ty, tx} W″[(ry, rx, ci), co, ty, tx] · dy[b, co, q − (T−1) + ty, r − (T−1) + tx],
//   W″[(ry, rx, ci), co, ty, tx] = W[co, ci, ry + s·(T−1−ty), rx + s·(T−1−tx)] (0 past the kernel),
// a stride-1 convolution of dy (zero-padded) into s²·c_in channels over the positions q
// that any phase needs, whose output is then shuffled into dx: every dx element comes
// from exactly one phase and is written once. It replaces col2im's scatter-add of short
// strided rows (which cost LeNet more than the GEMM) by the forward path's im2col and one
// GEMM of s²·c_in rows; the taps past the kernel (LeNet, 5×5 stride 2: 36 of 25) cost
// multiply-adds with zeros. Summation: over (co, ty, tx) inside the GEMM.
typedef struct SubpixelGeom {
    ConvGeom conv;   // the convolution of dy: c_in = c_out, c_out = s²·c_in, T×T, stride 1
    int q0y, q0x;    // the first q of its output grid (its output row o is q = q0 + o)
} SubpixelGeom;

static int floor_div(int a, int s) { return a >= 0 ? a / s : -((-a + s - 1) / s); }

// 0 when the sub-pixel form does not apply: its padding T − 1 − q0 would be negative
// (pad ≥ s·T) or differ between rows and columns (ConvGeom has one padding).
static int subpixel_geom(const ConvGeom *g, SubpixelGeom *sp) {
    int s = g->stride, ty = (g->kh + s - 1) / s, tx = (g->kw + s - 1) / s;
    // q over all phases: iy = s·q − pad + r in [0, h_in) for some r in [0, s); the first
    // is ceil((pad − (s − 1)) / s), at r = s − 1, the last floor((h_in − 1 + pad) / s), at r = 0
    int q0y = -floor_div(s - 1 - g->pad, s), q0x = q0y;
    int q1y = floor_div(g->h_in - 1 + g->pad, s) + 1, q1x = floor_div(g->w_in - 1 + g->pad, s) + 1;
    int py = ty - 1 - q0y, px = tx - 1 - q0x;
    if (py < 0 || px < 0 || py != px || q1y <= q0y || q1x <= q0x)
        return 0;
    sp->conv = (ConvGeom){.n = g->n, .c_in = g->c_out, .h_in = g->h_out, .w_in = g->w_out, .c_out = s * s * g->c_in,
                          .kh = ty, .kw = tx, .stride = 1, .pad = py, .h_out = q1y - q0y, .w_out = q1x - q0x};
    sp->q0y = q0y;
    sp->q0x = q0x;
    return 1;
}

static void backward_data_subpixel(const ConvGeom *g, const SubpixelGeom *sp, const float *dy, const float *w,
                                   float *dx) {
    const ConvGeom *c = &sp->conv;
    int s = g->stride, ty = c->kh, tx = c->kw, hw = c->h_out * c->w_out;
    size_t nw = (size_t)c->c_out * c->c_in * ty * tx;
    // samples in groups, so that the sub-pixel output stays near 8 MB like im2col's columns
    size_t per_sample = (size_t)c->c_out * hw;
    int gs = (int)(((size_t)2 << 20) / per_sample);
    gs = gs < 1 ? 1 : gs > g->n ? g->n : gs;
    int taps = g->kh * g->kw;
    float *w2 = calloc(nw, sizeof(float)), *out = malloc(sizeof(float) * per_sample * gs);
    size_t *tap_at = malloc(sizeof(size_t) * (size_t)taps);
    // W″ from W: kernel tap (ki, kj) of (co, ci) goes to phase (ki mod s, kj mod s) at
    // (ty−1−⌊ki/s⌋, tx−1−⌊kj/s⌋); the rest stays zero (calloc). Where each tap lands
    // relative to (ci, co)'s block is the same for every pair: one table, then one pass
    // over W (its short per-phase loops cost B = 1 closures a tenth of their time).
    size_t phase_stride = (size_t)g->c_in * g->c_out * ty * tx;
    for (int ki = 0; ki < g->kh; ki++)
        for (int kj = 0; kj < g->kw; kj++)
            tap_at[ki * g->kw + kj] = (size_t)((ki % s) * s + kj % s) * phase_stride +
                                      (size_t)((ty - 1 - ki / s) * tx + (tx - 1 - kj / s));
    for (int co = 0; co < g->c_out; co++)
        for (int ci = 0; ci < g->c_in; ci++) {
            float *dst = w2 + ((size_t)ci * g->c_out + co) * ty * tx;
            const float *src = w + (size_t)(co * g->c_in + ci) * taps;
            for (int t = 0; t < taps; t++)
                dst[tap_at[t]] = src[t];
        }
    free(tap_at);
    for (int n0 = 0; n0 < g->n; n0 += gs) {
        ConvGeom cg = *c;
        cg.n = g->n - n0 < gs ? g->n - n0 : gs;
        cpu_conv2d_forward(&cg, dy + (size_t)n0 * g->c_out * g->h_out * g->w_out, w2, out, NULL, 0);
        for (int n = 0; n < cg.n; n++)
            for (int ry = 0; ry < s; ry++)
                for (int rx = 0; rx < s; rx++)
                    for (int ci = 0; ci < g->c_in; ci++) {
                        const float *o = out + ((size_t)n * c->c_out + (size_t)(ry * s + rx) * g->c_in + ci) * hw;
                        float *plane = dx + ((size_t)(n0 + n) * g->c_in + ci) * g->h_in * g->w_in;
                        // this phase's q: iy = s·q − pad + ry in [0, h_in)
                        int oy0 = -floor_div(ry - g->pad, s) - sp->q0y, ox0 = -floor_div(rx - g->pad, s) - sp->q0x;
                        oy0 = oy0 < 0 ? 0 : oy0;
                        ox0 = ox0 < 0 ? 0 : ox0;
                        // rows iy = iy0 + s·k and columns ix = ix0 + s·k that lie inside dx
                        int iy0 = s * (sp->q0y + oy0) - g->pad + ry, ix0 = s * (sp->q0x + ox0) - g->pad + rx;
                        int ny = iy0 < g->h_in ? (g->h_in - 1 - iy0) / s + 1 : 0;
                        int nx = ix0 < g->w_in ? (g->w_in - 1 - ix0) / s + 1 : 0;
                        ny = ny < c->h_out - oy0 ? ny : c->h_out - oy0;
                        nx = nx < c->w_out - ox0 ? nx : c->w_out - ox0;
                        for (int k = 0; k < ny; k++) {
                            const float *restrict orow = o + (size_t)(oy0 + k) * c->w_out + ox0;
                            float *restrict xr = plane + (size_t)(iy0 + s * k) * g->w_in + ix0;
                            for (int j = 0; j < nx; j++)
                                xr[s * j] = orow[j];
                        }
                    }
    }
    free(w2);
    free(out);
}

// Backward data as the adjoint of im2col: cols = Wᵀ·dy in one GEMM per group, then
// col2im scatters them into dx (adds in the same order whatever the group size).
static void backward_data_col2im(const ConvGeom *g, const float *dy, const float *w, float *dx) {
    int gs = group_size(g), hw = g->h_out * g->w_out, ckk = g->c_in * g->kh * g->kw;
    float *cols = malloc(sizeof(float) * (size_t)ckk * gs * hw);
    float *tmp = same_layout(g, gs) ? NULL : malloc(sizeof(float) * (size_t)g->c_out * gs * hw);
    memset(dx, 0, sizeof(float) * (size_t)g->n * g->c_in * g->h_in * g->w_in);
    for (int n0 = 0; n0 < g->n; n0 += gs) {
        int cur = g->n - n0 < gs ? g->n - n0 : gs;
        const float *dyg = dy + (size_t)n0 * g->c_out * hw;
        if (!same_layout(g, cur)) {
            to_channel_major(dyg, g->c_out, cur, hw, tmp);
            dyg = tmp;
        }
        cpu_gemm_rm(1, 0, ckk, cur * hw, g->c_out, 1.0f, w, dyg, 0.0f, cols);
        col2im(g, cols, n0, cur, dx);
    }
    free(cols);
    free(tmp);
}

// Which form: the sub-pixel one when it has at least 8 GEMM rows per phase (c_in ≥ 8)
// and at most 1.5× col2im's multiply-adds (its taps past the kernel and, at small
// padding, the border where dy is zero cost extra). Measured on one core, batch 8,
// µs per call (col2im, sub-pixel): LeNet's 5×5 convolutions of 12 channels, stride 2 on
// 14×14 (1.44× the multiply-adds): 111, 88; stride 1 on 7×7 (1×): 110, 80; with one
// input channel (stride 2 on 28×28) the GEMM has 4 rows: 35, 65.
static int subpixel_pays(const ConvGeom *g, const SubpixelGeom *sp) {
    const ConvGeom *c = &sp->conv;
    double sub = (double)c->c_out * c->c_in * c->kh * c->kw * c->h_out * c->w_out;
    double direct = (double)g->c_in * g->c_out * g->kh * g->kw * g->h_out * g->w_out;
    return g->c_in >= 8 && sub <= 1.5 * direct;
}

void cpu_conv2d_backward_data(const ConvGeom *g, const float *dy, const float *w, float *dx) {
    SubpixelGeom sp;
    if (subpixel_geom(g, &sp) && subpixel_pays(g, &sp))
        backward_data_subpixel(g, &sp, dy, w, dx);
    else
        backward_data_col2im(g, dy, w, dx);
}

void cpu_conv2d_backward_filter(const ConvGeom *g, const float *x, const float *dy, float *dw, float *kept,
                                int filled) {
    int gs = group_size(g), hw = g->h_out * g->w_out, ckk = g->c_in * g->kh * g->kw;
    float *cols = kept ? NULL : malloc(sizeof(float) * group_scratch_size(g, gs));
    float *tmp = same_layout(g, gs) ? NULL : malloc(sizeof(float) * (size_t)g->c_out * gs * hw);
    for (int n0 = 0; n0 < g->n; n0 += gs) {
        int cur = g->n - n0 < gs ? g->n - n0 : gs;
        const float *dyg = dy + (size_t)n0 * g->c_out * hw;
        const float *cg = group_columns(g, x, n0, cur, kept, filled, cols, gs);
        if (!same_layout(g, cur)) {
            to_channel_major(dyg, g->c_out, cur, hw, tmp);
            dyg = tmp;
        }
        cpu_gemm_rm(0, 1, g->c_out, ckk, cur * hw, 1.0f, dyg, cg, n0 == 0 ? 0.0f : 1.0f, dw);
    }
    free(cols);
    free(tmp);
}

void cpu_batched_product_nt(int batch, int m, int n, int k, const float *a, const float *b, float *c) {
    for (int i = 0; i < batch; i++)
        cpu_gemm_rm(0, 1, m, n, k, 1.0f, a + (size_t)i * m * k, b + (size_t)i * n * k, 0.0f, c + (size_t)i * m * n);
}

// Floats of columns built per call of the per-example weight gradients (4 MB): a chunk
// of examples whose columns stay in cache for the product that reads them.
#define PER_EXAMPLE_COLUMN_FLOATS ((size_t)1 << 20)

// Each example's columns as cpu_conv2d_backward_filter builds them at batch 1, a chunk of
// examples at a time, then one batched product dw_i = dy_i · cols_iᵀ for the chunk: with
// the loop of GEMMs above, the same sums as cpu_conv2d_backward_filter on each example
// alone; oneDNN's batched matmul (cpu_conv_dnnl.c) runs the chunk as one call.
void cpu_conv2d_backward_filter_per_example_by(const ConvGeom *g, const float *x, const float *dy, float *dw,
                                               CpuBatchedProductNT product) {
    ConvGeom g1 = *g;
    g1.n = 1;
    int hw = g->h_out * g->w_out, ckk = g->c_in * g->kh * g->kw;
    size_t per = (size_t)ckk * hw, xs = (size_t)g->c_in * g->h_in * g->w_in, numel = (size_t)g->c_out * ckk;
    int chunk = per >= PER_EXAMPLE_COLUMN_FLOATS ? 1 : (int)(PER_EXAMPLE_COLUMN_FLOATS / per);
    chunk = chunk < g->n ? chunk : g->n;
    float *cols = malloc(sizeof(float) * (per * (size_t)chunk + padded_size(g)));
    if (!cols) {
        fprintf(stderr, "fedpriv: out of memory for per-example convolution columns\n");
        abort();
    }
    for (int i0 = 0; i0 < g->n; i0 += chunk) {
        int cnt = g->n - i0 < chunk ? g->n - i0 : chunk;
        for (int i = 0; i < cnt; i++)
            im2col(&g1, x + (size_t)(i0 + i) * xs, 0, 1, cols + (size_t)i * per, cols + per * (size_t)chunk);
        product(cnt, g->c_out, ckk, hw, dy + (size_t)i0 * g->c_out * hw, cols, dw + (size_t)i0 * numel);
    }
    free(cols);
}

void cpu_conv2d_backward_filter_per_example(const ConvGeom *g, const float *x, const float *dy, float *dw) {
    cpu_conv2d_backward_filter_per_example_by(g, x, dy, dw, cpu_batched_product_nt);
}

void cpu_conv2d_forward_naive(const ConvGeom *g, const float *x, const float *w, float *y) {
    for (int n = 0; n < g->n; n++)
        for (int co = 0; co < g->c_out; co++)
            for (int oy = 0; oy < g->h_out; oy++)
                for (int ox = 0; ox < g->w_out; ox++) {
                    double s = 0;
                    for (int c = 0; c < g->c_in; c++)
                        for (int ki = 0; ki < g->kh; ki++)
                            for (int kj = 0; kj < g->kw; kj++) {
                                int iy = oy * g->stride - g->pad + ki, ix = ox * g->stride - g->pad + kj;
                                if (iy < 0 || iy >= g->h_in || ix < 0 || ix >= g->w_in)
                                    continue;
                                s += (double)x[((size_t)(n * g->c_in + c) * g->h_in + iy) * g->w_in + ix] *
                                     w[((size_t)(co * g->c_in + c) * g->kh + ki) * g->kw + kj];
                            }
                    y[((size_t)(n * g->c_out + co) * g->h_out + oy) * g->w_out + ox] = (float)s;
                }
}

// Max pooling records, for each output, the flat input index (within the sample's
// channel plane) of the maximum; ties go to the first. Backward scatters through it.
void cpu_maxpool_forward(const PoolGeom *g, const float *x, float *y, int32_t *argmax) {
    size_t planes = (size_t)g->n * g->c;
    for (size_t p = 0; p < planes; p++) {
        const float *xp = x + p * g->h_in * g->w_in;
        for (int oy = 0; oy < g->h_out; oy++)
            for (int ox = 0; ox < g->w_out; ox++) {
                int best = (oy * g->stride) * g->w_in + ox * g->stride;
                float m = xp[best];
                for (int ki = 0; ki < g->k; ki++)
                    for (int kj = 0; kj < g->k; kj++) {
                        int idx = (oy * g->stride + ki) * g->w_in + ox * g->stride + kj;
                        if (xp[idx] > m) {
                            m = xp[idx];
                            best = idx;
                        }
                    }
                size_t o = p * g->h_out * g->w_out + (size_t)oy * g->w_out + ox;
                y[o] = m;
                argmax[o] = best;
            }
    }
}

void cpu_maxpool_scatter(const PoolGeom *g, const float *dy, const int32_t *argmax, float *dx) {
    size_t planes = (size_t)g->n * g->c, in_plane = (size_t)g->h_in * g->w_in, out_plane = (size_t)g->h_out * g->w_out;
    memset(dx, 0, sizeof(float) * planes * in_plane);
    for (size_t p = 0; p < planes; p++)
        for (size_t o = 0; o < out_plane; o++)
            dx[p * in_plane + argmax[p * out_plane + o]] += dy[p * out_plane + o];
}

void cpu_maxpool_gather(const PoolGeom *g, const float *x, const int32_t *argmax, float *y) {
    size_t planes = (size_t)g->n * g->c, in_plane = (size_t)g->h_in * g->w_in, out_plane = (size_t)g->h_out * g->w_out;
    for (size_t p = 0; p < planes; p++)
        for (size_t o = 0; o < out_plane; o++)
            y[p * out_plane + o] = x[p * in_plane + argmax[p * out_plane + o]];
}

void cpu_avgpool_forward(const PoolGeom *g, const float *x, float *y) {
    size_t planes = (size_t)g->n * g->c;
    float inv = 1.0f / (float)(g->k * g->k);
    for (size_t p = 0; p < planes; p++) {
        const float *xp = x + p * g->h_in * g->w_in;
        for (int oy = 0; oy < g->h_out; oy++)
            for (int ox = 0; ox < g->w_out; ox++) {
                float s = 0;
                for (int ki = 0; ki < g->k; ki++)
                    for (int kj = 0; kj < g->k; kj++)
                        s += xp[(oy * g->stride + ki) * g->w_in + ox * g->stride + kj];
                y[p * g->h_out * g->w_out + (size_t)oy * g->w_out + ox] = s * inv;
            }
    }
}

void cpu_avgpool_backward(const PoolGeom *g, const float *dy, float *dx) {
    size_t planes = (size_t)g->n * g->c;
    float inv = 1.0f / (float)(g->k * g->k);
    memset(dx, 0, sizeof(float) * planes * g->h_in * g->w_in);
    for (size_t p = 0; p < planes; p++) {
        float *xp = dx + p * g->h_in * g->w_in;
        for (int oy = 0; oy < g->h_out; oy++)
            for (int ox = 0; ox < g->w_out; ox++) {
                float d = dy[p * g->h_out * g->w_out + (size_t)oy * g->w_out + ox] * inv;
                for (int ki = 0; ki < g->k; ki++)
                    for (int kj = 0; kj < g->k; kj++)
                        xp[(oy * g->stride + ki) * g->w_in + ox * g->stride + kj] += d;
            }
    }
}
