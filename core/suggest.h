// "Did you mean" for an unknown name: the one rule every registry lookup (defenses,
// attacks, models, datasets, mechanisms), every unknown-key error of a config and every
// unknown command-line option uses to suggest the nearest known name.
//
// Distance: Damerau-Levenshtein in its optimal-string-alignment form (insert, delete,
// substitute one character, or swap two adjacent ones; each costs 1), ASCII letters
// compared without case, so "DP-SGD", "dpsgd", "dp-sdg" all reach "dp-sgd". A name is
// suggested when it is the nearest (the first of equals, in the caller's order) and its
// distance is at most max(1, min(3, strlen(given) / 3)): a slip, not a different word.
//
//     FpSuggest s;
//     fp_suggest_begin(&s, name);
//     for (int i = 0; i < defense_count(); i++)
//         fp_suggest_add(&s, defense_at(i)->name);
//     fp_fail(err, FP_EPARAM, "unknown defense \"%s\"%s", name, fp_did_you_mean(&s, " (", ")", hint, sizeof hint));
#ifndef FEDPRIV_CORE_SUGGEST_H
#define FEDPRIV_CORE_SUGGEST_H

#include <stddef.h>

// Names longer than this are never compared (nor suggested): the distance is then "far".
#define FP_SUGGEST_MAX_LEN 64

// The distance above between a and b, or FP_SUGGEST_MAX_LEN + 1 when either is longer
// than FP_SUGGEST_MAX_LEN.
int fp_edit_distance(const char *a, const char *b);

// The nearest candidate so far (best is NULL until one is near enough).
typedef struct {
    const char *given;
    const char *best;
    int dist;
} FpSuggest;

void fp_suggest_begin(FpSuggest *s, const char *given);
// Considers one known name (NULL is ignored; so is one equal to given).
void fp_suggest_add(FpSuggest *s, const char *candidate);
// Every name of a NULL-terminated list.
void fp_suggest_add_list(FpSuggest *s, const char *const *names);

// A registry that can only be asked "is there one of this name?" (a DefenseFindFn): the
// first name at distance 1 from given that exists(name, ctx) accepts (deletions, swaps,
// substitutions, then insertions of a-z, 0-9, '-', '_', '.'). Stored in buf (n bytes);
// becomes s->best when s has nothing nearer.
void fp_suggest_probe(FpSuggest *s, int (*exists)(const char *name, const void *ctx), const void *ctx, char *buf,
                      size_t n);

// before + "did you mean \"NAME\"?" + after into buf (n bytes), or "" when there is no
// suggestion; returns buf. The name is printed as given (control characters cannot
// occur: only known names are suggested).
const char *fp_did_you_mean(const FpSuggest *s, const char *before, const char *after, char *buf, size_t n);

#endif
