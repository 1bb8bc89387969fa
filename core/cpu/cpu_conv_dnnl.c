// CPU convolution through oneDNN (the C API, dnnl.h): forward, backward-data and
// backward-filter, the three slots core/ops.c closes over. Same semantics as the im2col
// path in cpu_conv.c, which stays the oracle the tests compare this file with:
// cross-correlation, x NCHW, w OIHW, symmetric zero padding, one stride for both axes, no
// bias, every call assigns its output.
//
// Layouts: the convolution is described with "any" layouts, so oneDNN picks its blocked
// kernels (nChw16c and the like: jit on AVX-512), and each call reorders our
// plain tensors into them and the output back. Held to plain layouts it picks its own
// im2col + GEMM ("gemm:jit"), which measured no faster than ours (LeNet, batch 64, one
// thread: 0.57 ms / 0.57 ms forward of the first layer, 1.30 / 1.26 the second), while
// the blocked kernels with the reorders took 0.28 and 0.40.
//
// Which implementation: oneDNN's own choice for the geometry and this CPU's ISA (a pure
// function of both and the library version, like OpenBLAS's kernels). Where it would run
// its reference loops ("ref:" implementations), cannot run the geometry at all, or was
// measured slower than im2col (left_to_im2col), the call runs the im2col path instead.
//
// Threads: the Debian build of oneDNN runs on OpenMP, with as many threads as the calling
// thread's OpenMP setting allows, and its weight gradient splits the sum over the batch
// between threads, so its bits would depend on that count. fedpriv runs its own worker
// threads (one client or closure each); every call here runs oneDNN on one OpenMP thread
// (the calling thread's setting is lowered for the whole call, primitive creation
// included, and restored after it), so each
// call sums in one order whatever the thread count, and workers never oversubscribe.
//
// State: none of ours. Every call describes its geometry and asks for the primitive;
// oneDNN's primitive cache (per process, DNNL_PRIMITIVE_CACHE_CAPACITY entries, 1024 by
// default) returns the one built for that geometry earlier, so JIT compilation happens
// once per geometry. The descriptors, memory objects and reorders built per call cost
// about 10 µs, which is why small batches stay on im2col (left_to_im2col).
//
// Errors: the slots have no error channel. A geometry oneDNN rejects falls back as
// above; a failure to execute a primitive it accepted means the library is unusable, and
// aborts with the failing statement, as the CUDA backend does.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "core/cpu/cpu_kernels.h"

#define DNNL_CHECK(stmt)                                                                                   \
    do {                                                                                                   \
        dnnl_status_t dnnl_check_s_ = (stmt);                                                              \
        if (dnnl_check_s_ != dnnl_success) {                                                               \
            fprintf(stderr, "fedpriv: oneDNN failure at %s:%d: %s: status %d\n", __FILE__, __LINE__, #stmt,  \
                    (int)dnnl_check_s_);                                                                   \
            abort();                                                                                       \
        }                                                                                                  \
    } while (0)

typedef enum { DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER } ConvDir;

// The three operands of one call, in oneDNN's argument names for its direction.
typedef struct ConvArgs {
    const float *src;  // x (fwd, bwd_filter) or NULL
    const float *wei;  // w (fwd, bwd_data) or NULL
    const float *dst;  // dy (bwd_data, bwd_filter) or NULL
    float *out;        // y, dx or dw
} ConvArgs;

