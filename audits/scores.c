// Score files and the membership report (audits/scores.h). The CSV reader is its own,
// not datasets/csv.c's: scores are kept as doubles, so that a file audit-training wrote
// with %.17g reads back bit for bit and the bound it gives is the same.
#include "audits/scores.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audits/mechanism.h"
#include "core/files.h"
#include "datasets/npy.h"
#include "eval/roc.h"

#define SCORES_MAX_FILE ((size_t)1 << 32)
#define SCORES_MAX_ROWS (1 << 28)

static const char *const kind_names[] = {"membership", "one-run", "multi-run", NULL};

const char *scores_kind_name(ScoresKind k) { return k >= 0 && k <= SCORES_MULTI_RUN ? kind_names[k] : NULL; }

ScoresKind scores_kind_parse(const char *s) {
    for (int i = 0; s && kind_names[i]; i++)
        if (strcmp(s, kind_names[i]) == 0)
            return (ScoresKind)i;
    return SCORES_KIND_UNKNOWN;
}

void scores_free(ScoreTable *t) {
    for (int k = 0; k < TRAINING_AUDIT_MAX_SCORES; k++) {
        free(t->names[k]);
        free(t->score[k]);
    }
    free(t->bit);
    memset(t, 0, sizeof *t);
}

TrainingAuditScores scores_view(const ScoreTable *t) {
    TrainingAuditScores v = {.n = t->n, .n_scores = t->n_scores, .in = t->bit};
    for (int k = 0; k < t->n_scores; k++) {
        v.names[k] = t->names[k];
        v.score[k] = t->score[k];
    }
    return v;
}

static FpStatus alloc_columns(ScoreTable *t, int n, FpError *err) {
    t->n = n;
    t->bit = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int ok = t->bit != NULL;
    for (int k = 0; k < t->n_scores; k++)
        ok &= (t->score[k] = malloc(sizeof(double) * (size_t)(n ? n : 1))) != NULL;
    return ok ? FP_OK : fp_fail(err, FP_ENOMEM, "out of memory for %d scores", n);
}

static FpStatus set_bit(ScoreTable *t, int i, double v, const char *path, int line, FpError *err) {
    if (v != 0 && v != 1)
        return fp_fail(err, FP_EFORMAT, "%s:%d: the %s bit is %g (0 or 1)", path, line,
                       t->bit_is_member ? "member" : "in", v);
    t->bit[i] = (int)v;
    return FP_OK;
}

// ---- .npy -------------------------------------------------------------------------------------

static FpStatus read_npy(const char *path, const unsigned char *buf, size_t len, ScoreTable *t, FpError *err) {
    NpyArray a;
    FP_TRY(npy_parse(path, buf, len, &a, err));
    if (a.ndim != 2 || a.shape[1] < 2 || a.shape[1] > 1 + TRAINING_AUDIT_MAX_SCORES || a.shape[0] > SCORES_MAX_ROWS)
        return fp_fail(err, FP_EFORMAT, "%s: scores as .npy are an N x K array, column 0 the bits and 1 to %d score "
                       "columns (%d dimensions here)", path, TRAINING_AUDIT_MAX_SCORES, a.ndim);
    t->n_scores = (int)a.shape[1] - 1;
    t->kind_from_file = SCORES_KIND_UNKNOWN;
    t->bit_is_member = 1;
    for (int k = 0; k < t->n_scores; k++) {
        char nm[24]; // "score" and any int: no truncation
        if (t->n_scores == 1)
            snprintf(nm, sizeof nm, "score");
        else
            snprintf(nm, sizeof nm, "score%d", k + 1);
        if (!(t->names[k] = strdup(nm)))
            return fp_fail(err, FP_ENOMEM, "out of memory");
    }
    FP_TRY(alloc_columns(t, (int)a.shape[0], err));
    size_t K = (size_t)a.shape[1];
    for (int i = 0; i < t->n; i++) {
        FP_TRY(set_bit(t, i, npy_get(&a, (size_t)i * K), path, i + 1, err));
        for (int k = 0; k < t->n_scores; k++) {
            double v = npy_get(&a, (size_t)i * K + 1 + (size_t)k);
            if (isnan(v))
                return fp_fail(err, FP_EFORMAT, "%s: row %d: score %d is NaN", path, i, k + 1);
            t->score[k][i] = v;
        }
    }
    return FP_OK;
}

// ---- CSV --------------------------------------------------------------------------------------

// The next line [*s, end of line) of [s, end), without its line end; NULL at the end.
static char *next_line(char **s, char *end, int *line) {
    while (*s < end) {
        char *a = *s, *e = memchr(a, '\n', (size_t)(end - a));
        if (!e)
            e = end;
        *s = e < end ? e + 1 : end;
        (*line)++;
        if (e > a && e[-1] == '\r')
            e--;
        *e = 0;
        if (e > a)
            return a;
    }
    return NULL;
}

