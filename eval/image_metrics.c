// SSIM (Wang et al. 2004, the spec's valid-window variant) with libvips operations;
// MSE and PSNR as plain loops. See image_metrics.h for the exact definition.
//
// Per channel, with window means mx, my and population (co)variances sx^2, sy^2, sxy:
//   l  = (2 mx my + C1) / (mx^2 + my^2 + C1)           = A1 / B1
//   cs = (2 sxy + C2) / (sx^2 + sy^2 + C2)             = A2 / B2
//   SSIM map = l * cs
//
// Why the pipeline looks the way it does. A libvips pipeline is evaluated on demand,
// and an image read by two downstream operations is computed twice (there is no
// common-subexpression cache); at 32x32 the per-operation overhead dominates the
// arithmetic, so every branch multiplies the cost. Branches are therefore taken only
// over the memory image (where recomputing is free); from the convolution on, the
// pipeline is one chain, each operation reading only the previous one, and the two
// products it needs there are taken in log space, where they become band sums
// (vips_recomb):
//   l + 1  = (A1 + B1) / B1,  A1 + B1 = (mx + my)^2 + 2 C1               > 0
//   cs + 1 = (A2 + B2) / B2,  A2 + B2 = var(x + y) + 2 C2                 > 0
//   l * cs = (l + 1)(cs + 1) - (l + 1) - (cs + 1) + 1
// so every logarithm has an argument >= C1 or C2 (no sign or zero case), and the
// result carries only exp/log rounding (~1e-15), for any input values of moderate size.
//
// Bands are laid out in blocks of c (one band per channel); block names below.
//   Z  = [X, Y]                              memory image (h, w, 2c), plan-owned buffer
//   1 extract_band, add, multiply, bandjoin → [X, Y, S, XX, YY, XY], S = X + Y (these
//                                             branch, but only over the memory image)
//   2 convf x2    → window means [mx, my, ms, Exx, Eyy, Exy]   (11x1 then 1x11 Gaussian)
//   3 extract_area (5, 5, w-10, h-10)        valid positions only
//   4 pow_const   → [mx^2, my^2, ms^2, Exx, Eyy, Exy]          (ms = mx + my)
//   5 recomb, linear → [A1+B1, B1, A2+B2, B2]
//        A1+B1 = ms^2 + 2C1, B1 = mx^2 + my^2 + C1,
//        A2+B2 = Exx + Eyy + 2Exy - ms^2 + 2C2, B2 = Exx + Eyy - mx^2 - my^2 + C2
//   6 log, recomb, exp → [(l+1)(cs+1), l+1, cs+1]
//   7 recomb, linear → (l+1)(cs+1) - (l+1) - (cs+1) + 1 = the SSIM map (c bands)
// The map is evaluated with vips_region_prepare in the calling thread (no thread
// pool start per call) and averaged over positions and bands: every channel has the
// same number of valid positions, so that is the mean of the channel means.
// vips_convf keeps the image size (edges extended) with each output centred on its
// input pixel; the crop at offset 5 keeps exactly the windows that lie inside the
// image, so the edge extension never reaches the result.
#include "eval/image_metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <vips/vips.h>

#define SSIM_RADIUS (IMAGE_SSIM_WINDOW / 2)
#define SSIM_SIGMA 1.5
#define SSIM_K1 0.01
#define SSIM_K2 0.03
#define SSIM_RANGE 1.0
#define SSIM_STAGES 24 // images owned by a plan's scope (matrices and pipeline stages)

// libvips is started once per process. vips_init() guards itself with plain flags, so
// two threads arriving together could see it half-started; pthread_once makes the
// first caller finish it before any other returns. The result is written only inside
// the once routine.
static pthread_once_t vips_once = PTHREAD_ONCE_INIT;
static int vips_start_result = -1;

static void vips_start(void) { vips_start_result = VIPS_INIT("fedpriv"); }

struct SsimPlan {
    int c, h, w;
    double *pixels;     // (h, w, 2c): the c values of X then the c values of Y per pixel
    VipsImage *input;   // wraps pixels without copying (held by scope); rewritten by each run
    VipsObject *scope;  // owns every image of the pipeline (vips_object_local_array)
    VipsImage *map;     // the SSIM map at valid positions, (h-10, w-10, c)
    VipsRegion *region; // on map; evaluating it runs the whole chain
};

// Takes libvips' error text (and clears it) into err.
static FpStatus vips_failure(FpError *err, const char *what) {
    const char *msg = vips_error_buffer();
    char line[256];
    snprintf(line, sizeof line, "%s", msg && msg[0] ? msg : "unknown error");
    line[strcspn(line, "\n")] = '\0';
    vips_error_clear();
    return fp_fail(err, FP_EBACKEND, "ssim: libvips %s failed: %s", what, line);
}

