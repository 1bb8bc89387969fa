// The report's remaining sections: reconstructions (inlined PNG), privacy spent per
// setting, audit findings stored with the run, and run metadata.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_number.h"
#include "reports/report_internal.h"

// One figure: an image and a two-line caption (what it is; its SSIM).
static void figure(Report *R, const char *adir, const char *file, const char *caption, double ssim,
                   const char *where) {
    hb_puts(&R->out, "<figure>");
    rep_inline_png(R, adir, file, caption, where);
    hb_puts(&R->out, "<figcaption>");
    hb_escape(&R->out, caption);
    hb_puts(&R->out, "<br>");
    if (isfinite(ssim))
        hb_printf(&R->out, "SSIM %.3f", fabs(ssim) < 5e-4 ? 0.0 : ssim); // no "-0.000"
    else
        hb_puts(&R->out, "&nbsp;");
    hb_puts(&R->out, "</figcaption></figure>");
}

void section_images(Report *R) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    hb_puts(o, "<h2 id=\"reconstructions\">Reconstructions</h2>");
    int shown = 0;
    for (int k = 0; k < S->n_attacks; k++) {
        const char *name = S->attacks[k].label;
        int header = 0;
        for (int si = 0; si < S->n_settings; si++) {
            // The first run of the setting that has images (one seed per setting).
            const cJSON *a = NULL, *imgs = NULL;
            int run = -1;
            for (int j = 0; j < S->settings[si].runs->n_runs && !imgs; j++) {
                int i = S->settings[si].runs->runs[j];
                a = R->r.cells[i] ? matrix_cell_attack_at(R->r.cells[i], k) : NULL;
                imgs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "result"), "images");
                if (!cJSON_IsArray(imgs) || cJSON_GetArraySize(imgs) == 0)
                    imgs = NULL;
                else
                    run = i;
            }
            if (!imgs)
                continue;
            const char *adir = rep_str(a, "dir", "");
            if (!header) {
                hb_puts(o, "<h3>");
                hb_escape(o, name);
                hb_puts(o, "</h3><p class=\"note\">Per image: the original, the reconstruction at intermediate steps, "
                           "and the final one, with SSIM to the original");
                hb_puts(o, S->n_seeds > 1 ? " (the first seed of each setting).</p>" : ".</p>");
                header = 1;
            }
            const char *label = S->settings[si].label;
            hb_puts(o, "<div><b>");
            hb_escape(o, label);
            hb_puts(o, "</b>");
            if (S->n_seeds > 1) {
                hb_puts(o, " <small>seed ");
                rep_put_seed(o, rep_num(matrix_index_cell(&R->r, run), "seed"));
                hb_puts(o, "</small>");
            }
            hb_printf(o, " <small>mean SSIM %.3f</small></div><div class=\"recon\">",
                      rep_num(cJSON_GetObjectItemCaseSensitive(a, "result"), "ssim_mean"));
            int m = 0;
            const cJSON *im;
            cJSON_ArrayForEach(im, imgs) {
                if (m++ >= R->max_images)
                    break;
                char where[400], cap[96];
                snprintf(where, sizeof where, "%.120s, %.60s, image %d", label, name, m - 1);
                const char *orig = rep_str(im, "original_png", NULL);
                if (orig)
                    figure(R, adir, orig, "original", NAN, where);
                // At most 3 snapshots, evenly spaced (the final image follows them).
                const cJSON *snaps = cJSON_GetObjectItemCaseSensitive(im, "snapshots");
                int nsnap = cJSON_GetArraySize(snaps), shown_snap = nsnap < 3 ? nsnap : 3;
                for (int q = 0; q < shown_snap; q++) {
                    const cJSON *snap = cJSON_GetArrayItem(snaps, (int)lround((q + 1.0) * nsnap / shown_snap) - 1);
                    const char *png = rep_str(snap, "png", NULL);
                    if (!png)
                        continue;
                    snprintf(cap, sizeof cap, "step %g", rep_num(snap, "step"));
                    figure(R, adir, png, cap, rep_num(snap, "ssim"), where);
                }
                const char *rec = rep_str(im, "reconstruction_png", NULL);
                if (rec)
                    figure(R, adir, rec, "final", rep_num(im, "ssim"), where);
                hb_puts(o, "<div class=\"sep\"></div>");
                shown++;
            }
            hb_puts(o, "</div>");
        }
    }
    if (!shown)
        hb_puts(o, "<p class=\"note\">No attack in this run produced reconstructions.</p>");
}

