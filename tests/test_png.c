// PNG read/write (eval/png.h): round trips, clamping and rounding, every colour
// type and depth libpng can write (the test writes them with libpng directly), grids,
// and bad files: missing, not a PNG, empty, truncated at several points, a flipped
// byte in the image data, an absurd header, and an unwritable destination.
#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/rng.h"
#include "eval/png.h"

// ---------------------------------------------------------------------------------
// Helpers

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

static void make_tmpdir(char *dir, size_t n) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, n, "%s/fedpriv-png-XXXXXX", base && base[0] ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void spit(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

// Writes a PNG with libpng itself: rows are already in the file's sample layout.
// palette/trans are used for PNG_COLOR_TYPE_PALETTE (n_palette entries, n_trans alphas).
static void write_raw_png(const char *path, int w, int h, int depth, int color, int interlace,
                          const unsigned char *data, size_t rowbytes, const png_color *palette, int n_palette,
                          const unsigned char *trans, int n_trans) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    ck_assert(png && info);
    if (setjmp(png_jmpbuf(png)))
        ck_abort_msg("libpng failed writing the test image %s", path);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color, interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (palette)
        png_set_PLTE(png, info, palette, n_palette);
    if (trans)
        png_set_tRNS(png, info, trans, n_trans, NULL);
    png_write_info(png, info);
    png_bytep rows[64];
    ck_assert_int_le(h, 64);
    for (int y = 0; y < h; y++)
        rows[y] = (png_bytep)data + (size_t)y * rowbytes;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
}

// Reads path and checks shape and every value against want (CHW) within tol.
static void expect_image(const char *path, int c, int h, int w, const float *want, float tol) {
    float *img = NULL;
    int rc, rh, rw;
    FpError err = {0};
    FpStatus st = png_read(path, &img, &rc, &rh, &rw, &err);
    ck_assert_msg(st == FP_OK, "%s: %s", path, err.msg);
    ck_assert_int_eq(rc, c);
    ck_assert_int_eq(rh, h);
    ck_assert_int_eq(rw, w);
    for (int i = 0; i < c * h * w; i++)
        ck_assert_msg(fabsf(img[i] - want[i]) <= tol, "%s: value %d is %.9g, want %.9g", path, i, img[i], want[i]);
    free(img);
}

static void expect_read_error(const char *path, FpStatus want, const char *what) {
    float *img = (float *)&img; // must come back NULL
    int c, h, w;
    FpError err = {0};
    FpStatus st = png_read(path, &img, &c, &h, &w, &err);
    ck_assert_msg(st == want, "%s: status %s (%s), want %s", what, fp_status_name(st), err.msg, fp_status_name(want));
    ck_assert_ptr_null(img);
    ck_assert_msg(strstr(err.msg, path) != NULL, "%s: message does not name the file: %s", what, err.msg);
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "%s: message is not one line: %s", what, err.msg);
}

// No "<name>.tmp.<pid>" file may be left in dir.
static void expect_no_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)))
        ck_assert_msg(strstr(e->d_name, ".tmp.") == NULL, "temporary file left behind: %s", e->d_name);
    closedir(d);
}

// ---------------------------------------------------------------------------------
// Round trips

START_TEST(gray_and_rgb_round_trip_exactly) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    RngStream s = rng_stream(5, RNG_TEST, 0, 0);
    for (int c = 1; c <= 3; c += 2) {
        const int h = 13, w = 29; // odd sizes: no row padding assumptions
        float *img = malloc(sizeof(float) * c * h * w);
        for (int i = 0; i < c * h * w; i++)
            img[i] = (float)rng_next_below(&s, 256) / 255.0f; // exactly representable in 8 bits
        snprintf(path, sizeof path, "%s/rt%d.png", dir, c);
        FpError err = {0};
        FpStatus st = c == 1 ? png_write_gray(path, img, h, w, &err) : png_write_rgb(path, img, h, w, &err);
        ck_assert_msg(st == FP_OK, "%s", err.msg);
        expect_image(path, c, h, w, img, 0.0f);
        free(img);
    }
    expect_no_temp_files(dir);
    remove_tree(dir);
}
END_TEST

