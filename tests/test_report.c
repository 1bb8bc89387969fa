// The HTML report (reports/html.h, reports/svg.h): escaping, a report of a stand-in run
// (matrix, privacy, plots, inlined reconstructions; a defense named
// <script>alert(1)</script> shown as text; a diverged cell shown as such), artifact
// paths that try to leave the run folder, bad run folders; and, when FEDPRIV_BIN is set
// (make test), `fedpriv report` opened in headless Chromium (tests/browser/), which
// fails on console errors or undecodable images and keeps a screenshot in
// build/test-report/report.png.
#include <check.h>
#include <strings.h>
#include <sys/wait.h>

#include "matrix_standins.h"
#include "reports/html.h"
#include "reports/summary.h"
#include "reports/svg.h"

#define TEST_DIR "build/test-report"
#define CSV TEST_DIR "/blobs.csv"
#define RUN TEST_DIR "/run"

static char *escaped(const char *s) {
    HtmlBuf b;
    hb_init(&b);
    hb_escape(&b, s);
    ck_assert(!b.oom);
    char *out = strdup(b.s ? b.s : "");
    hb_free(&b);
    return out;
}

START_TEST(escaping) {
    char *e = escaped("<script>alert(1)</script>");
    ck_assert_str_eq(e, "&lt;script&gt;alert(1)&lt;/script&gt;");
    free(e);
    e = escaped("a&b \"q\" 'p' ε=0.5\ttab");
    ck_assert_str_eq(e, "a&amp;b &quot;q&quot; &#39;p&#39; ε=0.5\ttab");
    free(e);
    // Invalid UTF-8 (a lone continuation byte, a truncated sequence, an overlong '<')
    // and control characters become U+FFFD: nothing can smuggle markup through.
    e = escaped("x\x80y\xE2\x82z\xC0\xBCw\x01v\x7F");
    ck_assert_str_eq(e, "x\xEF\xBF\xBDy\xEF\xBF\xBD\xEF\xBF\xBDz\xEF\xBF\xBD\xEF\xBF\xBDw\xEF\xBF\xBDv\xEF\xBF\xBD");
    free(e);
    e = escaped(NULL);
    ck_assert_str_eq(e, "");
    free(e);
}
END_TEST

START_TEST(svg_plots) {
    double x[] = {0, 0.001, 0.01, NAN, 0.5, 1}, y[] = {0, 0.1, 0.2, 0.3, 0.7, 1};
    SvgSeries s[2] = {{.label = "a<b", .x = x, .y = y, .n = 6}, {.label = "c", .x = x, .y = y, .n = 2}};
    SvgPlot p = {.title = "ROC \"x\"", .xlabel = "fpr", .ylabel = "tpr", .log_x = 1, .xmin = 1e-3, .xmax = 1,
                 .ymin = 0, .ymax = 1, .diagonal = 1};
    HtmlBuf b;
    hb_init(&b);
    svg_line_plot(&b, &p, s, 2);
    svg_legend(&b, s, 2);
    ck_assert(!b.oom);
    ck_assert_ptr_nonnull(strstr(b.s, "aria-label=\"ROC &quot;x&quot;\""));
    ck_assert_ptr_nonnull(strstr(b.s, "<title>a&lt;b</title>"));
    ck_assert_ptr_null(strstr(b.s, "a<b"));
    ck_assert_ptr_null(strstr(b.s, "nan"));
    ck_assert_ptr_null(strstr(b.s, "inf"));
    // The NaN point splits series 0 in two lines; series 1 adds one, and the chance
    // diagonal two (a white halo under the dashed line, drawn on top of the curves).
    int lines = 0;
    for (const char *q = b.s; (q = strstr(q, "<polyline")); q++)
        lines++;
    ck_assert_int_eq(lines, 5);
    ck_assert_ptr_nonnull(strstr(strstr(b.s, "<title>c</title>"), "chance (a random guess)"));
    ck_assert_ptr_nonnull(strstr(b.s, ">0.001</text>"));
    hb_free(&b);
    // An empty range draws a placeholder, not a broken plot.
    SvgPlot bad = {.title = "empty", .xmin = 1, .xmax = 1, .ymin = 0, .ymax = 1};
    hb_init(&b);
    svg_line_plot(&b, &bad, s, 1);
    ck_assert_ptr_nonnull(strstr(b.s, "no data"));
    hb_free(&b);
}
END_TEST

// A stand-in run with every kind of row: no defense, two ε, a diverging defense and a
// defense whose name is markup.
static void make_run(void) {
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
    standin_rm(RUN);
    cJSON *root = standin_matrix(CSV,
                                 "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": [0.5, 2]},"
                                 " {\"name\": \"explode\"}, {\"name\": \"" "<script>alert(1)<\\/script>" "\"}]",
                                 "[{\"name\": \"probe\"}]");
    ck_assert_ptr_nonnull(root);
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, RUN, 2, &s, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(s.done, 4);
    ck_assert_int_eq(s.diverged, 1);
    cJSON_Delete(root);
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_int_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *q = s; (q = strstr(q, what)); q++)
        n++;
    return n;
}