static FpStatus check_shape(const char *fn, int c, int h, int w, FpError *err) {
    if (c < 1 || h < 1 || w < 1 || c > 64)
        return fp_fail(err, FP_EPARAM, "%s: bad image shape %dx%dx%d (channels 1..64)", fn, c, h, w);
    return FP_OK;
}

static FpStatus check_images(const char *fn, const float *a, const float *b, int c, int h, int w, FpError *err) {
    if (!a || !b)
        return fp_fail(err, FP_EPARAM, "%s: NULL image", fn);
    FP_TRY(check_shape(fn, c, h, w, err));
    size_t n = (size_t)c * (size_t)h * (size_t)w;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return fp_fail(err, FP_EPARAM, "%s: first image has a non-finite value at index %zu", fn, i);
        if (!isfinite(b[i]))
            return fp_fail(err, FP_EPARAM, "%s: second image has a non-finite value at index %zu", fn, i);
    }
    return FP_OK;
}

// A recomb matrix mapping in_blocks blocks of c bands to out_blocks blocks; coef is
// (out_blocks, in_blocks) and links band k of each block to band k of the others.
static FpStatus block_matrix(int c, int out_blocks, int in_blocks, const double *coef, VipsImage **out,
                             FpError *err) {
    int cols = in_blocks * c, rows = out_blocks * c;
    double *m = fp_calloc((size_t)rows * cols, sizeof *m, err);
    if (!m)
        return FP_ENOMEM;
    for (int o = 0; o < out_blocks; o++)
        for (int i = 0; i < in_blocks; i++)
            for (int k = 0; k < c; k++)
                m[(size_t)(o * c + k) * cols + i * c + k] = coef[o * in_blocks + i];
    *out = vips_image_new_matrix_from_array(cols, rows, m, rows * cols);
    free(m);
    return *out ? FP_OK : vips_failure(err, "matrix_from_array");
}

// One value per block, repeated for the c bands of the block.
static void per_block(int c, int blocks, const double *v, double *out) {
    for (int b = 0; b < blocks; b++)
        for (int k = 0; k < c; k++)
            out[b * c + k] = v[b];
}

void ssim_plan_free(SsimPlan *plan) {
    if (!plan)
        return;
    if (plan->region)
        g_object_unref(plan->region);
    // Drop any cached operation that still reads the buffer before it goes.
    if (plan->input)
        vips_image_invalidate_all(plan->input);
    if (plan->scope)
        g_object_unref(plan->scope);
    free(plan->pixels);
    free(plan);
}

// Records a libvips failure and leaves build_chain.
#define VIPS_STEP(call, what)                      \
    do {                                           \
        if ((call) != 0)                           \
            return vips_failure(err, what);        \
    } while (0)

