// Image similarity between an original and a reconstruction (gradient inversion):
// SSIM (Wang et al. 2004), PSNR and MSE.
//
// Images are CHW float planes (c channels, h rows, w columns), values nominally in
// [0,1]; data range L = 1. Values are used as given (no clamping: callers that want
// the reconstruction clamped to [0,1] do so first); a NaN or infinity is FP_EPARAM.
//
// SSIM is the spec's definition (shared/spec/attacks-metrics-accounting.md): per
// channel, S = ((2 mx my + C1)(2 sxy + C2)) / ((mx^2 + my^2 + C1)(sx^2 + sy^2 + C2)),
// C1 = (0.01 L)^2, C2 = (0.03 L)^2, local statistics under an 11-tap Gaussian window
// (sigma 1.5, exp(-k^2 / 2 sigma^2) for k = -5..5, normalised, separable), population
// (co)variances, the map kept at valid positions only (5 px dropped on each border,
// 22x22 for 32x32), averaged per channel and then over channels. This equals skimage
// structural_similarity(gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
// data_range=1) in the versions that crop, and pytorch-msssim ssim(win_size=11,
// win_sigma=1.5, data_range=1) without padding. It is computed with libvips image
// operations; libvips is initialised once per process on first use (thread-safe).
// libvips runs worker threads: a process that forks workers should fork before its
// first SSIM, or compute SSIM in the workers only.
#ifndef FEDPRIV_EVAL_IMAGE_METRICS_H
#define FEDPRIV_EVAL_IMAGE_METRICS_H

#include "core/status.h"

// The window: 11 taps, radius 5; images must be at least this large in h and w.
#define IMAGE_SSIM_WINDOW 11

typedef struct {
    double ssim;  // mean SSIM over valid positions and channels, in [-1, 1]
    double psnr;  // 10 log10(1 / mse) in dB; +INFINITY when mse == 0
    double mse;   // mean of (a - b)^2 over all c*h*w values
} ImageMetrics;

// SSIM of two CHW images of the same shape. h or w < 11, c outside 1..64 → FP_EPARAM;
// a libvips failure → FP_EBACKEND. Builds a libvips pipeline for the call (an
// SsimPlan) and releases it; code that scores many pairs of one shape (a DLG run
// every few steps) keeps a plan instead, which skips the pipeline construction.
FpStatus image_ssim(const float *a, const float *b, int c, int h, int w, double *ssim, FpError *err);

// A libvips SSIM pipeline for one image shape, built once and run on many pairs.
// Runs evaluate in the calling thread; a plan serves one thread at a time (use one
// plan per thread). Every ssim_plan_create has an ssim_plan_free.
typedef struct SsimPlan SsimPlan;
FpStatus ssim_plan_create(int c, int h, int w, SsimPlan **out, FpError *err);
FpStatus ssim_plan_run(SsimPlan *plan, const float *a, const float *b, double *ssim, FpError *err);
void ssim_plan_free(SsimPlan *plan);

// Mean squared error over all c*h*w values (accumulated in double).
FpStatus image_mse(const float *a, const float *b, int c, int h, int w, double *mse, FpError *err);

// PSNR = 10 log10(L^2 / MSE) with L = 1, in dB; +INFINITY when the images are equal.
FpStatus image_psnr(const float *a, const float *b, int c, int h, int w, double *psnr, FpError *err);

// All three at once (what attacks and `fedpriv ssim` report).
FpStatus image_metrics(const float *a, const float *b, int c, int h, int w, ImageMetrics *out, FpError *err);

#endif