START_TEST(report_of_a_run) {
    make_run();
    FpError err = {0};
    int problems = -1;
    ck_assert_msg(report_write_html(RUN, TEST_DIR "/report-unit.html", NULL, &problems, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(problems, 0);
    char *html = read_all(TEST_DIR "/report-unit.html");
    // The markup name is text, and nothing in the page is a script.
    ck_assert_ptr_nonnull(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    ck_assert_ptr_null(strcasestr(html, "<script"));
    ck_assert_ptr_nonnull(strstr(html, "Content-Security-Policy"));
    // Self-contained: images inlined, nothing fetched.
    ck_assert_ptr_null(strstr(html, "src=\"http"));
    ck_assert_ptr_null(strstr(html, "href=\"http"));
    ck_assert_int_eq(count(html, "src=\"data:image/png;base64,iVBORw0KGgo"), 4 * 3); // 4 cells x original, step, final
    // privacy-utility (accuracy, probe's SSIM and TPR at 1% FPR), accuracy per round, one ROC
    ck_assert_int_eq(count(html, "<svg xmlns"), 5);
    // The diverged row says so in the model and attack columns.
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"st-diverged\""));
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"st-skipped\""));
    ck_assert_ptr_nonnull(strstr(html, "noise ε=0.5"));
    ck_assert_ptr_nonnull(strstr(html, "Nominal ε (total)"));
    ck_assert_ptr_nonnull(strstr(html, "Sound ε (total)"));
    // The guarantee states: the stand-in is proven up to ε = 1, conditional above it (with
    // its assumption and the bound beside ∞); none claims nothing.
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"g-proven\">proven</span></td>"));
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"g-conditional\">conditional</span><br><small>if:</small>"
                                       "<ul class=\"why\"><li>stand-in: above epsilon 1 the bound is assumed</li>"));
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"g-none\">none</span><br><small>because:</small>"));
    ck_assert_ptr_nonnull(strstr(html, "∞<br><small>12 if</small>"));
    ck_assert_ptr_nonnull(strstr(html, "stand-in matrix"));
    free(html);
}
END_TEST

// Rewrites one attack result of the first cell file so its images point elsewhere.
// Returns that attack's artifact folder (static storage).
static const char *tamper(const char *original, const char *reconstruction) {
    static char adir[600];
    MatrixResults r;
    FpError err = {0};
    ck_assert_int_eq(matrix_results_load(RUN, &r, &err), FP_OK);
    const char *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.index,
                                                                                                     "cells"), 0),
                                                      "id")->valuestring;
    char path[512];
    snprintf(path, sizeof path, RUN "/cells/%s.json", id);
    cJSON *cell = cJSON_Duplicate(r.cells[0], 1);
    cJSON *im = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                       cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(
                                                                            cJSON_GetObjectItemCaseSensitive(cell, "attacks"), 0),
                                                                        "result"),
                                       "images"),
                                   0);
    cJSON_ReplaceItemInObjectCaseSensitive(im, "original_png", cJSON_CreateString(original));
    cJSON_ReplaceItemInObjectCaseSensitive(im, "reconstruction_png", cJSON_CreateString(reconstruction));
    ck_assert_int_eq(jv_write_file_atomic(path, cell, &err), FP_OK);
    snprintf(adir, sizeof adir, RUN "/%s",
             cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cell, "attacks"), 0),
                                              "dir")->valuestring);
    cJSON_Delete(cell);
    matrix_results_free(&r);
    return adir;
}

// A cell's attack entry that does not apply (it recovers nothing without any defense) shows
// "not applicable", never its number; one that counts recovered images shows the count.
// Control: the same run before the change has no such cell.
START_TEST(not_applicable_is_no_number) {
    make_run();
    FpError err = {0};
    int problems = -1;
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-na0.html", NULL, &problems, &err), FP_OK);
    char *html = read_all(TEST_DIR "/report-na0.html");
    ck_assert_int_eq(count(html, "class=\"st-n/a\""), 0);
    free(html);
    MatrixResults r;
    ck_assert_int_eq(matrix_results_load(RUN, &r, &err), FP_OK);
    const cJSON *cells = cJSON_GetObjectItemCaseSensitive(r.index, "cells");
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, RUN "/cells/%s.json",
                 cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cells, i), "id")->valuestring);
        cJSON *cell = cJSON_Duplicate(r.cells[i], 1);
        cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cell, "attacks"), 0);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(a, "status")->valuestring, "done");
        cJSON *res = cJSON_GetObjectItemCaseSensitive(a, "result");
        ck_assert(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(res, "images")));
        cJSON_AddBoolToObject(a, "applicable", i == 1 ? 0 : 1); // as the matrix writes it
        ck_assert_int_eq(jv_write_file_atomic(path, cell, &err), FP_OK);
        cJSON_Delete(cell);
    }
    matrix_results_free(&r);
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-na.html", NULL, &problems, &err), FP_OK);
    html = read_all(TEST_DIR "/report-na.html");
    // One cell says n/a, with no number in its place (a figure there would read as protection).
    ck_assert_int_eq(count(html, "class=\"st-n/a\""), 1);
    const char *na = strstr(html, "class=\"st-n/a\"");
    const char *end = strstr(na, "</span>");
    ck_assert_ptr_nonnull(end);
    for (const char *q = strchr(na, '>') + 1; q < end; q++)
        ck_assert_msg(!(*q >= '0' && *q <= '9'), "a number in the not-applicable cell: %.*s", (int)(end - na), na);
    free(html);
}
END_TEST

