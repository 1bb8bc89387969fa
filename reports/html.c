// The HTML report (see reports/html.h): the page and its style. Sections, in page
// order: the verdict per defense setting, problems and the warnings grouped by kind
// (html_verdict.c); the attack × defense matrix with anchored colours (html_matrix.c);
// the privacy-utility trade-off, accuracy per round and ROC curves (html_plots.c);
// reconstructions, privacy spent, audit findings and run metadata (html_sections.c).
// The helpers they share are in report_util.c (reports/report_internal.h); this file
// calls the sections, the sections call the helpers, and nothing calls back.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/version.h"
#include "reports/report_internal.h"
#include "reports/verdict.h"

static const char *css =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#222;margin:12px auto;"
    "max-width:1600px;padding:0 16px}"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #ddd;"
    "padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}"
    "table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #d6d6d6;padding:4px 8px;text-align:left;"
    "vertical-align:top}th{background:#f3f3f3;font-weight:600}td.name{white-space:nowrap}td.num{text-align:right;"
    "font-variant-numeric:tabular-nums;white-space:nowrap}small,.note{color:#666}.note{font-size:12.5px}"
    "td small{display:block;font-size:11px;line-height:1.25;white-space:normal}.wide{overflow-x:auto}"
    "table.matrix td.num small{max-width:190px;margin-left:auto}.ci{color:#555;font-size:11.5px}"
    ".st-done{color:#1b7a2f}.st-diverged{background:#fde2c8;color:#8a3b00;font-weight:600}"
    ".st-failed{background:#f8d0d0;color:#8b0000;font-weight:600}.st-pending,.st-skipped,.st-n\\/a{color:#777;"
    "font-style:italic}.problems{background:#fff4e5;border:1px solid #f0c36d;padding:6px 12px}"
    ".warnings{background:#fffbe6;border:1px solid #e0c050;padding:6px 12px}.warnings li{margin:4px 0}"
    ".wkind{font:600 11px ui-monospace,monospace;background:#f3e3a0;border-radius:3px;padding:0 4px;"
    "margin-right:6px}.warn{color:#a05a00;font-weight:700;cursor:help}"
    ".g-proven{background:#d8f0dc;color:#14532d}.g-conditional{background:#fdf0c8;color:#7a4d00}"
    ".g-none{background:#eee;color:#555}.badge{font-size:11px;border-radius:3px;padding:0 4px;white-space:nowrap}"
    "tr.chance td{background:#fafafa;color:#555;font-style:italic;border-top:2px solid #bbb}"
    ".missing{display:inline-block;border:1px dashed #c00;color:#c00;padding:8px;font-size:12px}"
    ".plots{display:flex;flex-wrap:wrap;gap:8px 18px}.plotbox{flex:0 0 auto}.plotbox h3{margin:6px 0 0 58px}"
    ".legend{list-style:none;padding:0;margin:4px 0;font-size:12.5px}.legend li{display:inline-block;"
    "margin-right:14px}.legend svg{vertical-align:middle;margin-right:4px}"
    ".recon{display:flex;flex-wrap:wrap;align-items:flex-start;gap:6px;margin:4px 0 10px}figure{margin:0;"
    "min-width:64px;text-align:center;font-size:11px;line-height:1.25;color:#444}figure img{margin:0 auto;"
    "display:block;image-rendering:pixelated;border:1px solid #ccc}.sep{width:10px}"
    ".scale{display:inline-block;width:120px;height:10px;vertical-align:middle;margin:0 4px}"
    ".scale-leak{background:linear-gradient(90deg,hsl(120,60%,82%),hsl(60,60%,82%),hsl(0,60%,82%))}"
    ".scale-acc{background:linear-gradient(90deg,hsl(0,60%,82%),hsl(60,60%,82%),hsl(120,60%,82%))}"
    "details{margin:6px 0}summary{cursor:pointer;color:#335}"
    "pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow:auto;font-size:12px;max-height:360px}"
    "dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px}dt{font-weight:600}dd{margin:0}"
    "ul.why{margin:2px 0 0 16px;padding:0;font-size:12px;color:#555}"
    // A number cell does not wrap; the reasons listed under its figure do (inside the
    // column, never widening the page: the privacy table of a dp-sgd run was 2,905 px).
    "td.num ul.why{white-space:normal;text-align:left;min-width:16em;max-width:26em}"
    // The verdict: a word and one line of figures per cell; it fits 1,280 x 800 (13 rows).
    "h1+p,h1+p+p{margin:4px 0}h2#verdict{margin-top:10px}table.verdict th small{font-weight:400}"
    "table.verdict{width:100%;font-size:13px;line-height:1.25}table.verdict th,table.verdict td{padding:2px 6px}"
    "table.verdict th.view{text-align:center;background:#e6ebf3}table.verdict td.name{white-space:normal;"
    "min-width:150px}table.verdict td.num small,td.v small,td.eps small{display:block;font-size:11px;"
    "line-height:1.2;color:#444}td.v small{white-space:nowrap}td.v{min-width:110px}td.eps{font-size:12px;"
    "max-width:250px}"
    ".v-leaks{background:#f8d0d0}.v-leaks b{color:#8b0000}.v-protects{background:#d8f0dc}.v-protects b{color:#14532d}"
    ".v-unmeasurable{background:#f0f0f0}.v-unmeasurable b{color:#666;font-weight:400;font-style:italic}"
    ".v-none b{color:#777;font-weight:400}p.rule{margin:4px 0 0}b.chance{color:#8a3b00;font-weight:600}"
    "details.wgroup{margin:2px 0}details.wgroup ul{margin:2px 0 6px}"
    // The matrix: headers and names wrap, the table takes the page's width.
    "table.matrix{width:100%;font-size:12.5px}table.matrix th,table.matrix td{padding:3px 5px}"
    "table.matrix td.name{white-space:normal;min-width:120px}table.matrix th.family{text-align:center;"
    "background:#e6ebf3}";