// The operands' descriptors: our plain layouts, or (any) "whichever layout the
// implementation prefers", which conv_run reorders our tensors to and from.
static void geom_descs(const ConvGeom *g, int any, dnnl_memory_desc_t *x, dnnl_memory_desc_t *w,
                       dnnl_memory_desc_t *y, dnnl_dims_t strides, dnnl_dims_t pad_l, dnnl_dims_t pad_r) {
    dnnl_dims_t xd = {g->n, g->c_in, g->h_in, g->w_in}, wd = {g->c_out, g->c_in, g->kh, g->kw},
                yd = {g->n, g->c_out, g->h_out, g->w_out};
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(x, 4, xd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_nchw));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(w, 4, wd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_oihw));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(y, 4, yd, dnnl_f32, any ? dnnl_format_tag_any : dnnl_nchw));
    strides[0] = strides[1] = g->stride;
    pad_l[0] = pad_l[1] = g->pad;
    // oneDNN wants the right padding that makes the output size exact: the rows the
    // last window covers past the input, (h_out − 1)·stride + kh − h_in − pad (ConvGeom's
    // floor division may leave input rows unread: then it is smaller than pad, even negative).
    pad_r[0] = (dnnl_dim_t)(g->h_out - 1) * g->stride + g->kh - g->h_in - g->pad;
    pad_r[1] = (dnnl_dim_t)(g->w_out - 1) * g->stride + g->kw - g->w_in - g->pad;
}

// A primitive descriptor for dir, or NULL where oneDNN rejects the geometry or would run
// a reference implementation.
static dnnl_primitive_desc_t conv_pd(dnnl_engine_t eng, ConvDir dir, const ConvGeom *g, int any) {
    dnnl_memory_desc_t x, w, y;
    dnnl_dims_t st, pl, pr;
    geom_descs(g, any, &x, &w, &y, st, pl, pr);
    dnnl_convolution_desc_t fd, bd;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    // Every direction is described as training, the forward too (as PyTorch does): for an
    // inference forward oneDNN 2.6 picks its brgconv kernels in NHWC, which measured slower
    // than the jit kernel it picks for training (LeNet, batch 256, one thread: 1.2–1.4 ms
    // against 0.5–0.9 per call; the whole step 10–15% faster).
    if (dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                           dnnl_convolution_direct, &x, &w, NULL, &y, st, pl, pr) != dnnl_success ||
        dnnl_primitive_desc_create(&fwd, &fd, NULL, eng, NULL) != dnnl_success)
        return NULL;
    if (dir == DIR_FWD) {
        pd = fwd;
    } else {
        dnnl_status_t s = dir == DIR_BWD_DATA
                              ? dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &x, &w, &y, st,
                                                                         pl, pr)
                              : dnnl_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &x, &w, NULL,
                                                                            &y, st, pl, pr);
        if (s != dnnl_success || dnnl_primitive_desc_create(&pd, &bd, NULL, eng, fwd) != dnnl_success)
            pd = NULL;
        dnnl_primitive_desc_destroy(fwd);
        if (!pd)
            return NULL;
    }
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
        strncmp(impl, "ref", 3) == 0) {
        dnnl_primitive_desc_destroy(pd);
        return NULL;
    }
    return pd;
}

// One operand of a call: our buffer (plain layout) and, where the implementation wants
// another layout, a buffer in that one and the reorder between them.
typedef struct Operand {
    dnnl_memory_t user, inner;  // inner == user when no reorder is needed
    void *buf;
    dnnl_primitive_t reorder;   // user → inner for inputs, inner → user for the output
} Operand;

static void operand_init(Operand *o, dnnl_engine_t eng, const dnnl_memory_desc_t *plain,
                         const dnnl_memory_desc_t *want, void *data, int is_output) {
    memset(o, 0, sizeof *o);
    DNNL_CHECK(dnnl_memory_create(&o->user, plain, eng, data));
    if (dnnl_memory_desc_equal(plain, want)) {
        o->inner = o->user;
        return;
    }
    o->buf = malloc(dnnl_memory_desc_get_size(want));
    if (!o->buf) {
        fprintf(stderr, "fedpriv: out of memory for a oneDNN convolution operand\n");
        abort();
    }
    DNNL_CHECK(dnnl_memory_create(&o->inner, want, eng, o->buf));
    dnnl_primitive_desc_t rpd;
    DNNL_CHECK(is_output ? dnnl_reorder_primitive_desc_create(&rpd, want, eng, plain, eng, NULL)
                         : dnnl_reorder_primitive_desc_create(&rpd, plain, eng, want, eng, NULL));
    DNNL_CHECK(dnnl_primitive_create(&o->reorder, rpd));
    DNNL_CHECK(dnnl_primitive_desc_destroy(rpd));
}