static void write_bytes(const char *dir, const char *name, const void *data, size_t n) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

START_TEST(artifacts_stay_inside_the_run) {
    make_run();
    const char *adir = tamper("../../../../etc/passwd", "/etc/passwd");
    write_bytes(adir, "fake.png", "not a png", 9);
    FpError err = {0};
    int problems = 0;
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-tampered.html", NULL, &problems, &err), FP_OK);
    ck_assert_int_eq(problems, 2);
    char *html = read_all(TEST_DIR "/report-tampered.html");
    ck_assert_int_eq(count(html, "<span class=\"missing\">bad path</span>"), 2);
    ck_assert_ptr_nonnull(strstr(html, "is not a plain relative path inside the run folder"));
    ck_assert_ptr_null(strstr(html, "root:"));
    free(html);
    tamper("missing.png", "fake.png"); // inside the run, but missing or no PNG
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-tampered.html", NULL, &problems, &err), FP_OK);
    ck_assert_int_eq(problems, 2);
    html = read_all(TEST_DIR "/report-tampered.html");
    ck_assert_int_eq(count(html, "<span class=\"missing\">"), 2);
    ck_assert_ptr_nonnull(strstr(html, "no such file"));
    ck_assert_ptr_nonnull(strstr(html, "not a PNG file"));
    free(html);
    // A PNG header that asks for 100000 x 100000 pixels is refused before decoding.
    static const unsigned char big[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                        0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0, 8, 0, 0, 0, 0, 0, 0, 0, 0};
    write_bytes(adir, "big.png", big, sizeof big);
    tamper("big.png", "big.png");
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-tampered.html", NULL, &problems, &err), FP_OK);
    ck_assert_int_eq(problems, 2);
    html = read_all(TEST_DIR "/report-tampered.html");
    ck_assert_ptr_nonnull(strstr(html, "larger than 4096 pixels on a side"));
    free(html);
}
END_TEST

// Links are not followed out of the run folder (docs/security.md, hostile input 1): a
// reconstruction named "link.png" that is a symbolic link to a PNG outside the run, and
// one behind a linked folder, are listed as problems, not inlined (before: inlined as
// base64, while "../" and absolute paths were already refused). A cell file that is a
// link is refused as well.
START_TEST(artifact_links_not_followed) {
    make_run();
    const float px[16] = {0, 1, 0, 1, 1, 0, 1, 0, 0.5f, 0.5f, 0.5f, 0.5f, 0.25f, 0.75f, 0.25f, 0.75f};
    FpError err = {0};
    ck_assert(standin_mkdirs(TEST_DIR "/outside"));
    ck_assert_int_eq(png_write_gray(TEST_DIR "/outside/secret.png", px, 4, 4, &err), FP_OK);
    const char *adir = tamper("link.png", "linkdir/secret.png");
    char target[600], link[700];
    ck_assert_ptr_nonnull(realpath(TEST_DIR "/outside", target));
    snprintf(link, sizeof link, "%s/linkdir", adir);
    unlink(link);
    ck_assert_int_eq(symlink(target, link), 0);
    strcat(target, "/secret.png");
    snprintf(link, sizeof link, "%s/link.png", adir);
    unlink(link);
    ck_assert_int_eq(symlink(target, link), 0);
    int problems = 0;
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-links.html", NULL, &problems, &err), FP_OK);
    ck_assert_int_eq(problems, 2);
    char *html = read_all(TEST_DIR "/report-links.html");
    ck_assert_int_eq(count(html, "is a symbolic link or not a folder"), 2);
    ck_assert_int_eq(count(html, "<span class=\"missing\">image missing</span>"), 2);
    free(html);
    // The control: the same file copied into the run folder is inlined.
    ck_assert_int_eq(unlink(link), 0);
    ck_assert_int_eq(png_write_gray(link, px, 4, 4, &err), FP_OK);
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-links.html", NULL, &problems, &err), FP_OK);
    ck_assert_int_eq(problems, 1);
    // A cell file that is a link: refused, naming it.
    MatrixResults r;
    ck_assert_int_eq(matrix_results_load(RUN, &r, &err), FP_OK);
    const char *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.index,
                                                                                                     "cells"), 0),
                                                      "id")->valuestring;
    char cell[600], moved[600];
    snprintf(cell, sizeof cell, RUN "/cells/%s.json", id);
    snprintf(moved, sizeof moved, TEST_DIR "/outside/%s.json", id);
    matrix_results_free(&r);
    ck_assert_int_eq(rename(cell, moved), 0);
    ck_assert_ptr_nonnull(realpath(moved, target));
    ck_assert_int_eq(symlink(target, cell), 0);
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-links.html", NULL, &problems, &err), FP_EFORMAT);
    ck_assert_msg(strstr(err.msg, ".json: \"") && strstr(err.msg, "is a symbolic link"), "%s", err.msg);
    ck_assert_int_eq(unlink(cell), 0);
    ck_assert_int_eq(rename(moved, cell), 0);
}
END_TEST