// Audit findings stored with the run (matrix_audit_load).
static void audit_row(Report *R, const cJSON *a) {
    HtmlBuf *o = &R->out;
    double eps = rep_num(a, "epsilon"), lb = rep_num(a, "epsilon_lower_bound");
    hb_puts(o, "<tr><td>");
    hb_escape(o, rep_str(a, "file", ""));
    hb_puts(o, "</td><td>");
    hb_escape(o, rep_str(a, "mechanism", rep_str(a, "defense", "?")));
    hb_puts(o, " <small>");
    hb_escape(o, rep_str(a, "variant", ""));
    hb_puts(o, "</small></td>");
    // `fedpriv audit --json` reports variances per input: show the first input's.
    const cJSON *in0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(a, "inputs"), 0);
    static const char *const keys[] = {"epsilon", "bias_factor", "variance", "variance_theory", "epsilon_lower_bound"};
    for (int k = 0; k < 5; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, keys[k]);
        if (!v && in0)
            v = cJSON_GetObjectItemCaseSensitive(in0, keys[k]);
        hb_puts(o, "<td class=\"num\">");
        rep_put_num(o, jnum_value(v));
        hb_puts(o, "</td>");
    }
    if (isfinite(eps) && isfinite(lb))
        hb_puts(o, lb <= eps ? "<td class=\"st-done\">lower bound ≤ ε</td>" : "<td class=\"st-failed\">lower bound > ε</td>");
    else
        hb_puts(o, "<td>—</td>");
    hb_puts(o, "</tr>");
}

void section_audit(Report *R) {
    HtmlBuf *o = &R->out;
    cJSON *recs = NULL;
    FpError err = {0};
    if (matrix_audit_load(R->dir, &recs, &err) != FP_OK) {
        rep_problem(R, "audit: %s", err.msg);
        return;
    }
    if (cJSON_GetArraySize(recs) > 0) {
        hb_puts(o, "<h2 id=\"audit\">Audit findings</h2><p class=\"note\">Empirical checks of each mechanism "
                   "(<code>fedpriv audit</code>): the bias factor (1 = unbiased), the variance against its closed "
                   "form, and an ε lower bound from output histograms (Clopper–Pearson 95%). A lower bound above "
                   "the claimed ε means the claim does not hold.</p><table><thead><tr><th>File</th><th>Mechanism</th>"
                   "<th>Claimed ε</th><th>Bias factor</th><th>Variance (first input)</th><th>Variance (theory)</th>"
                   "<th>ε lower bound</th><th>Verdict</th></tr></thead><tbody>");
        const cJSON *a;
        cJSON_ArrayForEach(a, recs) audit_row(R, a);
        hb_puts(o, "</tbody></table>");
    }
    cJSON_Delete(recs);
}

// A privacy record's guarantee: the state, then its assumptions (conditional) or its
// reasons (none) as a list.
static void put_guarantee(HtmlBuf *o, const cJSON *p) {
    const char *g = rep_str(p, "guarantee", "");
    int known = strcmp(g, "proven") == 0 || strcmp(g, "conditional") == 0 || strcmp(g, "none") == 0;
    if (!known) { // a record written before guarantees: it claims nothing proven
        hb_puts(o, "—");
        return;
    }
    hb_puts(o, "<span class=\"g-");
    hb_escape_attr(o, g);
    hb_puts(o, "\">");
    hb_escape(o, g);
    hb_puts(o, "</span>");
    const cJSON *as = cJSON_GetObjectItemCaseSensitive(p, "assumptions"), *a;
    if (cJSON_GetArraySize(as) > 0) {
        hb_puts(o, strcmp(g, "conditional") == 0 ? "<br><small>if:</small>" : "<br><small>because:</small>");
        hb_puts(o, "<ul class=\"why\">");
        cJSON_ArrayForEach(a, as) {
            hb_puts(o, "<li>");
            hb_escape(o, cJSON_IsString(a) ? a->valuestring : "?");
            hb_puts(o, "</li>");
        }
        hb_puts(o, "</ul>");
    }
}

// A sound figure: the proven number (∞ when there is none), and beside it, for a
// conditional record, the bound that holds if its assumptions do.
static void put_sound(HtmlBuf *o, const cJSON *obj) {
    rep_put_num(o, rep_num(obj, "epsilon_total"));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(obj, "epsilon_total_conditional");
    if (c) {
        hb_puts(o, "<br><small>");
        rep_put_num(o, jnum_value(c));
        hb_puts(o, " if</small>");
    }
}