static int plain_name(const char *s) {
    if (!*s || strlen(s) > 48)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-' || *s == '.'))
            return 0;
    return 1;
}

static FpStatus read_csv(const char *path, char *buf, size_t len, ScoreTable *t, FpError *err) {
    if (memchr(buf, 0, len))
        return fp_fail(err, FP_EFORMAT, "%s: not a text file (NUL bytes; .npy scores must be named *.npy)", path);
    char *s = buf, *end = buf + len;
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
        s += 3; // a UTF-8 byte-order mark, as spreadsheets write
    int line = 0;
    char *h = next_line(&s, end, &line);
    if (!h)
        return fp_fail(err, FP_EFORMAT, "%s: empty file (a header row is required)", path);
    int hline = line;
    // Columns: role -1 the id, -2 the bit, k >= 0 score k.
    enum { MAX_COLS = TRAINING_AUDIT_MAX_SCORES + 2 };
    int role[MAX_COLS], ncol = 0, bit_col = -1, id_col = -1;
    t->kind_from_file = SCORES_KIND_UNKNOWN;
    for (char *f = h;; ncol++) {
        char *comma = strchr(f, ',');
        if (comma)
            *comma = 0;
        if (ncol == MAX_COLS)
            return fp_fail(err, FP_EFORMAT, "%s:%d: more than %d columns (a bit, an id and at most %d scores)", path,
                           hline, MAX_COLS, TRAINING_AUDIT_MAX_SCORES);
        if (!plain_name(f)) {
            char e[64];
            return fp_fail(err, FP_EFORMAT, "%s:%d:%d: column name \"%s\" (letters, digits, '_', '-', '.'; no "
                           "quoting)", path, hline, ncol + 1, fp_escape(f, e, sizeof e));
        }
        for (int j = 0; j < ncol; j++) {
            const char *other = role[j] >= 0 ? t->names[role[j]] : NULL;
            if (other && strcmp(other, f) == 0)
                return fp_fail(err, FP_EFORMAT, "%s:%d:%d: duplicate column \"%s\"", path, hline, ncol + 1, f);
        }
        int is_bit = strcmp(f, "member") == 0 || strcmp(f, "in") == 0;
        int is_id = strcmp(f, "canary") == 0 || strcmp(f, "run") == 0 || strcmp(f, "id") == 0;
        if ((is_bit && bit_col >= 0) || (is_id && id_col >= 0))
            return fp_fail(err, FP_EFORMAT, "%s:%d:%d: a second %s column \"%s\"", path, hline, ncol + 1,
                           is_bit ? "bit" : "id", f);
        if (is_bit) {
            bit_col = ncol;
            role[ncol] = -2;
            t->bit_is_member = f[0] == 'm';
        } else if (is_id) {
            id_col = ncol;
            role[ncol] = -1;
            if (strcmp(f, "id") != 0)
                t->kind_from_file = f[0] == 'c' ? SCORES_ONE_RUN : SCORES_MULTI_RUN;
        } else {
            if (t->n_scores == TRAINING_AUDIT_MAX_SCORES)
                return fp_fail(err, FP_EFORMAT, "%s:%d: more than %d score columns", path, hline,
                               TRAINING_AUDIT_MAX_SCORES);
            role[ncol] = t->n_scores;
            if (!(t->names[t->n_scores++] = strdup(f)))
                return fp_fail(err, FP_ENOMEM, "out of memory");
        }
        if (!comma)
            break;
        f = comma + 1;
    }
    ncol++;
    if (bit_col < 0)
        return fp_fail(err, FP_EFORMAT, "%s:%d: no bit column: \"member\" (membership scores) or \"in\" (canaries, "
                       "runs)", path, hline);
    if (t->n_scores == 0)
        return fp_fail(err, FP_EFORMAT, "%s:%d: no score column", path, hline);
    if (t->kind_from_file == SCORES_KIND_UNKNOWN)
        t->kind_from_file = t->bit_is_member ? SCORES_MEMBERSHIP : SCORES_ONE_RUN;
    // Rows: count them first, so the columns are allocated once and never beyond the file.
    int rows = 0;
    for (char *p = s; p < end; p++)
        rows += *p == '\n';
    rows += end > s && end[-1] != '\n';
    if (rows > SCORES_MAX_ROWS)
        return fp_fail(err, FP_EFORMAT, "%s: more than %d rows", path, SCORES_MAX_ROWS);
    FP_TRY(alloc_columns(t, rows, err));
    int n = 0;
    char *r;
    while ((r = next_line(&s, end, &line))) {
        int j = 0;
        for (char *f = r;; j++) {
            char *comma = strchr(f, ',');
            if (comma)
                *comma = 0;
            if (j >= ncol)
                return fp_fail(err, FP_EFORMAT, "%s:%d: more fields than the header's %d", path, line, ncol);
            char *e;
            errno = 0;
            double v = strtod(f, &e);
            while (*e == ' ' || *e == '\t')
                e++;
            if (e == f || *e || isnan(v)) {
                char b[64];
                return fp_fail(err, FP_EFORMAT, "%s:%d:%d: not a number: \"%s\"", path, line, j + 1,
                               fp_escape(f, b, sizeof b));
            }
            if (role[j] == -2)
                FP_TRY(set_bit(t, n, v, path, line, err));
            else if (role[j] >= 0)
                t->score[role[j]][n] = v;
            if (!comma)
                break;
            f = comma + 1;
        }
        if (j + 1 != ncol)
            return fp_fail(err, FP_EFORMAT, "%s:%d: %d fields, the header has %d", path, line, j + 1, ncol);
        n++;
    }
    if (n == 0)
        return fp_fail(err, FP_EFORMAT, "%s: no rows after the header", path);
    t->n = n;
    return FP_OK;
}