START_TEST(bad_run_folders) {
    ck_assert(standin_mkdirs(TEST_DIR "/bad-run/cells"));
    FpError err = {0};
    ck_assert_int_eq(report_write_html(TEST_DIR "/no-such-run", TEST_DIR "/x.html", NULL, NULL, &err), FP_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "results.json"));
    static const char *const bad[] = {
        "{\"cells\": [",
        "{\"cells\": 3}",
        "{\"cells\": [{\"id\": \"../../x\", \"status\": \"done\", \"spec_hash\": \"1\"}]}",
        "{\"cells\": [{\"id\": \"a\", \"status\": \"finished\", \"spec_hash\": \"1\"}]}",
    };
    for (int i = 0; i < 4; i++) {
        FILE *f = fopen(TEST_DIR "/bad-run/results.json", "w");
        fputs(bad[i], f);
        fclose(f);
        ck_assert_int_eq(report_write_html(TEST_DIR "/bad-run", TEST_DIR "/x.html", NULL, NULL, &err), FP_EFORMAT);
    }
    // A cell file that is not a cell.
    FILE *f = fopen(TEST_DIR "/bad-run/results.json", "w");
    fputs("{\"cells\": [{\"id\": \"a\", \"status\": \"done\", \"spec_hash\": \"1\"}]}", f);
    fclose(f);
    f = fopen(TEST_DIR "/bad-run/cells/a.json", "w");
    fputs("[1, 2]", f);
    fclose(f);
    ck_assert_int_eq(report_write_html(TEST_DIR "/bad-run", TEST_DIR "/x.html", NULL, NULL, &err), FP_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "a.json"));
}
END_TEST

// ---- plots, statistics, scales ------------------------------------------------------------

START_TEST(svg_axes_markers_and_bands) {
    // Series are told apart without colour: (dash, marker) pairs differ for 28 styles.
    for (int i = 0; i < 28; i++)
        for (int j = 0; j < i; j++)
            ck_assert_msg(svg_marker_shape(i) != svg_marker_shape(j) || strcmp(svg_dash(i), svg_dash(j)) != 0,
                          "styles %d and %d look the same without colour", i, j);
    // A log-log ROC: decades on both axes, the diagonal on top of the curve.
    double fx[] = {0, 0.001, 0.01, 0.1, 1}, fy[] = {0, 0.05, 0.1, 0.4, 1};
    SvgSeries roc = {.label = "r", .x = fx, .y = fy, .n = 5, .style = 3};
    SvgPlot rp = {.title = "roc", .log_x = 1, .log_y = 1, .xmin = 1e-3, .xmax = 1, .ymin = 1e-3, .ymax = 1, .diagonal = 1};
    HtmlBuf b;
    hb_init(&b);
    svg_line_plot(&b, &rp, &roc, 1);
    ck_assert(!b.oom);
    ck_assert_int_eq(count(b.s, ">0.001</text>"), 2); // both axes
    ck_assert_int_eq(count(b.s, ">0.1</text>"), 2);
    ck_assert_ptr_nonnull(strstr(b.s, "<path d=\"M")); // style 3: diamond markers
    ck_assert(strstr(b.s, "chance (a random guess)") > strstr(b.s, "<title>r</title>"));
    hb_free(&b);
    // A privacy-utility plot: a point at ε = ∞ sits in the band, error bars, an open
    // marker, reference lines.
    double x[] = {0.5, 2, INFINITY}, y[] = {0.3, 0.6, 0.8}, lo[] = {0.2, 0.5, NAN}, hi[] = {0.4, 0.7, NAN};
    unsigned char hollow[] = {0, 1, 0};
    SvgSeries t = {.label = "f", .x = x, .y = y, .n = 3, .style = 0, .ylo = lo, .yhi = hi, .hollow = hollow};
    SvgPlot tp = {.title = "t", .log_x = 1, .xmin = 0.1, .xmax = 10, .ymin = 0, .ymax = 1, .inf_band = 1, .n_refs = 2,
                  .refs = {{.y = 0.1, .label = "chance"}, {.y = 0.9, .label = "no defense"}}};
    hb_init(&b);
    svg_line_plot(&b, &tp, &t, 1);
    ck_assert(!b.oom);
    ck_assert_ptr_nonnull(strstr(b.s, ">∞</text>"));
    ck_assert_int_eq(count(b.s, "<circle"), 3);          // all three points, the ∞ one included
    ck_assert_int_eq(count(b.s, "fill=\"#fff\""), 1);    // the open marker
    ck_assert_int_eq(count(b.s, "stroke-width=\"1.2\""), 2); // two error bars (the ∞ point has none)
    ck_assert_ptr_nonnull(strstr(b.s, ">chance</text>"));
    ck_assert_ptr_nonnull(strstr(b.s, ">no defense</text>"));
    ck_assert_ptr_null(strstr(b.s, "inf"));
    ck_assert_ptr_null(strstr(b.s, "nan"));
    // The line joins the finite points only: one segment, not one to the band.
    const char *pl = strstr(b.s, "<polyline");
    ck_assert_ptr_nonnull(pl);
    ck_assert_ptr_null(strstr(pl + 1, "<polyline"));
    hb_free(&b);
}
END_TEST