START_TEST(writing_clamps_and_rounds) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/clamp.png", dir);
    // Out of range, NaN and infinities clamp; v*255 rounds half up.
    const float in[12] = {-0.5f, 1.5f, NAN, 0.5f, 1.0f / 510.0f, 0.999f, INFINITY, -INFINITY,
                          0.0f, 1.0f, 3.0f / 255.0f + 0.4f / 255.0f, 3.0f / 255.0f + 0.6f / 255.0f};
    const float want[12] = {0, 1, 0, 128.0f / 255, 1.0f / 255, 1, 1, 0, 0, 1, 3.0f / 255, 4.0f / 255};
    FpError err = {0};
    ck_assert_int_eq(png_write_gray(path, in, 3, 4, &err), FP_OK);
    expect_image(path, 1, 3, 4, want, 1e-7f);
    // Wrong channel count or size.
    ck_assert_int_eq(png_write(path, in, 2, 3, 2, &err), FP_EPARAM);
    ck_assert_int_eq(png_write(path, in, 1, 0, 4, &err), FP_EPARAM);
    remove_tree(dir);
}
END_TEST

// Every layout the reader must convert, written by libpng itself.
START_TEST(reads_every_colour_type_and_depth) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    const int w = 5, h = 3;
    float want[3 * 5 * 3];
    unsigned char buf[5 * 3 * 8];

    // 16-bit gray: full precision kept (v / 65535).
    for (int i = 0; i < w * h; i++) {
        unsigned v = (unsigned)(i * 4099 + 7) & 0xffff;
        buf[2 * i] = (unsigned char)(v >> 8), buf[2 * i + 1] = (unsigned char)v;
        want[i] = (float)v / 65535.0f;
    }
    snprintf(path, sizeof path, "%s/g16.png", dir);
    write_raw_png(path, w, h, 16, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, buf, (size_t)w * 2, NULL, 0, NULL, 0);
    expect_image(path, 1, h, w, want, 1e-7f);

    // 2-bit gray: 4 levels, v / 3; samples packed 4 per byte, most significant first.
    memset(buf, 0, sizeof buf);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned v = (unsigned)(x + y) % 4;
            buf[y * 2 + x / 4] |= (unsigned char)(v << (6 - 2 * (x % 4)));
            want[y * w + x] = (float)v / 3.0f;
        }
    snprintf(path, sizeof path, "%s/g2.png", dir);
    write_raw_png(path, w, h, 2, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, buf, 2, NULL, 0, NULL, 0);
    expect_image(path, 1, h, w, want, 1e-7f);

    // Palette with transparency: RGB from the palette, alpha dropped.
    const png_color pal[3] = {{255, 0, 0}, {0, 128, 255}, {10, 20, 30}};
    const unsigned char trans[3] = {0, 128, 255};
    for (int i = 0; i < w * h; i++) {
        buf[i] = (unsigned char)(i % 3);
        want[0 * w * h + i] = pal[i % 3].red / 255.0f;
        want[1 * w * h + i] = pal[i % 3].green / 255.0f;
        want[2 * w * h + i] = pal[i % 3].blue / 255.0f;
    }
    snprintf(path, sizeof path, "%s/pal.png", dir);
    write_raw_png(path, w, h, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, buf, (size_t)w, pal, 3, trans, 3);
    expect_image(path, 3, h, w, want, 1e-7f);

    // Gray + alpha: gray kept, alpha dropped.
    for (int i = 0; i < w * h; i++) {
        buf[2 * i] = (unsigned char)(i * 17), buf[2 * i + 1] = (unsigned char)(255 - i);
        want[i] = (float)(i * 17) / 255.0f;
    }
    snprintf(path, sizeof path, "%s/ga.png", dir);
    write_raw_png(path, w, h, 8, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_INTERLACE_NONE, buf, (size_t)w * 2, NULL, 0, NULL,
                  0);
    expect_image(path, 1, h, w, want, 1e-7f);

    // RGBA 8-bit, Adam7-interlaced: RGB kept, alpha dropped.
    for (int i = 0; i < w * h; i++)
        for (int k = 0; k < 4; k++) {
            buf[4 * i + k] = (unsigned char)(i * 13 + k * 61);
            if (k < 3)
                want[k * w * h + i] = (float)(unsigned char)(i * 13 + k * 61) / 255.0f;
        }
    snprintf(path, sizeof path, "%s/rgba.png", dir);
    write_raw_png(path, w, h, 8, PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_ADAM7, buf, (size_t)w * 4, NULL, 0, NULL, 0);
    expect_image(path, 3, h, w, want, 1e-7f);

    // RGB 16-bit.
    for (int i = 0; i < w * h; i++)
        for (int k = 0; k < 3; k++) {
            unsigned v = (unsigned)(i * 3001 + k * 20011) & 0xffff;
            buf[6 * i + 2 * k] = (unsigned char)(v >> 8), buf[6 * i + 2 * k + 1] = (unsigned char)v;
            want[k * w * h + i] = (float)v / 65535.0f;
        }
    snprintf(path, sizeof path, "%s/rgb16.png", dir);
    write_raw_png(path, w, h, 16, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, buf, (size_t)w * 6, NULL, 0, NULL, 0);
    expect_image(path, 3, h, w, want, 1e-7f);
    remove_tree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------
