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
    // The NaN point splits series 0 in two lines; series 1 and the diagonal add two more.
    int lines = 0;
    for (const char *q = b.s; (q = strstr(q, "<polyline")); q++)
        lines++;
    ck_assert_int_eq(lines, 4);
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
    ck_assert_int_eq(count(html, "<svg xmlns"), 2);                                  // accuracy + one ROC plot
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
    ck_assert_int_eq(count(html, "<td class=\"na\""), 0);
    ck_assert_int_eq(count(html, " recovered (SSIM ≥ 0.9)"), 0);
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
        cJSON_AddNumberToObject(res, "recovered_ssim", 0.9);
        cJSON_AddNumberToObject(res, "images_recovered", 1);
        cJSON_AddBoolToObject(a, "applicable", i == 1 ? 0 : 1);
        ck_assert_int_eq(jv_write_file_atomic(path, cell, &err), FP_OK);
        cJSON_Delete(cell);
    }
    matrix_results_free(&r);
    ck_assert_int_eq(report_write_html(RUN, TEST_DIR "/report-na.html", NULL, &problems, &err), FP_OK);
    html = read_all(TEST_DIR "/report-na.html");
    ck_assert_int_eq(count(html, "<td class=\"na\""), 1);
    const char *na = strstr(html, "<td class=\"na\"");
    const char *end = strstr(na, "</td>");
    ck_assert_ptr_nonnull(end);
    for (const char *q = strchr(na, '>') + 1; q < end; q++)
        ck_assert_msg(!(*q >= '0' && *q <= '9'), "a number in the not-applicable cell: %.*s", (int)(end - na), na);
    ck_assert_int_eq(count(html, " recovered (SSIM ≥ 0.9)"), 1); // the applicable one counts its images
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

START_TEST(report_in_headless_chromium) {
    const char *bin = getenv("FEDPRIV_BIN");
    if (!bin || !bin[0]) {
        fprintf(stderr, "SKIP: FEDPRIV_BIN is not set (make test sets it)\n");
        return;
    }
    make_run();
    char cmd[2048], out[16384];
    snprintf(cmd, sizeof cmd, "'%s' report " RUN " -o " TEST_DIR "/report.html", bin);
    ck_assert_msg(sh(cmd, out, sizeof out) == 0, "%s", out);
    remove(TEST_DIR "/report.png");
    int rc = sh("bash tests/browser/run.sh " TEST_DIR "/report.html " TEST_DIR "/report.png"
                " --expect-text '<script>alert(1)</script>' --expect-text 'diverged' --min-images 12 --min-plots 2",
                out, sizeof out);
    ck_assert_msg(rc == 0, "browser check exited %d:\n%s", rc, out);
    float *img = NULL;
    int c, h, w;
    FpError err = {0};
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
    tcase_add_test(tc, not_applicable_is_no_number);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("browser");
    tcase_set_timeout(tb, 600); // may install chromium first
    tcase_add_test(tb, report_in_headless_chromium);
    tcase_add_test(tb, browser_check_fails_on_a_broken_page);
    suite_add_tcase(s, tb);
    return s;
}