// t_{0.975, df} against scipy.stats.t.ppf(0.975, df); the mean and interval of three seeds
// against numpy/scipy (mean 0.8, half-width 0.049682754).
START_TEST(seed_statistics) {
    static const struct {
        int df;
        double t;
    } ref[] = {{1, 12.706204736}, {2, 4.302652730}, {5, 2.570581837}, {30, 2.042272456},
               {31, 2.039513446}, {40, 2.021075383}, {100, 1.983971518}, {1000, 1.962339081}};
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++)
        ck_assert_msg(fabs(student_t975(ref[i].df) - ref[i].t) < 2e-4, "df %d: %.6f, want %.6f", ref[i].df,
                      student_t975(ref[i].df), ref[i].t);
    double v[] = {0.8, 0.82, NAN, 0.78};
    SeedStat st;
    seed_stat(v, 4, &st);
    ck_assert_int_eq(st.n, 3);
    ck_assert_int_eq(st.missing, 1);
    ck_assert_double_eq_tol(st.mean, 0.8, 1e-12);
    ck_assert_double_eq_tol((st.ci_high - st.ci_low) / 2, 0.049682754, 2e-5);
    // The control: an interval with the normal quantile (1.96) would be 0.0226 wide each
    // side: the check tells the two apart.
    ck_assert(fabs((st.ci_high - st.ci_low) / 2 - 1.96 * 0.02 / sqrt(3)) > 0.02);
    double one[] = {0.7};
    seed_stat(one, 1, &st);
    ck_assert(st.n == 1 && st.mean == 0.7 && isnan(st.ci_low) && isnan(st.ci_high));
    double inf[] = {1, INFINITY};
    seed_stat(inf, 2, &st);
    ck_assert(isinf(st.mean) && isnan(st.ci_low));
    double none[] = {NAN, NAN};
    seed_stat(none, 2, &st);
    ck_assert(st.n == 0 && isnan(st.mean) && st.missing == 2);
}
END_TEST

START_TEST(metric_scales_are_anchored) {
    const MetricScale *auc = metric_scale("auc"), *ssim = metric_scale("ssim_mean"), *tpr = metric_scale("tpr_at_fpr.0.01");
    ck_assert(auc && ssim && tpr);
    ck_assert_double_eq(metric_leak(auc, 0.5), 0);
    ck_assert_double_eq_tol(metric_leak(auc, 0.75), 0.5, 1e-12);
    ck_assert_double_eq(metric_leak(auc, 1), 1);
    ck_assert_double_eq(metric_leak(auc, 0.4), 0); // below chance is no leak, not a negative one
    ck_assert_double_eq(metric_leak(ssim, -0.01), 0);
    ck_assert_double_eq_tol(metric_leak(ssim, 0.3), 0.3, 1e-12);
    ck_assert_double_eq(metric_leak(tpr, 0.01), 0);
    ck_assert_ptr_null(metric_scale("window_mse_final"));
    ck_assert(isnan(metric_leak(NULL, 0.7)));
}
END_TEST

// ---- a hand-written run: every warning, and a control without any ---------------------------

#define SYN TEST_DIR "/synthetic"

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s", path);
    fputs(text, f);
    fclose(f);
}

// One cell of the synthetic run: its file, and its index entry appended to idx.
static void syn_cell(char *idx, size_t n, const char *id, int setting, int seed, const char *defense, double eps,
                     const char *privacy, const char *resolved, double acc, const char *rounds, double ssim, double auc) {
    char path[512], text[4096];
    snprintf(path, sizeof path, SYN "/cells/%s.json", id);
    snprintf(text, sizeof text,
             "{\"cell\": \"%s\", \"status\": \"done\", \"spec_hash\": \"h-%s\", \"defense\": \"%s\", \"seed\": %d,"
             " \"model\": {\"test_accuracy\": %.17g, \"test_loss\": 1, \"rounds\": %s},"
             " \"privacy\": %s, \"defense_resolved\": %s,"
             " \"attacks\": [{\"name\": \"probe\", \"index\": 0, \"status\": \"done\", \"value\": %.17g,"
             "   \"result\": {\"ssim_mean\": %.17g, \"threat_model\": \"gradient\"}},"
             "  {\"name\": \"blind\", \"index\": 1, \"status\": \"done\", \"value\": %.17g, \"result\": {\"auc\": %.17g}}]}",
             id, id, defense, seed, acc, rounds, privacy, resolved, ssim, ssim, auc, auc);
    write_text(path, text);
    size_t k = strlen(idx);
    snprintf(idx + k, n - k,
             "%s{\"id\": \"%s\", \"label\": \"%s%s\", \"defense\": \"%s\", \"epsilon\": %s, \"params\": {},"
             " \"setting\": %d, \"seed\": %d, \"status\": \"done\", \"spec_hash\": \"h-%s\"}",
             idx[0] ? ", " : "", id, defense, isnan(eps) ? "" : eps == 1 ? " ε=1" : " ε=?", defense,
             isnan(eps) ? "null" : "1", setting, seed, id);
}

