// CPU convolution and pooling. Convolution is im2col + one OpenBLAS GEMM per group of
// samples (groups keep the column buffer near 8 MB); the direct loop
// cpu_conv2d_forward_naive is kept beside it as the oracle the tests compare with.
//
// Shapes: x (n, c_in, h_in, w_in), w (c_out, c_in, kh, kw), y (n, c_out, h_out, w_out).
// cols (ckk, g·hw) with ckk = c_in·kh·kw, hw = h_out·w_out, g samples per group.
#include <cblas.h>
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

// cols[(c,ki,kj), s*hw + p] = x[n0+s, c, oy*stride - pad + ki, ox*stride - pad + kj]
static void im2col(const ConvGeom *g, const float *x, int n0, int gs, float *cols) {
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

// The adjoint of im2col: dx += scatter of cols.
static void col2im(const ConvGeom *g, const float *cols, int n0, int gs, float *dx) {
    int hw = g->h_out * g->w_out, ld = gs * hw;
    for (int c = 0; c < g->c_in; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                const float *row = cols + (size_t)((c * g->kh + ki) * g->kw + kj) * ld;
                for (int s = 0; s < gs; s++) {
                    float *xc = dx + ((size_t)(n0 + s) * g->c_in + c) * g->h_in * g->w_in;
                    const float *r = row + (size_t)s * hw;
                    for (int oy = 0; oy < g->h_out; oy++) {
                        int iy = oy * g->stride - g->pad + ki;
                        if (iy < 0 || iy >= g->h_in)
                            continue;
                        float *xr = xc + (size_t)iy * g->w_in;
                        const float *ro = r + oy * g->w_out;
                        for (int ox = 0; ox < g->w_out; ox++) {
                            int ix = ox * g->stride - g->pad + kj;
                            if (ix >= 0 && ix < g->w_in)
                                xr[ix] += ro[ox];
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

void cpu_conv2d_forward(const ConvGeom *g, const float *x, const float *w, float *y) {
    int gs = group_size(g), hw = g->h_out * g->w_out, ckk = g->c_in * g->kh * g->kw;
    float *cols = malloc(sizeof(float) * (size_t)ckk * gs * hw);
    float *tmp = malloc(sizeof(float) * (size_t)g->c_out * gs * hw);
    for (int n0 = 0; n0 < g->n; n0 += gs) {
        int cur = g->n - n0 < gs ? g->n - n0 : gs;
        im2col(g, x, n0, cur, cols);
        cpu_gemm_rm(0, 0, g->c_out, cur * hw, ckk, 1.0f, w, cols, 0.0f, tmp);
        to_sample_major(tmp, g->c_out, cur, hw, y + (size_t)n0 * g->c_out * hw);
    }
    free(cols);
    free(tmp);
}

void cpu_conv2d_backward_data(const ConvGeom *g, const float *dy, const float *w, float *dx) {
    int gs = group_size(g), hw = g->h_out * g->w_out, ckk = g->c_in * g->kh * g->kw;
    float *cols = malloc(sizeof(float) * (size_t)ckk * gs * hw);
    float *tmp = malloc(sizeof(float) * (size_t)g->c_out * gs * hw);
    memset(dx, 0, sizeof(float) * (size_t)g->n * g->c_in * g->h_in * g->w_in);
    for (int n0 = 0; n0 < g->n; n0 += gs) {
        int cur = g->n - n0 < gs ? g->n - n0 : gs;
        to_channel_major(dy + (size_t)n0 * g->c_out * hw, g->c_out, cur, hw, tmp);
        cpu_gemm_rm(1, 0, ckk, cur * hw, g->c_out, 1.0f, w, tmp, 0.0f, cols);
        col2im(g, cols, n0, cur, dx);
    }
    free(cols);
    free(tmp);
}

void cpu_conv2d_backward_filter(const ConvGeom *g, const float *x, const float *dy, float *dw) {
    int gs = group_size(g), hw = g->h_out * g->w_out, ckk = g->c_in * g->kh * g->kw;
    float *cols = malloc(sizeof(float) * (size_t)ckk * gs * hw);
    float *tmp = malloc(sizeof(float) * (size_t)g->c_out * gs * hw);
    for (int n0 = 0; n0 < g->n; n0 += gs) {
        int cur = g->n - n0 < gs ? g->n - n0 : gs;
        im2col(g, x, n0, cur, cols);
        to_channel_major(dy + (size_t)n0 * g->c_out * hw, g->c_out, cur, hw, tmp);
        cpu_gemm_rm(0, 1, g->c_out, ckk, cur * hw, 1.0f, tmp, cols, n0 == 0 ? 0.0f : 1.0f, dw);
    }
    free(cols);
    free(tmp);
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