void section_privacy(Report *R) {
    const RunSummary *S = &R->S;
    HtmlBuf *o = &R->out;
    hb_puts(o, "<h2 id=\"privacy\">Privacy spent</h2><p class=\"note\">After the last round of each setting's "
               "federation. <b>Nominal</b>: the ε the defense's paper claims, composed as the paper composes it, in "
               "its unit and notion. <b>Sound</b>: a bound that holds (ε, δ) by the accountant named, for the code as "
               "it runs. <b>Guarantee</b>: <span class=\"g-proven\">proven</span> (the sound ε is a theorem for what "
               "runs), <span class=\"g-conditional\">conditional</span> (the sound ε is ∞; the bound under it holds "
               "if the listed assumptions do) or <span class=\"g-none\">none</span> (with the reasons). <b>Upload "
               "observer</b>: the bound against the server or an eavesdropper who sees a client's own uploads, when "
               "the defense states one, with its own guarantee (its proof is not the aggregate's). ∞ = no guarantee, — = not defined.</p>");
    hb_puts(o, "<table><thead><tr><th>Defense setting</th><th>Unit</th><th>Nominal ε (per round)</th>"
               "<th>Nominal ε (total)</th><th>Nominal notion</th><th>Guarantee</th><th>Sound ε (total)</th><th>δ</th>"
               "<th>Sound notion</th><th>Upload observer ε</th><th>σ</th></tr></thead><tbody>");
    for (int si = 0; si < S->n_settings; si++) {
        const SettingSummary *s = &S->settings[si];
        hb_puts(o, "<tr><td>");
        hb_escape(o, s->label);
        hb_puts(o, "</td>");
        const cJSON *p = s->privacy;
        if (!p) {
            hb_puts(o, "<td colspan=\"10\">");
            rep_put_status(o, s->n_done ? "no record" : s->n_diverged ? "diverged" : s->n_failed ? "failed" : "pending",
                           NULL);
            hb_puts(o, "</td></tr>");
            continue;
        }
        const cJSON *nom = cJSON_GetObjectItemCaseSensitive(p, "nominal");
        const cJSON *snd = cJSON_GetObjectItemCaseSensitive(p, "sound");
        const cJSON *up = cJSON_GetObjectItemCaseSensitive(snd, "upload");
        hb_puts(o, "<td>");
        hb_escape(o, s->unit);
        hb_puts(o, "</td><td class=\"num\">");
        rep_put_num(o, rep_num(nom, "epsilon_round"));
        hb_puts(o, "</td><td class=\"num\">");
        rep_put_num(o, rep_num(nom, "epsilon_total"));
        hb_puts(o, "</td><td><small>");
        hb_escape(o, rep_str(nom, "notion", ""));
        hb_puts(o, "</small></td><td>");
        put_guarantee(o, p);
        hb_puts(o, "</td><td class=\"num\">");
        put_sound(o, snd);
        hb_puts(o, "</td><td class=\"num\">");
        rep_put_num(o, rep_num(snd, "delta"));
        hb_puts(o, "</td><td><small>");
        hb_escape(o, rep_str(snd, "notion", ""));
        hb_puts(o, "</small></td><td class=\"num\">");
        if (up) { // the notion on hover: the column stays narrow
            hb_puts(o, "<span title=\"");
            hb_escape_attr(o, rep_str(up, "notion", ""));
            hb_puts(o, "\">");
            put_sound(o, up);
            hb_puts(o, "</span>");
            if (cJSON_GetObjectItemCaseSensitive(up, "guarantee")) { // its own record's label
                hb_puts(o, "<br>");
                put_guarantee(o, up);
            }
        } else
            hb_puts(o, "—");
        hb_puts(o, "</td><td class=\"num\">");
        rep_put_num(o, rep_num(p, "sigma"));
        hb_puts(o, "</td></tr>");
    }
    hb_puts(o, "</tbody></table>");
}


static void put_json(HtmlBuf *o, const cJSON *j) {
    char *t = j ? jnum_print(j, 1) : NULL; // the non-finite rule; seeds with every digit
    hb_puts(o, "<pre>");
    hb_escape(o, t ? t : "—");
    hb_puts(o, "</pre>");
    free(t);
}