// A run of three settings × two seeds. clean = 0: the values that must raise each warning;
// 1: the same run without any reason to warn; 2: as 1, but spm's accuracy is 4 points above
// chance (6% of the way to the baseline's 0.81).
static void write_synthetic(int clean) {
    standin_rm(SYN);
    ck_assert(standin_mkdirs(SYN "/cells"));
    static char idx[16384];
    idx[0] = 0;
    const char *rounds_low = "[{\"round\": 1, \"participants\": 2, \"test_accuracy\": 0.09},"
                             " {\"round\": 2, \"participants\": 2, \"test_accuracy\": 0.1}]";
    const char *rounds_ok = "[{\"round\": 1, \"participants\": 2, \"test_accuracy\": 0.5},"
                            " {\"round\": 2, \"participants\": 2, \"test_accuracy\": 0.8}]";
    const char *p_none = "{\"unit\": \"none\", \"nominal\": {\"epsilon_total\": \"inf\", \"notion\": \"no privacy claimed\"},"
                         " \"sound\": {\"epsilon_total\": \"inf\", \"delta\": 0, \"notion\": \"no guarantee\"},"
                         " \"guarantee\": \"none\", \"assumptions\": []}";
    const char *p_ldp = "{\"unit\": \"scalar\", \"nominal\": {\"epsilon_total\": 2, \"notion\": \"LDP per scalar\"},"
                        " \"sound\": {\"epsilon_total\": \"inf\", \"delta\": 0, \"notion\": \"none\"},"
                        " \"guarantee\": \"none\", \"assumptions\": [\"signs only\"]}";
    const char *p_cdp = clean ? p_ldp
                              : "{\"unit\": \"client\", \"nominal\": {\"epsilon_total\": 1, \"notion\": \"client-level\"},"
                                " \"sound\": {\"epsilon_total\": 1, \"delta\": 1e-5, \"notion\": \"RDP\"},"
                                " \"guarantee\": \"proven\", \"assumptions\": [], \"sigma\": 2}";
    const char *noise = clean ? "{\"noise\": \"client\"}" : "{\"noise\": \"server\"}";
    for (int s = 0; s < 2; s++) {
        char id[64];
        snprintf(id, sizeof id, "none-s%d", s + 1);
        syn_cell(idx, sizeof idx, id, 0, s + 1, "none", NAN, p_none, "{}", s ? 0.82 : 0.8, rounds_ok, 1,
                 clean ? 0.9 : 0.5 + 0.01 * s);
        snprintf(id, sizeof id, "spm-s%d", s + 1);
        syn_cell(idx, sizeof idx, id, 1, s + 1, "spm", 1, p_ldp, "{}",
                 clean == 2 ? 0.14 + 0.005 * s : clean ? 0.7 : 0.1 + 0.005 * s, clean == 1 ? rounds_ok : rounds_low,
                 0.01, 0.5);
        snprintf(id, sizeof id, "dpf-s%d", s + 1);
        syn_cell(idx, sizeof idx, id, 2, s + 1, "dpf", 1, p_cdp, noise, 0.5, rounds_ok, 0.9, 0.6);
    }
    char *text = malloc(strlen(idx) + 2048);
    sprintf(text,
            "{\"kind\": \"fedpriv-matrix\", \"description\": \"synthetic\", \"seeds\": [1, 2],"
            " \"dataset\": {\"name\": \"x\", \"classes\": 10, \"chance_accuracy\": 0.1},"
            " \"model\": {\"name\": \"mlp\"}, \"federation\": {\"clients\": 2, \"sample_rate\": 1, \"rounds\": 2},"
            " \"attacks\": [{\"name\": \"probe\", \"label\": \"probe\", \"headline\": \"ssim_mean\", \"higher_leaks\": true},"
            "  {\"name\": \"blind\", \"label\": \"blind\", \"headline\": \"auc\", \"higher_leaks\": true}],"
            " \"cells\": [%s]}",
            idx);
    write_text(SYN "/results.json", text);
    free(text);
}

static int has_warning(const RunSummary *S, const char *kind, const char *setting, const char *attack) {
    for (int i = 0; i < S->n_warnings; i++) {
        const RunWarning *w = &S->warnings[i];
        if (strcmp(w->kind, kind) == 0 && (!setting || (w->setting >= 0 && strcmp(S->settings[w->setting].label, setting) == 0)) &&
            (!attack || (w->attack >= 0 && strcmp(S->attacks[w->attack].label, attack) == 0)))
            return 1;
    }
    return 0;
}

// Which observers see an upload before the server's noise: the upload as sent or as the
// server receives it, not the released aggregate; nothing when the clients add the noise.
START_TEST(observers_before_server_noise) {
    const char *obs[] = {"server", "upload", "public", NULL};
    SettingSummary s = {.noise_point = "server", .observer = obs};
    ck_assert_int_eq(setting_observes_before_noise(&s, 0), 1);
    ck_assert_int_eq(setting_observes_before_noise(&s, 1), 1);
    ck_assert_int_eq(setting_observes_before_noise(&s, 2), 0);
    ck_assert_int_eq(setting_observes_before_noise(&s, 3), 0);
    s.noise_point = "client";
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(setting_observes_before_noise(&s, k), 0);
    s.noise_point = NULL;
    ck_assert_int_eq(setting_observes_before_noise(&s, 0), 0);
}
END_TEST