// ---- the page ------------------------------------------------------------------------------------

FpStatus report_write_html(const char *dir, const char *out_path, const ReportOptions *opt, int *problems,
                           FpError *err) {
    Report R = {.dir = dir, .max_images = opt && opt->max_images > 0 ? opt->max_images : 8};
    FP_TRY(matrix_results_load(dir, &R.r, err));
    FpStatus st = run_summary_build(&R.r, &R.S, err);
    if (st != FP_OK) {
        matrix_results_free(&R.r);
        return st;
    }
    hb_init(&R.out);
    hb_init(&R.problems);
    for (int i = 0; i < R.r.n; i++)
        if (R.r.status[i] == CELL_FAILED) {
            const cJSON *c = R.r.cells[i];
            rep_problem(&R, "cell \"%.120s\" failed: %.400s", rep_str(matrix_index_cell(&R.r, i), "label", "?"),
                        c ? rep_str(c, "message", "") : "");
        }
    // The body first: problems found while writing it go in the box after the verdict.
    section_verdict(&R);
    size_t after_verdict = R.out.len;
    section_warnings(&R);
    section_matrix(&R);
    section_tradeoff(&R);
    section_curves(&R);
    section_images(&R);
    section_privacy(&R);
    section_audit(&R);
    section_metadata(&R);
    const char *title = opt && opt->title ? opt->title : "fedpriv report";
    HtmlBuf page;
    hb_init(&page);
    hb_puts(&page, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
                   "style-src 'unsafe-inline'\"><meta name=\"viewport\" content=\"width=device-width\"><title>");
    hb_escape(&page, title);
    hb_puts(&page, "</title><style>");
    hb_puts(&page, css);
    hb_puts(&page, "</style></head><body><h1>");
    hb_escape(&page, title);
    hb_puts(&page, "</h1><p>");
    const char *desc = rep_str(R.r.index, "description", "");
    if (desc[0]) {
        hb_escape(&page, desc);
        hb_puts(&page, " · ");
    }
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(R.r.index, "dataset");
    hb_escape(&page, rep_str(ds, "name", "?"));
    hb_puts(&page, " · model ");
    hb_escape(&page, rep_str(cJSON_GetObjectItemCaseSensitive(R.r.index, "model"), "name", "?"));
    const cJSON *fed = cJSON_GetObjectItemCaseSensitive(R.r.index, "federation");
    double clients = rep_num(fed, "clients"), q = rep_num(fed, "sample_rate"), rounds = rep_num(fed, "rounds");
    if (isfinite(clients))
        hb_printf(&page, " · %.0f clients, q = %g, %.0f rounds", clients, q, rounds);
    int counts[4] = {0};
    for (int i = 0; i < R.r.n; i++)
        counts[R.r.status[i]]++;
    hb_printf(&page, " · %d defense settings × %d attacks × %d seed%s · %d cells: %d done, %d diverged, %d failed, "
                     "%d pending</p>",
              R.S.n_settings, R.S.n_attacks, R.S.n_seeds, R.S.n_seeds == 1 ? "" : "s", R.r.n, counts[CELL_DONE],
              counts[CELL_DIVERGED], counts[CELL_FAILED], counts[CELL_PENDING]);
    hb_puts(&page, "<p class=\"note\"><a href=\"#verdict\">Verdict</a> · <a href=\"#warnings\">Warnings</a> · "
                   "<a href=\"#matrix\">Matrix</a> · "
                   "<a href=\"#tradeoff\">Privacy–utility</a> · <a href=\"#curves\">Accuracy and ROC curves</a> · "
                   "<a href=\"#reconstructions\">Reconstructions</a> · <a href=\"#privacy\">Privacy spent</a> · "
                   "<a href=\"#audit\">Audit</a> · <a href=\"#metadata\">Metadata</a></p>");
    hb_put(&page, R.out.s ? R.out.s : "", after_verdict);
    if (R.n_problems) {
        hb_printf(&page, "<div class=\"problems\"><b>%d problem%s</b><ul>", R.n_problems, R.n_problems == 1 ? "" : "s");
        hb_put(&page, R.problems.s ? R.problems.s : "", R.problems.len);
        hb_puts(&page, "</ul></div>");
    }
    hb_put(&page, R.out.s ? R.out.s + after_verdict : "", R.out.len - after_verdict);
    hb_puts(&page, "<p class=\"note\">Generated by fedpriv ");
    hb_escape(&page, FEDPRIV_VERSION);
    hb_puts(&page, ".</p></body></html>\n");
    if (page.oom || R.out.oom || R.problems.oom)
        st = fp_fail(err, FP_ENOMEM, "out of memory writing the report");
    else
        st = report_write_file_atomic(out_path, page.s, page.len, err);
    if (problems)
        *problems = R.n_problems;
    hb_free(&page);
    hb_free(&R.out);
    hb_free(&R.problems);
    run_summary_free(&R.S);
    matrix_results_free(&R.r);
    return st;
}

FpStatus report_summary_text(const char *dir, char **text, FpError *err) {
    *text = NULL;
    MatrixResults r;
    RunSummary S;
    FP_TRY(matrix_results_load(dir, &r, err));
    FpStatus st = run_summary_build(&r, &S, err);
    if (st != FP_OK) {
        matrix_results_free(&r);
        return st;
    }
    RunVerdict v;
    HtmlBuf b;
    hb_init(&b);
    if (run_verdict_build(&S, &v) == FP_OK)
        run_verdict_text(&v, &b);
    else
        b.oom = 1;
    run_verdict_free(&v);
    run_summary_free(&S);
    matrix_results_free(&r);
    if (b.oom || !b.s) {
        hb_free(&b);
        return fp_fail(err, FP_ENOMEM, "out of memory writing the summary");
    }
    *text = b.s; // the buffer's string, handed over
    return FP_OK;
}