static void operand_reorder(Operand *o, dnnl_stream_t stream, int is_output) {
    if (!o->reorder)
        return;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, is_output ? o->inner : o->user},
                               {DNNL_ARG_TO, is_output ? o->user : o->inner}};
    DNNL_CHECK(dnnl_primitive_execute(o->reorder, stream, 2, args));
}

static void operand_free(Operand *o) {
    if (o->reorder)
        DNNL_CHECK(dnnl_primitive_destroy(o->reorder));
    if (o->inner != o->user)
        DNNL_CHECK(dnnl_memory_destroy(o->inner));
    DNNL_CHECK(dnnl_memory_destroy(o->user));
    free(o->buf);
}

// Geometries left to im2col although oneDNN takes them, measured on LeNet's three 5×5
// convolutions of 12 channels, one thread (µs per call, oneDNN / im2col):
//   - batches under 4: each call here builds descriptors and reorders (about 10 µs), which
//     small batches do not pay back: at batch 1 (DLG's, and DP-SGD's per-example weight
//     gradients) the forward took 11 / 7 and the weight gradient 18–36 / 7–26; at batch 4
//     oneDNN was ahead in every direction (34 / 83 for the forward of 12 channels);
//   - the input gradient of a layer with fewer than 4 input channels (LeNet's first,
//     which DLG and Inverting Gradients differentiate): 1530 / 780 at batch 64 with the
//     blocked kernel and its reorders, and oneDNN's plain-layout GEMM was no faster.
static int left_to_im2col(ConvDir dir, const ConvGeom *g) {
    return g->n < 4 || (dir == DIR_BWD_DATA && g->c_in < 4);
}

// Runs dir on oneDNN (on one OpenMP thread: conv_run); 0 when it does not take the geometry.
static int conv_run_one_thread(ConvDir dir, const ConvGeom *g, const ConvArgs *a) {
    dnnl_engine_t eng;
    DNNL_CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    dnnl_primitive_desc_t pd = conv_pd(eng, dir, g, 1);
    if (!pd) {
        DNNL_CHECK(dnnl_engine_destroy(eng));
        return 0;
    }
    dnnl_primitive_t prim;
    DNNL_CHECK(dnnl_primitive_create(&prim, pd));
    dnnl_memory_desc_t x, w, y;
    dnnl_dims_t st, pl, pr;
    geom_descs(g, 0, &x, &w, &y, st, pl, pr);
    // oneDNN takes the buffers as void *; it writes only the output's.
    float *px = dir == DIR_BWD_DATA ? a->out : (float *)a->src;
    float *pw = dir == DIR_BWD_FILTER ? a->out : (float *)a->wei;
    float *py = dir == DIR_FWD ? a->out : (float *)a->dst;
    int xa = dir == DIR_BWD_DATA ? DNNL_ARG_DIFF_SRC : DNNL_ARG_SRC;
    int wa = dir == DIR_BWD_FILTER ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS;
    int ya = dir == DIR_FWD ? DNNL_ARG_DST : DNNL_ARG_DIFF_DST;
    Operand ox, ow, oy;
    operand_init(&ox, eng, &x, dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, xa), px, dir == DIR_BWD_DATA);
    operand_init(&ow, eng, &w, dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, wa), pw,
                 dir == DIR_BWD_FILTER);
    operand_init(&oy, eng, &y, dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, ya), py, dir == DIR_FWD);
    dnnl_exec_arg_t args[3] = {{xa, ox.inner}, {wa, ow.inner}, {ya, oy.inner}};
    dnnl_stream_t stream;
    DNNL_CHECK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    if (dir != DIR_BWD_DATA)
        operand_reorder(&ox, stream, 0);
    if (dir != DIR_BWD_FILTER)
        operand_reorder(&ow, stream, 0);
    if (dir != DIR_FWD)
        operand_reorder(&oy, stream, 0);
    DNNL_CHECK(dnnl_primitive_execute(prim, stream, 3, args));
    if (dir == DIR_BWD_DATA)
        operand_reorder(&ox, stream, 1);
    else if (dir == DIR_BWD_FILTER)
        operand_reorder(&ow, stream, 1);
    else
        operand_reorder(&oy, stream, 1);
    DNNL_CHECK(dnnl_stream_wait(stream));
    DNNL_CHECK(dnnl_stream_destroy(stream));
    operand_free(&ox);
    operand_free(&ow);
    operand_free(&oy);
    DNNL_CHECK(dnnl_primitive_destroy(prim));
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    DNNL_CHECK(dnnl_engine_destroy(eng));
    return 1;
}