START_TEST(warnings_say_why) {
    write_synthetic(0);
    MatrixResults r;
    RunSummary S;
    FpError err = {0};
    ck_assert_msg(matrix_results_load(SYN, &r, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(r.n_settings, 3);
    ck_assert_msg(run_summary_build(&r, &S, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(S.n_seeds, 2);
    ck_assert_int_eq(S.baseline, 0);
    // The per-seed values and the interval: mean 0.81, half-width t(1)·sd/√2.
    const SeedStat *a = &S.settings[0].accuracy.stat;
    ck_assert_double_eq_tol(a->mean, 0.81, 1e-12);
    ck_assert_double_eq_tol((a->ci_high - a->ci_low) / 2, 12.706204736 * sqrt(0.0002) / sqrt(2), 1e-3);
    ck_assert_int_eq(S.n_warnings, 4);
    ck_assert(has_warning(&S, "attack_fails_without_defense", "none", "blind"));
    ck_assert(has_warning(&S, "accuracy_at_chance", "spm ε=1", NULL));
    ck_assert(has_warning(&S, "mixed_epsilon_notions", NULL, NULL));
    ck_assert(has_warning(&S, "noise_after_observation", "dpf ε=1", NULL)); // one per setting, naming the attacks
    for (int i = 0; i < S.n_warnings; i++)
        if (strcmp(S.warnings[i].kind, "noise_after_observation") == 0)
            ck_assert_msg(strstr(S.warnings[i].message, "the point probe observes") &&
                              !strstr(S.warnings[i].message, "blind"),
                          "%s", S.warnings[i].message);
    for (int i = 0; i < S.n_warnings; i++)
        if (strcmp(S.warnings[i].kind, "accuracy_at_chance") == 0)
            ck_assert_msg(strstr(S.warnings[i].message, "never rose") && strstr(S.warnings[i].message, "local"),
                          "%s", S.warnings[i].message);
    // In the JSON summary too.
    cJSON *j = run_summary_json(&S);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "warnings")), 4);
    const cJSON *vals = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
                                                                     cJSON_GetObjectItem(j, "settings"), 0), "metrics"),
                                                                 "model_accuracy"),
                                            "values");
    ck_assert_int_eq(cJSON_GetArraySize(vals), 2);
    ck_assert_double_eq(cJSON_GetArrayItem(vals, 1)->valuedouble, 0.82);
    cJSON_Delete(j);
    run_summary_free(&S);
    matrix_results_free(&r);
    // On the page: the warnings box, the marks in the matrix, the chance row, guarantees.
    int problems = -1;
    ck_assert_msg(report_write_html(SYN, SYN "/report.html", NULL, &problems, &err) == FP_OK, "%s", err.msg);
    char *html = read_all(SYN "/report.html");
    ck_assert_ptr_nonnull(strstr(html, "<div class=\"warnings\"><b>4 warnings</b>"));
    ck_assert_int_ge(count(html, "class=\"warn\""), 3);
    ck_assert_ptr_nonnull(strstr(html, "chance (no information)"));
    ck_assert_ptr_nonnull(strstr(html, "<span class=\"badge g-proven\""));
    // Two seeds: both values, no t-interval (this index has no test_samples, so no counts).
    ck_assert_ptr_nonnull(strstr(html, "0.810<span class=\"ci\"> 0.800–0.820</span>"));
    ck_assert_ptr_null(strstr(html, "± 0.127"));
    free(html);
    // The control: the same run with no reason to warn raises none.
    write_synthetic(1);
    ck_assert_int_eq(matrix_results_load(SYN, &r, &err), FP_OK);
    ck_assert_int_eq(run_summary_build(&r, &S, &err), FP_OK);
    for (int i = 0; i < S.n_warnings; i++)
        fprintf(stderr, "unexpected warning: %s\n", S.warnings[i].message);
    ck_assert_int_eq(S.n_warnings, 0);
    run_summary_free(&S);
    matrix_results_free(&r);
    // Near chance: above chance + 2 points, but keeping 6% of what the baseline learns.
    write_synthetic(2);
    ck_assert_int_eq(matrix_results_load(SYN, &r, &err), FP_OK);
    ck_assert_int_eq(run_summary_build(&r, &S, &err), FP_OK);
    ck_assert_int_eq(S.n_warnings, 1);
    ck_assert(has_warning(&S, "accuracy_near_chance", "spm ε=1", NULL));
    ck_assert_msg(strstr(S.warnings[0].message, "model accuracy 0.143 is close to chance (0.100): it keeps 6% of what "
                                                "the federation learns without a defense (0.810)") &&
                      strstr(S.warnings[0].message, "never rose"),
                  "%s", S.warnings[0].message);
    run_summary_free(&S);
    matrix_results_free(&r);
}
END_TEST

// Colours mean fixed things: a leak at chance is green and a full leak red whatever the
// column's spread, and accuracy is placed between chance and the baseline.
START_TEST(colours_are_anchored) {
    write_synthetic(0);
    FpError err = {0};
    ck_assert_int_eq(report_write_html(SYN, SYN "/report.html", NULL, NULL, &err), FP_OK);
    char *html = read_all(SYN "/report.html");
    // none: probe SSIM 1 (full leak: red, hue 0); blind AUC 0.505 (chance: green, hue 119-120).
    ck_assert_ptr_nonnull(strstr(html, "background:hsl(0,60%,82%)\" title=\"per seed: 1, 1"));
    ck_assert_ptr_nonnull(strstr(html, "background:hsl(119,60%,82%)\" title=\"per seed: 0.5, 0.51"));
    // spm accuracy at chance: red; none's accuracy: green.
    ck_assert_ptr_nonnull(strstr(html, "background:hsl(0,60%,82%)\" title=\"per seed: 0.1, 0.105"));
    ck_assert_ptr_nonnull(strstr(html, "background:hsl(120,60%,82%)\" title=\"per seed: 0.8, 0.82"));
    free(html);
}
END_TEST

