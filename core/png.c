// PNG read/write through libpng (conventions in png.h).
//
// libpng reports errors by calling an error function that must not return; ours
// records libpng's message and longjmps back to the setjmp in read_body / write_body.
// All state that outlives the jump (libpng structs, FILE, buffers) lives in a struct
// owned by the caller of those functions, so nothing read after the jump is a
// non-volatile local modified after setjmp (C11 7.13.2.1). Warnings are discarded:
// library code does not print.
#include "core/png.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h"

typedef struct {
    jmp_buf jump;
    char msg[200];
} PngErrorSink;

static void on_png_error(png_structp png, png_const_charp msg) {
    PngErrorSink *sink = png_get_error_ptr(png);
    snprintf(sink->msg, sizeof sink->msg, "%s", msg ? msg : "unknown libpng error");
    longjmp(sink->jump, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static unsigned char to_u8(float v) {
    if (!(v > 0.0f)) // also NaN
        return 0;
    if (v >= 1.0f)
        return 255;
    return (unsigned char)(v * 255.0f + 0.5f);
}

// ------------------------------------------------------------------ reading -------

typedef struct {
    FILE *file;
    png_structp png;
    png_infop info;
    unsigned char *pixels;  // decoded rows, height * rowbytes
    png_bytep *rows;
    float *img;             // the result, CHW
    PngErrorSink sink;
} PngReader;

// Decodes after the 8 signature bytes. Fills r->img, *c, *h, *w.
static FpStatus read_body(PngReader *r, const char *path, int *c, int *h, int *w, FpError *err) {
    r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r->sink, on_png_error, on_png_warning);
    if (!r->png || !(r->info = png_create_info_struct(r->png)))
        return fp_fail(err, FP_ENOMEM, "%s: cannot allocate the PNG decoder", path);
    if (setjmp(r->sink.jump)) // libpng has no error codes: its allocation failures say "Out of memory"
        return strcasestr(r->sink.msg, "memory") ? fp_fail(err, FP_ENOMEM, "%s: out of memory decoding PNG", path)
                                                 : fp_fail(err, FP_EFORMAT, "%s: corrupt or truncated PNG (%s)", path,
                                                           r->sink.msg);
    png_init_io(r->png, r->file);
    png_set_sig_bytes(r->png, 8);
    png_set_user_limits(r->png, PNG_MAX_SIDE, PNG_MAX_SIDE);
    png_read_info(r->png, r->info);

    png_uint_32 width = png_get_image_width(r->png, r->info), height = png_get_image_height(r->png, r->info);
    int color = png_get_color_type(r->png, r->info), depth = png_get_bit_depth(r->png, r->info);
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(r->png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(r->png);
    png_set_interlace_handling(r->png);
    png_read_update_info(r->png, r->info);

    // After the expansions: 1 (gray), 2 (gray+alpha), 3 (RGB) or 4 (RGBA) channels of
    // 8 or 16 bits; a palette's tRNS may have become an alpha channel.
    int channels = png_get_channels(r->png, r->info);
    int bits = png_get_bit_depth(r->png, r->info);
    if (channels < 1 || channels > 4 || (bits != 8 && bits != 16))
        return fp_fail(err, FP_EFORMAT, "%s: unsupported PNG layout (%d channels of %d bits after conversion)", path,
                       channels, bits);
    size_t rowbytes = png_get_rowbytes(r->png, r->info);
    if (rowbytes != (size_t)width * channels * (bits / 8))
        return fp_fail(err, FP_EFORMAT, "%s: unexpected PNG row size %zu", path, rowbytes);
    int out_c = channels >= 3 ? 3 : 1;
    size_t plane = (size_t)width * height;
    if (!(r->pixels = fp_malloc(rowbytes * height, err)) || !(r->rows = fp_malloc(height * sizeof *r->rows, err)) ||
        !(r->img = fp_malloc(plane * out_c * sizeof *r->img, err)))
        return FP_ENOMEM;
    for (png_uint_32 y = 0; y < height; y++)
        r->rows[y] = r->pixels + (size_t)y * rowbytes;
    png_read_image(r->png, r->rows);
    png_read_end(r->png, NULL); // a missing IEND is a truncated file

    // Interleaved samples → CHW planes; alpha (the last sample when channels is 2 or 4)
    // is dropped. 16-bit samples are big-endian in the PNG byte order.
    // Divided (not multiplied by a rounded reciprocal) so that v / 255 is the nearest
    // float to the exact value, as a caller computing (float)v / 255 gets.
    const float maxval = bits == 16 ? 65535.0f : 255.0f;
    for (png_uint_32 y = 0; y < height; y++)
        for (png_uint_32 x = 0; x < width; x++)
            for (int k = 0; k < out_c; k++) {
                const unsigned char *s = r->rows[y] + ((size_t)x * channels + k) * (bits / 8);
                unsigned v = bits == 16 ? (unsigned)s[0] << 8 | s[1] : s[0];
                r->img[(size_t)k * plane + (size_t)y * width + x] = (float)v / maxval;
            }
    *c = out_c;
    *h = (int)height;
    *w = (int)width;
    return FP_OK;
}

// Reads the PNG in f (closed here); path names it in messages.
static FpStatus read_file(FILE *f, const char *path, float **img, int *c, int *h, int *w, FpError *err) {
    PngReader r;
    memset(&r, 0, sizeof r);
    r.file = f;
    unsigned char sig[8];
    size_t got = fread(sig, 1, sizeof sig, r.file);
    FpStatus status;
    if (ferror(r.file))
        status = fp_fail(err, FP_EIO, "%s: cannot read: %s", path, strerror(errno));
    else if (got < sizeof sig || png_sig_cmp(sig, 0, sizeof sig) != 0)
        status = fp_fail(err, FP_EFORMAT, "%s: not a PNG file (bad signature)", path);
    else
        status = read_body(&r, path, c, h, w, err);
    if (r.png)
        png_destroy_read_struct(&r.png, r.info ? &r.info : NULL, NULL);
    fclose(r.file);
    free(r.pixels);
    free(r.rows);
    if (status == FP_OK)
        *img = r.img;
    else
        free(r.img);
    return status;
}

FpStatus png_read(const char *path, float **img, int *c, int *h, int *w, FpError *err) {
    *img = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return fp_fail(err, FP_EIO, "%s: cannot open: %s", path, strerror(errno));
    return read_file(f, path, img, c, h, w, err);
}

FpStatus png_read_memory(const char *name, const void *data, size_t len, float **img, int *c, int *h, int *w,
                         FpError *err) {
    *img = NULL;
    FILE *f = len ? fmemopen((void *)data, len, "rb") : NULL;
    if (!f)
        return len ? fp_fail(err, FP_ENOMEM, "%s: cannot read from memory: %s", name, strerror(errno))
                   : fp_fail(err, FP_EFORMAT, "%s: not a PNG file (empty)", name);
    return read_file(f, name, img, c, h, w, err);
}

// ------------------------------------------------------------------ writing -------

typedef struct {
    FILE *file;
    png_structp png;
    png_infop info;
    png_bytep *rows;
    PngErrorSink sink;
} PngWriter;

// pixels is (h, w, c) 8-bit interleaved, c in {1, 3}.
static FpStatus write_body(PngWriter *wr, const char *path, const unsigned char *pixels, int c, int h, int w,
                           FpError *err) {
    wr->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &wr->sink, on_png_error, on_png_warning);
    if (!wr->png || !(wr->info = png_create_info_struct(wr->png)))
        return fp_fail(err, FP_ENOMEM, "%s: cannot allocate the PNG encoder", path);
    if (!(wr->rows = fp_malloc((size_t)h * sizeof *wr->rows, err)))
        return FP_ENOMEM;
    for (int y = 0; y < h; y++)
        wr->rows[y] = (png_bytep)pixels + (size_t)y * w * c;
    if (setjmp(wr->sink.jump))
        return fp_fail(err, FP_EIO, "%s: cannot write PNG (%s)", path, wr->sink.msg);
    png_init_io(wr->png, wr->file);
    png_set_IHDR(wr->png, wr->info, (png_uint_32)w, (png_uint_32)h, 8,
                 c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(wr->png, wr->info);
    png_write_image(wr->png, wr->rows);
    png_write_end(wr->png, NULL);
    return FP_OK;
}

// Writes to "<path>.tmp.<pid>" and renames it over path once complete.
static FpStatus write_u8(const char *path, const unsigned char *pixels, int c, int h, int w, FpError *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return fp_fail(err, FP_EPARAM, "%s: path too long", path);
    PngWriter wr;
    memset(&wr, 0, sizeof wr);
    if (!(wr.file = fp_create_new(tmp, err)))
        return FP_EIO;
    FpStatus status = write_body(&wr, path, pixels, c, h, w, err);
    if (wr.png)
        png_destroy_write_struct(&wr.png, wr.info ? &wr.info : NULL);
    free(wr.rows);
    if (fflush(wr.file) != 0 || ferror(wr.file)) {
        if (status == FP_OK)
            status = fp_fail(err, FP_EIO, "%s: write failed: %s", path, strerror(errno));
    }
    if (fclose(wr.file) != 0 && status == FP_OK)
        status = fp_fail(err, FP_EIO, "%s: write failed: %s", path, strerror(errno));
    if (status == FP_OK && rename(tmp, path) != 0)
        status = fp_fail(err, FP_EIO, "%s: cannot rename the finished file into place: %s", path, strerror(errno));
    if (status != FP_OK)
        remove(tmp);
    return status;
}

static FpStatus check_shape(const char *path, int c, int h, int w, FpError *err) {
    if (c != 1 && c != 3)
        return fp_fail(err, FP_EPARAM, "%s: PNG images have 1 or 3 channels, not %d", path, c);
    if (h < 1 || w < 1 || h > PNG_MAX_SIDE || w > PNG_MAX_SIDE)
        return fp_fail(err, FP_EPARAM, "%s: image size %dx%d outside 1..%d", path, h, w, PNG_MAX_SIDE);
    return FP_OK;
}

FpStatus png_write(const char *path, const float *img, int c, int h, int w, FpError *err) {
    FP_TRY(check_shape(path, c, h, w, err));
    size_t plane = (size_t)h * w;
    unsigned char *pixels = fp_malloc(plane * c, err);
    if (!pixels)
        return FP_ENOMEM;
    for (int k = 0; k < c; k++)
        for (size_t i = 0; i < plane; i++)
            pixels[i * c + k] = to_u8(img[(size_t)k * plane + i]);
    FpStatus status = write_u8(path, pixels, c, h, w, err);
    free(pixels);
    return status;
}

FpStatus png_write_gray(const char *path, const float *img, int h, int w, FpError *err) {
    return png_write(path, img, 1, h, w, err);
}

FpStatus png_write_rgb(const char *path, const float *img, int h, int w, FpError *err) {
    return png_write(path, img, 3, h, w, err);
}

FpStatus png_write_grid(const char *path, const float *images, int n, int c, int h, int w, int cols, int pad,
                        int scale, FpError *err) {
    if (n < 1 || cols < 1 || pad < 0 || scale < 1)
        return fp_fail(err, FP_EPARAM, "%s: grid needs n >= 1, cols >= 1, pad >= 0, scale >= 1 (got %d, %d, %d, %d)",
                       path, n, cols, pad, scale);
    FP_TRY(check_shape(path, c, h, w, err));
    if (cols > n)
        cols = n;
    int rows = (n + cols - 1) / cols;
    // Sizes in 64 bits: the limit check must not overflow on absurd arguments.
    int64_t gw = (int64_t)cols * w * scale + (int64_t)(cols + 1) * pad;
    int64_t gh = (int64_t)rows * h * scale + (int64_t)(rows + 1) * pad;
    if (gw > PNG_MAX_SIDE || gh > PNG_MAX_SIDE)
        return fp_fail(err, FP_EPARAM, "%s: grid of %lldx%lld pixels exceeds %d on a side", path, (long long)gh,
                       (long long)gw, PNG_MAX_SIDE);
    size_t plane = (size_t)h * w;
    unsigned char *pixels = fp_malloc((size_t)gw * gh * c, err);
    if (!pixels)
        return FP_ENOMEM;
    memset(pixels, 255, (size_t)gw * gh * c); // white padding
    for (int i = 0; i < n; i++) {
        const float *im = images + (size_t)i * c * plane;
        size_t x0 = (size_t)pad + (size_t)(i % cols) * (w * scale + pad);
        size_t y0 = (size_t)pad + (size_t)(i / cols) * (h * scale + pad);
        for (size_t y = 0; y < (size_t)h * scale; y++)
            for (size_t x = 0; x < (size_t)w * scale; x++)
                for (int k = 0; k < c; k++) // nearest neighbour: output (y, x) shows input (y/scale, x/scale)
                    pixels[((y0 + y) * gw + x0 + x) * c + k] =
                        to_u8(im[(size_t)k * plane + (y / scale) * w + x / scale]);
    }
    FpStatus status = write_u8(path, pixels, c, (int)gh, (int)gw, err);
    free(pixels);
    return status;
}