// Runs dir on oneDNN; 0 when it does not take the geometry (the caller runs im2col).
// The calling thread's OpenMP setting is 1 for the whole call, not only the execution:
// creating primitives and reorders opens parallel regions too, and a team of more
// threads there leaves them spinning (libgomp's wait policy) beside our workers.
static int conv_run(ConvDir dir, const ConvGeom *g, const ConvArgs *a) {
    if (left_to_im2col(dir, g))
        return 0;
    int threads = omp_get_max_threads();
    if (threads != 1)
        omp_set_num_threads(1);
    int ran = conv_run_one_thread(dir, g, a);
    if (threads != 1)
        omp_set_num_threads(threads);
    return ran;
}

// The slots keep no columns (conv2d_columns_size is NULL in this backend), so cols is
// always NULL here, and the im2col fallback builds its own.
void dnnl_conv2d_forward(const ConvGeom *g, const float *x, const float *w, float *y, float *cols,
                         int cols_filled) {
    ConvArgs a = {.src = x, .wei = w, .out = y};
    if (!conv_run(DIR_FWD, g, &a))
        cpu_conv2d_forward(g, x, w, y, NULL, 0);
}

void dnnl_conv2d_backward_data(const ConvGeom *g, const float *dy, const float *w, float *dx) {
    ConvArgs a = {.wei = w, .dst = dy, .out = dx};
    if (!conv_run(DIR_BWD_DATA, g, &a))
        cpu_conv2d_backward_data(g, dy, w, dx);
}

void dnnl_conv2d_backward_filter(const ConvGeom *g, const float *x, const float *dy, float *dw, float *cols,
                                 int cols_filled) {
    ConvArgs a = {.src = x, .dst = dy, .out = dw};
    if (!conv_run(DIR_BWD_FILTER, g, &a))
        cpu_conv2d_backward_filter(g, x, dy, dw, NULL, 0);
}

int dnnl_conv2d_takes(const ConvGeom *g, int dir, char *impl, size_t impl_size) {
    if (left_to_im2col((ConvDir)dir, g))
        return 0;
    int threads = omp_get_max_threads();
    if (threads != 1)
        omp_set_num_threads(1);
    dnnl_engine_t eng;
    DNNL_CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    dnnl_primitive_desc_t pd = conv_pd(eng, (ConvDir)dir, g, 1);
    if (pd && impl && impl_size) {
        const char *name = "";
        DNNL_CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name));
        snprintf(impl, impl_size, "%s", name);
    }
    if (pd)
        DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    DNNL_CHECK(dnnl_engine_destroy(eng));
    if (threads != 1)
        omp_set_num_threads(threads);
    return pd != NULL;
}