// ---- in a browser -------------------------------------------------------------------------

static int sh(const char *cmd, char *out, size_t n) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t k = 0;
    int c;
    while ((c = fgetc(p)) != EOF)
        if (k + 1 < n)
            out[k++] = (char)c;
    out[k] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The report of a run with seeds, a defense with server-side noise and an attack that
// learns nothing, as a reader sees it: the privacy-utility plots, the warnings, the
// sound-ε column, every image decoded, no console error.
START_TEST(report_in_headless_chromium) {
    const char *bin = getenv("FEDPRIV_BIN");
    if (!bin || !bin[0]) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    ck_assert(standin_mkdirs(TEST_DIR));
    ck_assert(standin_write_csv(CSV));
    standin_rm(TEST_DIR "/rich");
    cJSON *root = standin_matrix_seeds(CSV, "[3, 4]",
                                       "[{\"name\": \"none\"}, {\"name\": \"noise\", \"epsilon\": [0.5, 2]},"
                                       " {\"name\": \"clientdp\", \"epsilon\": [1, 4]}, {\"name\": \"explode\"},"
                                       " {\"name\": \"" "<script>alert(1)<\\/script>" "\"}]",
                                       "[{\"name\": \"probe\"}, {\"name\": \"blind\"}]");
    MatrixSummary s;
    FpError err = {0};
    ck_assert_msg(standin_run(root, TEST_DIR "/rich", 2, &s, &err) == FP_OK, "%s", err.msg);
    cJSON_Delete(root);
    char cmd[2048], out[16384];
    snprintf(cmd, sizeof cmd, "'%s' report " TEST_DIR "/rich -o " TEST_DIR "/report.html", bin);
    ck_assert_msg(sh(cmd, out, sizeof out) == 0, "%s", out);
    remove(TEST_DIR "/report.png");
    int rc = sh("bash tests/browser/run.sh " TEST_DIR "/report.html " TEST_DIR "/report.png"
                " --expect-text '<script>alert(1)</script>' --expect-text 'diverged' --expect-text 'Sound ε'"
                " --expect-text 'Privacy–utility trade-off' --expect-text 'attack_fails_without_defense'"
                " --expect-text 'noise_after_observation' --expect-text 'chance (no information)'"
                " --expect-selector '.tradeoff svg.plot' --expect-selector '.warnings li'"
                " --expect-selector 'table.matrix th.eps-sound' --expect-selector 'table.matrix td.eps-sound span.badge.g-proven'"
                " --expect-selector 'table.matrix td.eps-sound span.badge.g-none' --min-images 15 --min-plots 6",
                out, sizeof out);
    ck_assert_msg(rc == 0, "browser check exited %d:\n%s", rc, out);
    float *img = NULL;
    int c, h, w;
    ck_assert_msg(png_read(TEST_DIR "/report.png", &img, &c, &h, &w, &err) == FP_OK, "%s", err.msg);
    ck_assert_int_eq(w, 1280);
    ck_assert_int_gt(h, 600);
    free(img);
}
END_TEST

// The browser check can fail: a page with an undecodable image and a console error.
START_TEST(browser_check_fails_on_a_broken_page) {
    if (!getenv("FEDPRIV_BIN") || !getenv("FEDPRIV_BIN")[0]) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    ck_assert(standin_mkdirs(TEST_DIR));
    FILE *f = fopen(TEST_DIR "/broken.html", "w");
    fputs("<!DOCTYPE html><html><body><p>broken</p><img alt=\"bad\" src=\"data:image/png;base64,AAAA\">"
          "<script>console.error('boom')</script></body></html>",
          f);
    fclose(f);
    char out[16384];
    int rc = sh("bash tests/browser/run.sh " TEST_DIR "/broken.html " TEST_DIR "/broken.png", out, sizeof out);
    ck_assert_msg(rc == 1, "exited %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "did not decode"), "%s", out);
    ck_assert_msg(strstr(out, "boom"), "%s", out);
}
END_TEST

Suite *suite_report(void) {
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("html");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, escaping);
    tcase_add_test(tc, svg_plots);
    tcase_add_test(tc, report_of_a_run);
    tcase_add_test(tc, artifacts_stay_inside_the_run);
    tcase_add_test(tc, artifact_links_not_followed);
    tcase_add_test(tc, bad_run_folders);
    tcase_add_test(tc, svg_axes_markers_and_bands);
    tcase_add_test(tc, seed_statistics);
    tcase_add_test(tc, metric_scales_are_anchored);
    tcase_add_test(tc, observers_before_server_noise);
    tcase_add_test(tc, warnings_say_why);
    tcase_add_test(tc, colours_are_anchored);
    tcase_add_test(tc, not_applicable_is_no_number);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("browser");
    tcase_set_timeout(tb, 600); // may install chromium first
    tcase_add_test(tb, report_in_headless_chromium);
    tcase_add_test(tb, browser_check_fails_on_a_broken_page);
    suite_add_tcase(s, tb);
    return s;
}
