// PNG files through libpng: image-folder datasets (datasets/imagefolder.c, hence in
// core, below datasets), originals and reconstructions of gradient-inversion attacks,
// grids of them for the report, and the inputs of `fedpriv ssim`.
//
// In memory an image is CHW float (c planes of h rows of w values) in [0,1]; c is 1
// (grayscale) or 3 (RGB). Writing clamps each value to [0,1] (NaN becomes 0) and
// stores round(v * 255) as 8 bits; files are written to a temporary name beside the
// target and renamed, so a failed write leaves no partial PNG behind.
//
// Reading accepts every PNG colour type and depth and converts it:
//   gray 1/2/4/8 bit        → c = 1, value / (2^depth - 1)
//   gray 16 bit             → c = 1, value / 65535 (full precision kept)
//   palette                 → c = 3 (the palette's RGB)
//   RGB 8/16 bit            → c = 3
//   any alpha (gray+alpha, RGBA, palette tRNS) → dropped: fedpriv images are opaque,
//                             and the colour values are kept as stored
// Gamma and colour-profile chunks are ignored (values are taken as stored).
// Errors name the file: missing or unreadable → FP_EIO; not a PNG, truncated, corrupt
// (CRC, zlib) or larger than PNG_MAX_SIDE on a side → FP_EFORMAT.
#ifndef FEDPRIV_CORE_PNG_H
#define FEDPRIV_CORE_PNG_H

#include "core/status.h"

// Largest width or height read or written (a guard against absurd headers).
#define PNG_MAX_SIDE 16384

// One grayscale image, img is (h, w).
FpStatus png_write_gray(const char *path, const float *img, int h, int w, FpError *err);
// One RGB image, img is (3, h, w).
FpStatus png_write_rgb(const char *path, const float *img, int h, int w, FpError *err);
// c = 1 → gray, c = 3 → RGB; other c → FP_EPARAM.
FpStatus png_write(const char *path, const float *img, int c, int h, int w, FpError *err);

// Reads path into a malloc'd CHW float buffer (*img, caller frees) with *c in {1, 3}.
// On error *img is NULL.
FpStatus png_read(const char *path, float **img, int *c, int *h, int *w, FpError *err);
// The same from len bytes in memory (a file already read, e.g. through
// fp_read_beneath); name is for messages.
FpStatus png_read_memory(const char *name, const void *data, size_t len, float **img, int *c, int *h, int *w,
                         FpError *err);

// Tiles n images (images is (n, c, h, w), c in {1, 3}) into one PNG: cols per row,
// ceil(n / cols) rows, each image upscaled scale times by nearest neighbour (scale 1
// keeps the size; 28x28 digits are more readable at 4), pad pixels of white between
// tiles and around the border. The grid is at most PNG_MAX_SIDE on a side.
FpStatus png_write_grid(const char *path, const float *images, int n, int c, int h, int w, int cols, int pad,
                        int scale, FpError *err);

#endif