static FpStatus build_chain(SsimPlan *p, FpError *err) {
    const int c = p->c, h = p->h, w = p->w;
    VipsImage **t = (VipsImage **)vips_object_local_array(p->scope, SSIM_STAGES);
    double v[6 * 64], e[6 * 64]; // per-band constants: at most 6 blocks of 64 channels

    t[0] = p->input; // Z = [X, Y]; the scope takes over the creation reference

    // 1. The local products, read straight from the memory image (a branch there costs
    //    nothing to recompute): [X, Y, S, XX, YY, XY] with S = X + Y.
    VIPS_STEP(vips_extract_band(t[0], &t[1], 0, "n", c, NULL), "extract_band"); // X
    VIPS_STEP(vips_extract_band(t[0], &t[2], c, "n", c, NULL), "extract_band"); // Y
    VIPS_STEP(vips_add(t[1], t[2], &t[3], NULL), "add");                        // S
    VIPS_STEP(vips_multiply(t[0], t[0], &t[4], NULL), "multiply");              // [XX, YY]
    VIPS_STEP(vips_multiply(t[1], t[2], &t[5], NULL), "multiply");              // XY
    VipsImage *products[4] = {t[0], t[3], t[4], t[5]};
    VIPS_STEP(vips_bandjoin(products, &t[6], 4, NULL), "bandjoin");

    // 2. Window means. The window: exp(-k^2 / 2 sigma^2), k = -5..5, normalised to sum
    //    1, scale 1; applied along x, then along y.
    double g[IMAGE_SSIM_WINDOW], gsum = 0;
    for (int k = -SSIM_RADIUS; k <= SSIM_RADIUS; k++)
        gsum += g[k + SSIM_RADIUS] = exp(-(double)(k * k) / (2 * SSIM_SIGMA * SSIM_SIGMA));
    for (int k = 0; k < IMAGE_SSIM_WINDOW; k++)
        g[k] /= gsum;
    if (!(t[7] = vips_image_new_matrix_from_array(IMAGE_SSIM_WINDOW, 1, g, IMAGE_SSIM_WINDOW)) ||
        !(t[8] = vips_image_new_matrix_from_array(1, IMAGE_SSIM_WINDOW, g, IMAGE_SSIM_WINDOW)))
        return vips_failure(err, "matrix_from_array");
    VIPS_STEP(vips_convf(t[6], &t[9], t[7], NULL), "convf");
    VIPS_STEP(vips_convf(t[9], &t[10], t[8], NULL), "convf");
    if (t[10]->Xsize != w || t[10]->Ysize != h || t[10]->BandFmt != VIPS_FORMAT_DOUBLE)
        return fp_fail(err, FP_EBACKEND, "ssim: libvips convf gave a %dx%d image of format %d, expected %dx%d double",
                       t[10]->Xsize, t[10]->Ysize, (int)t[10]->BandFmt, w, h);

    // 3. Valid positions only.
    VIPS_STEP(vips_extract_area(t[10], &t[11], SSIM_RADIUS, SSIM_RADIUS, w - 2 * SSIM_RADIUS, h - 2 * SSIM_RADIUS,
                                NULL),
              "extract_area");

    // 4. [mx, my, ms, Exx, Eyy, Exy] → [mx^2, my^2, ms^2, Exx, Eyy, Exy].
    per_block(c, 6, (const double[]){2, 2, 2, 1, 1, 1}, e);
    VIPS_STEP(vips_pow_const(t[11], &t[12], e, 6 * c, NULL), "pow_const");

    // 5. → [A1+B1, B1, A2+B2, B2], first without their constants, then with them.
    static const double moments[4 * 6] = {
        0,  0,  1,  0, 0, 0, // (mx + my)^2
        1,  1,  0,  0, 0, 0, // mx^2 + my^2
        0,  0,  -1, 1, 1, 2, // var(x + y) = Exx + Eyy + 2 Exy - ms^2
        -1, -1, 0,  1, 1, 0, // sx^2 + sy^2 = Exx + Eyy - mx^2 - my^2
    };
    FP_TRY(block_matrix(c, 4, 6, moments, &t[13], err));
    VIPS_STEP(vips_recomb(t[12], &t[14], t[13], NULL), "recomb");
    const double c1 = (SSIM_K1 * SSIM_RANGE) * (SSIM_K1 * SSIM_RANGE);
    const double c2 = (SSIM_K2 * SSIM_RANGE) * (SSIM_K2 * SSIM_RANGE);
    per_block(c, 4, (const double[]){1, 1, 1, 1}, e);
    per_block(c, 4, (const double[]){2 * c1, c1, 2 * c2, c2}, v);
    VIPS_STEP(vips_linear(t[14], &t[15], e, v, 4 * c, NULL), "linear");

    // 6. Logs, their differences and sums, back: [(l+1)(cs+1), l+1, cs+1].
    VIPS_STEP(vips_log(t[15], &t[16], NULL), "log");
    static const double ratios[3 * 4] = {
        1, -1, 1, -1, // log(l + 1) + log(cs + 1)
        1, -1, 0, 0,  // log(l + 1)
        0, 0,  1, -1, // log(cs + 1)
    };
    FP_TRY(block_matrix(c, 3, 4, ratios, &t[17], err));
    VIPS_STEP(vips_recomb(t[16], &t[18], t[17], NULL), "recomb");
    VIPS_STEP(vips_exp(t[18], &t[19], NULL), "exp");

    // 7. l cs = (l+1)(cs+1) - (l+1) - (cs+1) + 1: the SSIM map.
    static const double product[1 * 3] = {1, -1, -1};
    FP_TRY(block_matrix(c, 1, 3, product, &t[20], err));
    VIPS_STEP(vips_recomb(t[19], &t[21], t[20], NULL), "recomb");
    const double one = 1.0;
    VIPS_STEP(vips_linear(t[21], &t[22], &one, &one, 1, NULL), "linear");
    if (t[22]->Bands != c || t[22]->BandFmt != VIPS_FORMAT_DOUBLE)
        return fp_fail(err, FP_EBACKEND, "ssim: libvips pipeline gave %d bands of format %d, expected %d double",
                       t[22]->Bands, (int)t[22]->BandFmt, c);
    p->map = t[22];
    if (!(p->region = vips_region_new(p->map)))
        return vips_failure(err, "region_new");
    return FP_OK;
}