void section_metadata(Report *R) {
    HtmlBuf *o = &R->out;
    const cJSON *ix = R->r.index;
    double total = 0;
    for (int i = 0; i < R->r.n; i++)
        total += R->r.cells[i] ? rep_num(cJSON_GetObjectItemCaseSensitive(R->r.cells[i], "run"), "wall_seconds") : 0;
    hb_puts(o, "<h2 id=\"metadata\">Run metadata</h2><dl>");
    static const char *const keys[] = {"matrix_file", "description", "fedpriv_version", "backend"};
    static const char *const names[] = {"Matrix file", "Description", "fedpriv version", "Backend"};
    for (int k = 0; k < 4; k++) {
        hb_printf(o, "<dt>%s</dt><dd>", names[k]);
        hb_escape(o, rep_str(ix, keys[k], "—"));
        hb_puts(o, "</dd>");
    }
    hb_puts(o, "<dt>Seeds</dt><dd>");
    const cJSON *seeds = cJSON_GetObjectItemCaseSensitive(ix, "seeds"), *sv;
    if (cJSON_IsArray(seeds)) {
        int q = 0;
        cJSON_ArrayForEach(sv, seeds) {
            hb_puts(o, q++ ? ", " : "");
            rep_put_num(o, jnum_value(sv));
        }
    } else
        rep_put_seed(o, rep_num(ix, "seed"));
    hb_puts(o, "</dd><dt>Threads</dt><dd>");
    rep_put_num(o, rep_num(ix, "threads"));
    if (strcmp(rep_str(ix, "rng", "philox"), "secure") == 0)
        hb_puts(o, "</dd><dt>RNG</dt><dd>secure: the defenses' noise and client sampling from ChaCha20 under fresh "
                   "OS keys (not reproducible); the rest Philox-4x32-10</dd>");
    else
        hb_puts(o, "</dd><dt>RNG</dt><dd>Philox-4x32-10, counter-based (results depend on the seed only, not on "
                   "thread or process count)</dd>");
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(ix, "dataset");
    hb_puts(o, "<dt>Dataset</dt><dd>");
    hb_escape(o, rep_str(ds, "name", "?"));
    hb_printf(o, " (%g training, %g test samples)</dd>", rep_num(ds, "train_samples"), rep_num(ds, "test_samples"));
    hb_printf(o, "<dt>Cells</dt><dd>%d (", R->r.n);
    int counts[4] = {0};
    for (int i = 0; i < R->r.n; i++)
        counts[R->r.status[i]]++;
    static const CellStatus order[] = {CELL_DONE, CELL_DIVERGED, CELL_FAILED, CELL_PENDING};
    for (int s = 0; s < 4; s++)
        hb_printf(o, "%s%d %s", s ? ", " : "", counts[order[s]], cell_status_name(order[s]));
    hb_printf(o, ")</dd><dt>Compute time</dt><dd>%.1f s over the finished cells</dd></dl>", total);
    hb_puts(o, "<h3>Per cell</h3><table><thead><tr><th>Cell</th><th>Seed</th><th>Status</th><th>Wall time</th>"
               "<th>Message</th></tr></thead><tbody>");
    for (int i = 0; i < R->r.n; i++) {
        const cJSON *c = R->r.cells[i];
        hb_puts(o, "<tr><td>");
        hb_escape(o, rep_str(matrix_index_cell(&R->r, i), "label", "?"));
        hb_puts(o, "</td><td class=\"num\">");
        rep_put_seed(o, rep_num(matrix_index_cell(&R->r, i), "seed"));
        hb_puts(o, "</td><td>");
        rep_put_status(o, cell_status_name(R->r.status[i]), NULL);
        hb_puts(o, "</td><td class=\"num\">");
        double w = c ? rep_num(cJSON_GetObjectItemCaseSensitive(c, "run"), "wall_seconds") : NAN;
        if (isfinite(w))
            hb_printf(o, "%.1f s", w);
        else
            hb_puts(o, "—");
        hb_puts(o, "</td><td>");
        hb_escape(o, c ? rep_str(c, "message", "") : "");
        hb_puts(o, "</td></tr>");
    }
    hb_puts(o, "</tbody></table><h3>Model</h3>");
    put_json(o, cJSON_GetObjectItemCaseSensitive(ix, "model"));
    hb_puts(o, "<h3>Federation</h3>");
    put_json(o, cJSON_GetObjectItemCaseSensitive(ix, "federation"));
    hb_puts(o, "<h3>Attacks</h3>");
    put_json(o, cJSON_GetObjectItemCaseSensitive(ix, "attacks"));
}

