// `fedpriv check` output formats (see runner/check.h): text for people, JSON for
// scripts, JUnit XML for CI test reports, GitHub Actions workflow annotations.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_number.h"
#include "runner/check.h"

int check_format_parse(const char *s) {
    static const char *const names[] = {"text", "json", "junit", "github"};
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

// One line per item: labels and names from the baseline are escaped (core/status.h), so
// none can fake a line of its own.
static void text(const CheckResult *r, const char *baseline, HtmlBuf *o) {
    char msg[2048], base[1024];
    fp_escape(baseline, base, sizeof base);
    baseline = base;
    for (int i = 0; i < r->n_items; i++) {
        hb_puts(o, r->items[i].ok ? "  ok    " : "  FAIL  ");
        hb_puts(o, fp_escape(r->items[i].message, msg, sizeof msg));
        hb_puts(o, "\n");
    }
    if (r->n_violations == 0)
        hb_printf(o, "check: all %d bound%s hold (%d comparison%s)\n", r->bounds, r->bounds == 1 ? "" : "s",
                  r->evaluations, r->evaluations == 1 ? "" : "s");
    else {
        hb_printf(o, "check: %d violation%s of %s (%d bound%s, %d comparison%s):\n", r->n_violations,
                  r->n_violations == 1 ? "" : "s", baseline, r->bounds, r->bounds == 1 ? "" : "s", r->evaluations,
                  r->evaluations == 1 ? "" : "s");
        for (int i = 0; i < r->n_items; i++)
            if (!r->items[i].ok)
                hb_printf(o, "  - %s\n", fp_escape(r->items[i].message, msg, sizeof msg));
    }
}

static void json(const CheckResult *r, const char *dir, const char *baseline, HtmlBuf *o) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "run", dir);
    cJSON_AddStringToObject(j, "baseline", baseline);
    cJSON_AddBoolToObject(j, "ok", r->n_violations == 0);
    cJSON_AddNumberToObject(j, "bounds", r->bounds);
    cJSON_AddNumberToObject(j, "comparisons", r->evaluations);
    cJSON_AddNumberToObject(j, "violations", r->n_violations);
    cJSON *items = cJSON_AddArrayToObject(j, "results");
    for (int i = 0; i < r->n_items; i++) {
        const CheckItem *it = &r->items[i];
        cJSON *x = cJSON_CreateObject();
        if (it->bound >= 0)
            cJSON_AddNumberToObject(x, "bound", it->bound);
        cJSON_AddStringToObject(x, "name", it->bound_name);
        cJSON_AddStringToObject(x, "subject", it->subject);
        cJSON_AddStringToObject(x, "metric", it->what);
        cJSON_AddBoolToObject(x, "ok", it->ok);
        if (it->is_comparison) {
            jnum_add(x, "value", it->value);
            if (it->has_min)
                jnum_add(x, "at_least", it->at_least);
            if (it->has_max)
                jnum_add(x, "at_most", it->at_most);
            jnum_add(x, "margin", it->margin);
        }
        cJSON_AddStringToObject(x, "message", it->message);
        cJSON_AddItemToArray(items, x);
    }
    char *t = jnum_print(j, 1), *safe = t ? fp_escape_json(t) : NULL;
    if (safe) {
        hb_puts(o, safe);
        hb_puts(o, "\n");
    } else
        o->oom = 1;
    free(safe);
    cJSON_free(t);
    cJSON_Delete(j);
}

// XML text and attribute values: & < > " ' as entities; control characters (not valid
// in XML 1.0) and invalid UTF-8 become U+FFFD through the HTML escaper, which does both.
static void xml(HtmlBuf *o, const char *s) { hb_escape(o, s); }

static void junit(const CheckResult *r, const char *baseline, HtmlBuf *o) {
    int tests = r->n_items ? r->n_items : 1;
    hb_puts(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"fedpriv check\">\n<testsuite name=\"");
    xml(o, baseline);
    hb_printf(o, "\" tests=\"%d\" failures=\"%d\" errors=\"0\">\n", tests, r->n_violations);
    for (int i = 0; i < r->n_items; i++) {
        const CheckItem *it = &r->items[i];
        hb_puts(o, "  <testcase classname=\"");
        xml(o, it->bound_name);
        hb_puts(o, "\" name=\"");
        xml(o, it->subject[0] ? it->subject : it->bound_name);
        if (it->what[0]) {
            hb_puts(o, ": ");
            xml(o, it->what);
        }
        hb_puts(o, "\"");
        if (it->ok) {
            hb_puts(o, "><system-out>");
            xml(o, it->message);
            hb_puts(o, "</system-out></testcase>\n");
        } else {
            hb_puts(o, "><failure message=\"");
            xml(o, it->message);
            hb_puts(o, "\"/></testcase>\n");
        }
    }
    if (r->n_items == 0)
        hb_puts(o, "  <testcase classname=\"fedpriv check\" name=\"no comparisons\"/>\n");
    hb_puts(o, "</testsuite>\n</testsuites>\n");
}

// GitHub workflow commands (the "::error ...::" annotations): data escapes %, CR, LF;
// property values also : and ,. The runner prints the lines to the job's log as they
// are, so every other control character is escaped too (core/status.h fp_escape: ESC
// and BEL as \x1b, \x07), run by run between the percent-encoded bytes (all ASCII, so no
// UTF-8 sequence is split). Only annotations are percent-encoded (the runner decodes
// them): a plain line ("ok: ...") gets fp_escape alone, so "50%" stays "50%".
static void gh_escape(HtmlBuf *o, const char *s, int property) {
    const char *special = property ? "%\r\n:," : "%\r\n";
    while (*s) {
        size_t run = strcspn(s, special);
        if (run) {
            char raw[4096], esc[16384];
            size_t n = run < sizeof raw ? run : sizeof raw - 1;
            memcpy(raw, s, n);
            raw[n] = 0;
            hb_puts(o, fp_escape(raw, esc, sizeof esc));
            s += n;
            continue;
        }
        char pct[4];
        snprintf(pct, sizeof pct, "%%%02X", (unsigned char)*s++);
        hb_puts(o, pct);
    }
}

static void github(const CheckResult *r, const char *baseline, HtmlBuf *o) {
    for (int i = 0; i < r->n_items; i++) {
        const CheckItem *it = &r->items[i];
        if (it->ok) {
            char msg[2048];
            hb_puts(o, "ok: ");
            hb_puts(o, fp_escape(it->message, msg, sizeof msg));
            hb_puts(o, "\n");
            continue;
        }
        hb_puts(o, "::error file=");
        gh_escape(o, baseline, 1);
        hb_puts(o, ",title=");
        char title[400];
        snprintf(title, sizeof title, "fedpriv check: %s", it->bound_name);
        gh_escape(o, title, 1);
        hb_puts(o, "::");
        gh_escape(o, it->message, 0);
        hb_puts(o, "\n");
    }
    if (r->n_violations == 0)
        hb_printf(o, "::notice title=fedpriv check::all %d bounds hold (%d comparisons)\n", r->bounds, r->evaluations);
    else
        hb_printf(o, "check: %d violation%s (%d bounds, %d comparisons)\n", r->n_violations,
                  r->n_violations == 1 ? "" : "s", r->bounds, r->evaluations);
}

void check_format(const CheckResult *r, CheckFormat format, const char *dir, const char *baseline, HtmlBuf *o) {
    switch (format) {
    case CHECK_JSON: json(r, dir, baseline, o); break;
    case CHECK_JUNIT: junit(r, baseline, o); break;
    case CHECK_GITHUB: github(r, baseline, o); break;
    default: text(r, baseline, o); break;
    }
}