FpStatus scores_read(const char *path, ScoreTable *out, FpError *err) {
    memset(out, 0, sizeof *out);
    char *buf = NULL;
    size_t len = 0;
    FP_TRY(fp_read_input(path, SCORES_MAX_FILE, &buf, &len, err));
    size_t n = strlen(path);
    FpStatus st = n > 4 && strcmp(path + n - 4, ".npy") == 0
                      ? read_npy(path, (const unsigned char *)buf, len, out, err)
                      : read_csv(path, buf, len, out, err);
    free(buf);
    if (st != FP_OK)
        scores_free(out);
    return st;
}

// ---- membership ---------------------------------------------------------------------------------

// The upper p-quantile of the standard normal, z with P[Z > z] = p (0 < p < 1), by
// bisection on 0.5·erfc(z/√2): exact to double precision, and p is not hot.
static double normal_upper_quantile(double p) {
    double lo = -40, hi = 40;
    for (int it = 0; it < 200 && hi - lo > 1e-15; it++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(mid / sqrt(2.0)) > p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

static void add_interval(cJSON *o, const char *key, double lo, double hi) {
    cJSON *a = cJSON_AddArrayToObject(o, key);
    cJSON_AddItemToArray(a, cJSON_CreateNumber(lo));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(hi));
}

FpStatus scores_membership(const ScoreTable *t, double confidence, cJSON *res, FpError *err) {
    if (t->n_scores != 1)
        return fp_fail(err, FP_EPARAM, "membership scores: one score column, %d given", t->n_scores);
    Roc roc;
    FP_TRY(roc_compute(t->score[0], t->bit, t->n, &roc, err));
    double a = roc.auc, P = roc.n_pos, N = roc.n_neg, alpha = 1 - confidence;
    // Hanley & McNeil 1982: Var(AUC) = (A(1−A) + (P−1)(Q1 − A²) + (N−1)(Q2 − A²)) / (P N),
    // Q1 = A/(2 − A), Q2 = 2A²/(1 + A); a normal interval, cut to [0, 1].
    double q1 = a / (2 - a), q2 = 2 * a * a / (1 + a);
    double var = (a * (1 - a) + (P - 1) * (q1 - a * a) + (N - 1) * (q2 - a * a)) / (P * N);
    double z = normal_upper_quantile(alpha / 2), half = z * sqrt(var > 0 ? var : 0);
    cJSON_AddStringToObject(res, "score", t->names[0]);
    cJSON_AddNumberToObject(res, "auc", a);
    add_interval(res, "auc_interval", fmax(0, a - half), fmin(1, a + half));
    cJSON *tf = cJSON_AddObjectToObject(res, "tpr_at_fpr");
    cJSON *ti = cJSON_AddObjectToObject(res, "tpr_at_fpr_interval");
    static const struct {
        const char *key;
        double fpr;
    } at[] = {{"0.01", 0.01}, {"0.001", 0.001}, {"0", 0}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        double tpr = roc_tpr_at_fpr(&roc, at[i].fpr);
        long long found = llround(tpr * P);
        cJSON_AddNumberToObject(tf, at[i].key, tpr);
        add_interval(ti, at[i].key, audit_cp_lower(found, (long long)P, alpha / 2),
                     audit_cp_upper(found, (long long)P, alpha / 2));
    }
    cJSON_AddStringToObject(res, "tpr_at_fpr_rule", "TPR of the last ROC point with FPR <= t (member iff score >= "
                                                    "threshold); intervals: two-sided Clopper-Pearson of the members "
                                                    "found at that point");
    cJSON_AddStringToObject(res, "auc_interval_rule", "Hanley-McNeil 1982 normal interval");
    cJSON_AddNumberToObject(res, "best_balanced_accuracy", roc_best_balanced_accuracy(&roc, NULL));
    cJSON_AddNumberToObject(res, "best_advantage", roc_advantage(&roc, NULL));
    cJSON_AddNumberToObject(res, "members", P);
    cJSON_AddNumberToObject(res, "non_members", N);
    roc_free(&roc);
    return FP_OK;
}