// -- per-example weight gradients: the batched product on oneDNN's matmul ------------------
// c_i = a_i · b_iᵀ for the chunk in one call: src a (batch, m, k), weights bᵀ as
// (batch, k, n) with strides (n·k, 1, k) (b itself, read transposed), dst (batch, m, n).
// At LeNet's per-example weight gradients, 256 examples of 12 × 49 by 49 × 300, one
// thread, it ran in 1.8–2.0 ms against 3.8–4.0 ms for 256 OpenBLAS calls (its
// "brg:avx512_core" kernel on this machine). Same threading as the convolutions: one
// OpenMP thread for the whole call, so the sums do not depend on the thread count.
static int batched_product_one_thread(int batch, int m, int n, int k, const float *a, const float *b, float *c) {
    dnnl_engine_t eng;
    DNNL_CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    dnnl_memory_desc_t ma, mb, mc;
    dnnl_dims_t da = {batch, m, k}, db = {batch, k, n}, dc = {batch, m, n};
    dnnl_dims_t sa = {(dnnl_dim_t)m * k, k, 1}, sb = {(dnnl_dim_t)n * k, 1, k}, sc = {(dnnl_dim_t)m * n, n, 1};
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&ma, 3, da, dnnl_f32, sa));
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&mb, 3, db, dnnl_f32, sb));
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&mc, 3, dc, dnnl_f32, sc));
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = NULL;
    if (dnnl_matmul_desc_init(&md, &ma, &mb, NULL, &mc) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) != dnnl_success ||
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl ||
        strncmp(impl, "ref", 3) == 0) {
        if (pd)
            DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
        DNNL_CHECK(dnnl_engine_destroy(eng));
        return 0;
    }
    dnnl_primitive_t prim;
    DNNL_CHECK(dnnl_primitive_create(&prim, pd));
    dnnl_memory_t xa, xb, xc;
    DNNL_CHECK(dnnl_memory_create(&xa, &ma, eng, (void *)a)); // read only, as the conv operands
    DNNL_CHECK(dnnl_memory_create(&xb, &mb, eng, (void *)b));
    DNNL_CHECK(dnnl_memory_create(&xc, &mc, eng, c));
    dnnl_stream_t stream;
    DNNL_CHECK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, xa}, {DNNL_ARG_WEIGHTS, xb}, {DNNL_ARG_DST, xc}};
    DNNL_CHECK(dnnl_primitive_execute(prim, stream, 3, args));
    DNNL_CHECK(dnnl_stream_wait(stream));
    DNNL_CHECK(dnnl_stream_destroy(stream));
    DNNL_CHECK(dnnl_memory_destroy(xa));
    DNNL_CHECK(dnnl_memory_destroy(xb));
    DNNL_CHECK(dnnl_memory_destroy(xc));
    DNNL_CHECK(dnnl_primitive_destroy(prim));
    DNNL_CHECK(dnnl_primitive_desc_destroy(pd));
    DNNL_CHECK(dnnl_engine_destroy(eng));
    return 1;
}

int dnnl_batched_product_nt_run(int batch, int m, int n, int k, const float *a, const float *b, float *c) {
    int threads = omp_get_max_threads();
    if (threads != 1)
        omp_set_num_threads(1);
    int ran = batched_product_one_thread(batch, m, n, k, a, b, c);
    if (threads != 1)
        omp_set_num_threads(threads);
    return ran;
}

// Chunks under 4 examples stay on OpenBLAS: the descriptors and the primitive lookup per
// call (about 10 µs, as for the convolutions) are not paid back.
static void dnnl_batched_product_nt(int batch, int m, int n, int k, const float *a, const float *b, float *c) {
    if (batch < 4 || !dnnl_batched_product_nt_run(batch, m, n, k, a, b, c))
        cpu_batched_product_nt(batch, m, n, k, a, b, c);
}

void dnnl_conv2d_backward_filter_per_example(const ConvGeom *g, const float *x, const float *dy, float *dw) {
    cpu_conv2d_backward_filter_per_example_by(g, x, dy, dw, dnnl_batched_product_nt);
}