FpStatus ssim_plan_create(int c, int h, int w, SsimPlan **out, FpError *err) {
    *out = NULL;
    FP_TRY(check_shape("ssim", c, h, w, err));
    if (h < IMAGE_SSIM_WINDOW || w < IMAGE_SSIM_WINDOW)
        return fp_fail(err, FP_EPARAM, "ssim: images are %dx%d; SSIM's %dx%d window needs at least that size", h, w,
                       IMAGE_SSIM_WINDOW, IMAGE_SSIM_WINDOW);
    pthread_once(&vips_once, vips_start);
    if (vips_start_result != 0)
        return vips_failure(err, "initialisation");
    SsimPlan *p = fp_calloc(1, sizeof *p, err);
    if (!p)
        return FP_ENOMEM;
    p->c = c, p->h = h, p->w = w;
    size_t bytes = (size_t)h * w * 2 * c * sizeof *p->pixels;
    if (!(p->pixels = fp_calloc(1, bytes, err))) {
        ssim_plan_free(p);
        return FP_ENOMEM;
    }
    FpStatus status = FP_OK;
    VipsImage *input = vips_image_new_from_memory(p->pixels, bytes, w, h, 2 * c, VIPS_FORMAT_DOUBLE);
    if (!input)
        status = vips_failure(err, "new_from_memory");
    else if (!(p->scope = VIPS_OBJECT(vips_image_new()))) {
        g_object_unref(input);
        status = vips_failure(err, "image_new");
    } else {
        p->input = input; // owned by the scope from here on
        status = build_chain(p, err);
    }
    if (status != FP_OK) {
        ssim_plan_free(p);
        return status;
    }
    *out = p;
    return FP_OK;
}

FpStatus ssim_plan_run(SsimPlan *p, const float *a, const float *b, double *ssim, FpError *err) {
    const int c = p->c;
    FP_TRY(check_images("ssim", a, b, c, p->h, p->w, err));
    size_t plane = (size_t)p->h * p->w;
    for (size_t i = 0; i < plane; i++)
        for (int k = 0; k < c; k++) {
            p->pixels[i * 2 * c + k] = a[(size_t)k * plane + i];
            p->pixels[i * 2 * c + c + k] = b[(size_t)k * plane + i];
        }
    // The pixels changed behind libvips' back: drop whatever it may have kept.
    vips_image_invalidate_all(p->input);
    VipsRect all = {0, 0, p->map->Xsize, p->map->Ysize};
    if (vips_region_prepare(p->region, &all) != 0)
        return vips_failure(err, "region_prepare");
    double sum = 0;
    for (int y = 0; y < all.height; y++) {
        const double *row = (const double *)VIPS_REGION_ADDR(p->region, 0, y);
        for (int x = 0; x < all.width * c; x++)
            sum += row[x];
    }
    *ssim = sum / ((double)all.width * all.height * c);
    return FP_OK;
}

FpStatus image_ssim(const float *a, const float *b, int c, int h, int w, double *ssim, FpError *err) {
    SsimPlan *plan;
    FP_TRY(ssim_plan_create(c, h, w, &plan, err));
    FpStatus status = ssim_plan_run(plan, a, b, ssim, err);
    ssim_plan_free(plan);
    return status;
}

FpStatus image_mse(const float *a, const float *b, int c, int h, int w, double *mse, FpError *err) {
    FP_TRY(check_images("mse", a, b, c, h, w, err));
    size_t n = (size_t)c * (size_t)h * (size_t)w;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        sum += d * d;
    }
    *mse = sum / (double)n;
    return FP_OK;
}

FpStatus image_psnr(const float *a, const float *b, int c, int h, int w, double *psnr, FpError *err) {
    double mse;
    FP_TRY(image_mse(a, b, c, h, w, &mse, err));
    *psnr = mse == 0 ? INFINITY : 10.0 * log10(SSIM_RANGE * SSIM_RANGE / mse);
    return FP_OK;
}

FpStatus image_metrics(const float *a, const float *b, int c, int h, int w, ImageMetrics *out, FpError *err) {
    ImageMetrics m;
    FP_TRY(image_ssim(a, b, c, h, w, &m.ssim, err));
    FP_TRY(image_psnr(a, b, c, h, w, &m.psnr, err));
    FP_TRY(image_mse(a, b, c, h, w, &m.mse, err));
    *out = m;
    return FP_OK;
}