// Bad files

START_TEST(bad_files_are_format_errors_naming_the_file) {
    char dir[512], path[600], good[600];
    make_tmpdir(dir, sizeof dir);

    snprintf(path, sizeof path, "%s/missing.png", dir);
    expect_read_error(path, FP_EIO, "missing file");

    snprintf(path, sizeof path, "%s/text.png", dir);
    spit(path, "this is not a PNG file at all\n", 30);
    expect_read_error(path, FP_EFORMAT, "text file");

    snprintf(path, sizeof path, "%s/empty.png", dir);
    spit(path, "", 0);
    expect_read_error(path, FP_EFORMAT, "empty file");

    // A valid 24x24 RGB PNG of noise (so the image data spans many bytes), then cut.
    snprintf(good, sizeof good, "%s/good.png", dir);
    float img[3 * 24 * 24];
    RngStream s = rng_stream(6, RNG_TEST, 0, 0);
    for (int i = 0; i < 3 * 24 * 24; i++)
        img[i] = (float)rng_next_uniform(&s);
    FpError err = {0};
    ck_assert_int_eq(png_write_rgb(good, img, 24, 24, &err), FP_OK);
    size_t len;
    unsigned char *bytes = slurp(good, &len);
    ck_assert_uint_gt(len, 200);
    // Cuts: inside the signature, just after it, inside IHDR, in the middle of the
    // image data, just before the end, and without the last byte of IEND's CRC.
    const size_t cuts[] = {4, 8, 20, 33 + 10, len / 2, len - 13, len - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        snprintf(path, sizeof path, "%s/cut%zu.png", dir, k);
        spit(path, bytes, cuts[k]);
        char what[64];
        snprintf(what, sizeof what, "truncated at %zu of %zu bytes", cuts[k], len);
        expect_read_error(path, FP_EFORMAT, what);
    }

    // A flipped byte inside the image data: the chunk CRC (or zlib) must catch it.
    unsigned char *bad = malloc(len);
    memcpy(bad, bytes, len);
    bad[len / 2] ^= 0x5a;
    snprintf(path, sizeof path, "%s/flipped.png", dir);
    spit(path, bad, len);
    expect_read_error(path, FP_EFORMAT, "flipped byte");

    // An IHDR claiming 100000 x 24 pixels, with a correct CRC: refused before any
    // allocation of that size.
    memcpy(bad, bytes, len);
    const unsigned big = 100000;
    bad[16] = (unsigned char)(big >> 24), bad[17] = (unsigned char)(big >> 16);
    bad[18] = (unsigned char)(big >> 8), bad[19] = (unsigned char)big;
    unsigned long crc = crc32(0L, bad + 12, 17); // "IHDR" + 13 data bytes
    bad[29] = (unsigned char)(crc >> 24), bad[30] = (unsigned char)(crc >> 16);
    bad[31] = (unsigned char)(crc >> 8), bad[32] = (unsigned char)crc;
    snprintf(path, sizeof path, "%s/huge.png", dir);
    spit(path, bad, len);
    expect_read_error(path, FP_EFORMAT, "oversized header");

    // The intact file still reads.
    expect_image(good, 3, 24, 24, img, 0.5f / 255.0f + 1e-6f);
    free(bad);
    free(bytes);
    remove_tree(dir);
}
END_TEST

