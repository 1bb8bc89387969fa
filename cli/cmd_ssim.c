// `fedpriv ssim A.png B.png [--json]`: SSIM, PSNR and MSE of two PNG images, with the
// same code that scores gradient-inversion reconstructions (eval/image_metrics.h).
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/json_number.h"
#include "eval/image_metrics.h"
#include "eval/png.h"

static int print_json(const char *a, const char *b, int c, int h, int w, const ImageMetrics *m) {
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return 0;
    cJSON_AddStringToObject(o, "a", a);
    cJSON_AddStringToObject(o, "b", b);
    cJSON_AddNumberToObject(o, "channels", c);
    cJSON_AddNumberToObject(o, "height", h);
    cJSON_AddNumberToObject(o, "width", w);
    cJSON_AddNumberToObject(o, "ssim", m->ssim);
    jnum_add(o, "psnr", m->psnr); // +inf for identical images
    cJSON_AddNumberToObject(o, "mse", m->mse);
    char *text = jnum_print(o, 0);
    cJSON_Delete(o);
    if (!text)
        return 0;
    printf("%s\n", text);
    cJSON_free(text);
    return 1;
}

int cmd_ssim(int argc, char **argv) {
    const char *paths[2] = {NULL, NULL};
    int npaths = 0, json = 0;
    const CliOption opts[] = {
        {"--json", NULL, CLI_FLAG, &json, .help = "one JSON object instead of text (psnr is null for identical images)"},
    };
    const CliCommand cmd = {
        .cmd = "ssim",
        .synopsis = "fedpriv ssim A.png B.png [--json]",
        .about = "  Prints SSIM (Wang 2004: 11x11 Gaussian window, sigma 1.5, K1 0.01, K2 0.03, data range 1,\n"
                 "  valid positions only, mean over channels), PSNR (dB) and MSE of two images of the same size,\n"
                 "  with pixel values scaled to [0,1]. Images must be at least 11x11; gray and RGB PNGs of any\n"
                 "  depth are read (alpha is ignored).",
        .opts = opts,
        .n_opts = CLI_OPTIONS_COUNT(opts),
        .positional = paths,
        .max_positional = 2,
        .n_positional = &npaths,
        .positional_names = "two images A.png B.png",
    };
    int prc = cli_options_parse(&cmd, argc, argv);
    if (prc != CLI_PARSED)
        return prc;
    if (npaths != 2) {
        cli_options_usage(&cmd, stderr);
        return CLI_EXIT_BADINPUT;
    }

    FpError err = {0};
    float *img[2] = {NULL, NULL};
    int c[2], h[2], w[2];
    int rc = CLI_EXIT_OK;
    for (int k = 0; k < 2 && rc == CLI_EXIT_OK; k++) {
        if (png_read(paths[k], &img[k], &c[k], &h[k], &w[k], &err) != FP_OK)
            rc = cli_report_error("ssim", &err);
        else if (h[k] < IMAGE_SSIM_WINDOW || w[k] < IMAGE_SSIM_WINDOW) {
            fp_print_line(stderr, "fedpriv ssim: %s: image is %dx%d; SSIM needs at least %dx%d", paths[k], h[k], w[k],
                    IMAGE_SSIM_WINDOW, IMAGE_SSIM_WINDOW);
            rc = CLI_EXIT_BADINPUT;
        }
    }
    if (rc == CLI_EXIT_OK && (c[0] != c[1] || h[0] != h[1] || w[0] != w[1])) {
        fp_print_line(stderr, "fedpriv ssim: %s: size %dx%dx%d (channels x height x width) differs from %s (%dx%dx%d)",
                paths[1], c[1], h[1], w[1], paths[0], c[0], h[0], w[0]);
        rc = CLI_EXIT_BADINPUT;
    }
    ImageMetrics m;
    if (rc == CLI_EXIT_OK && image_metrics(img[0], img[1], c[0], h[0], w[0], &m, &err) != FP_OK)
        rc = cli_report_error("ssim", &err);
    if (rc == CLI_EXIT_OK) {
        if (json) {
            if (!print_json(paths[0], paths[1], c[0], h[0], w[0], &m)) {
                fp_print_line(stderr, "fedpriv ssim: out of memory writing JSON");
                rc = CLI_EXIT_FAIL;
            }
        } else if (isfinite(m.psnr))
            printf("ssim %.6f  psnr %.4f dB  mse %.6g  (%dx%dx%d)\n", m.ssim, m.psnr, m.mse, c[0], h[0], w[0]);
        else
            printf("ssim %.6f  psnr inf dB  mse 0  (%dx%dx%d)\n", m.ssim, c[0], h[0], w[0]);
    }
    free(img[0]);
    free(img[1]);
    return rc;
}