START_TEST(unwritable_destination_is_an_io_error) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/no/such/folder/x.png", dir);
    const float img[4] = {0, 0.25f, 0.5f, 1};
    FpError err = {0};
    ck_assert_int_eq(png_write_gray(path, img, 2, 2, &err), FP_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "x.png"));
    // A directory where the file should go: the rename fails, the temp file goes.
    snprintf(path, sizeof path, "%s/adir", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(png_write_gray(path, img, 2, 2, &err), FP_EIO);
    expect_no_temp_files(dir);
    remove_tree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------
// Grids

START_TEST(grid_tiles_scales_and_pads) {
    char dir[512], path[600];
    make_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/grid.png", dir);
    // 5 gray images of 3x2, each pixel (img i, y, x) = (10 i + 3 y + x) / 255.
    const int n = 5, h = 3, w = 2, cols = 2, pad = 1, scale = 2;
    float imgs[5 * 3 * 2];
    for (int i = 0; i < n; i++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                imgs[(i * h + y) * w + x] = (float)(10 * i + 3 * y + x) / 255.0f;
    FpError err = {0};
    ck_assert_int_eq(png_write_grid(path, imgs, n, 1, h, w, cols, pad, scale, &err), FP_OK);
    float *g = NULL;
    int gc, gh, gw;
    ck_assert_int_eq(png_read(path, &g, &gc, &gh, &gw, &err), FP_OK);
    const int rows = 3, tw = w * scale, th = h * scale;
    ck_assert_int_eq(gc, 1);
    ck_assert_int_eq(gw, cols * tw + (cols + 1) * pad); // 11
    ck_assert_int_eq(gh, rows * th + (rows + 1) * pad); // 22
    for (int y = 0; y < gh; y++)
        for (int x = 0; x < gw; x++) {
            int tx = (x - pad) % (tw + pad), ty = (y - pad) % (th + pad);
            int col = (x - pad) / (tw + pad), row = (y - pad) / (th + pad);
            int i = row * cols + col;
            float want = 1.0f; // padding and the empty sixth slot are white
            if (x >= pad && y >= pad && tx < tw && ty < th && i < n)
                want = imgs[(i * h + ty / scale) * w + tx / scale];
            ck_assert_msg(fabsf(g[y * gw + x] - want) < 1e-6f, "grid (%d,%d) is %g, want %g", y, x, g[y * gw + x],
                          want);
        }
    free(g);

    // RGB grid: one row, no padding, scale 1 is the images side by side.
    float rgb[2 * 3 * 2 * 2];
    for (int i = 0; i < 24; i++)
        rgb[i] = (float)i / 255.0f;
    ck_assert_int_eq(png_write_grid(path, rgb, 2, 3, 2, 2, 4, 0, 1, &err), FP_OK);
    ck_assert_int_eq(png_read(path, &g, &gc, &gh, &gw, &err), FP_OK);
    ck_assert_int_eq(gc, 3);
    ck_assert_int_eq(gh, 2);
    ck_assert_int_eq(gw, 4); // cols clipped to n
    for (int k = 0; k < 3; k++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 4; x++)
                ck_assert_float_eq_tol(g[(k * 2 + y) * 4 + x], rgb[((x / 2) * 3 + k) * 4 + y * 2 + x % 2], 1e-6f);
    free(g);

    // Bad arguments.
    ck_assert_int_eq(png_write_grid(path, imgs, 0, 1, h, w, 2, 1, 1, &err), FP_EPARAM);
    ck_assert_int_eq(png_write_grid(path, imgs, n, 1, h, w, 0, 1, 1, &err), FP_EPARAM);
    ck_assert_int_eq(png_write_grid(path, imgs, n, 1, h, w, 2, -1, 1, &err), FP_EPARAM);
    ck_assert_int_eq(png_write_grid(path, imgs, n, 1, h, w, 2, 1, 0, &err), FP_EPARAM);
    ck_assert_int_eq(png_write_grid(path, imgs, n, 2, h, w, 2, 1, 1, &err), FP_EPARAM);
    ck_assert_int_eq(png_write_grid(path, imgs, n, 1, h, w, 2, 1, 100000, &err), FP_EPARAM);
    expect_no_temp_files(dir);
    remove_tree(dir);
}
END_TEST

Suite *suite_png(void) {
    Suite *s = suite_create("png");
    TCase *tc = tcase_create("png");
    tcase_add_test(tc, gray_and_rgb_round_trip_exactly);
    tcase_add_test(tc, writing_clamps_and_rounds);
    tcase_add_test(tc, reads_every_colour_type_and_depth);
    tcase_add_test(tc, bad_files_are_format_errors_naming_the_file);
    tcase_add_test(tc, unwritable_destination_is_an_io_error);
    tcase_add_test(tc, grid_tiles_scales_and_pads);
    suite_add_tcase(s, tc);
    return s;
}
