// The one rule for numbers that are not finite, in everything fedpriv writes (results,
// cells, exports, stdout). JSON has no infinity and no NaN, so:
//
//   JSON   finite -> a number, printed so that it reads back to the same double
//          +inf   -> the string "inf"      -inf -> the string "-inf"
//          NaN    -> null                  (no value: diverged, not defined, not run)
//   CSV    finite -> the shortest %.15g / %.16g / %.17g that reads back to the same double
//          +inf   -> inf                   -inf -> -inf     NaN -> an empty field
//
// pandas (read_csv, and float() in Python's csv module) and R (read.csv) read the CSV
// forms back as numbers, infinities included, and an empty field as missing.
// Readers accept a number, "inf" or "-inf"; null, absent or anything else is NaN.
// Writers call jnum_add / jnum_create; jnum_print (used by jv_write_file_atomic) applies
// the rule to any non-finite number still in a tree, so no writer can fall back to
// cJSON's own "null" for an infinity.
#ifndef FEDPRIV_CORE_JSON_NUMBER_H
#define FEDPRIV_CORE_JSON_NUMBER_H

#include <cjson/cJSON.h>
#include <stddef.h>

// A JSON item for v by the rule (NULL only when out of memory).
cJSON *jnum_create(double v);
// obj[key] = jnum_create(v); returns the item (NULL when out of memory).
cJSON *jnum_add(cJSON *obj, const char *key, double v);
// The number an item stands for: a number, "inf" / "-inf"; NaN otherwise (NULL included).
double jnum_value(const cJSON *item);
// 1 when the item is a number or "inf" / "-inf" (a value, possibly infinite).
int jnum_is_value(const cJSON *item);
// The CSV / text form of v into buf (at least 32 bytes): the shortest exact decimal,
// "inf", "-inf" or "" (NaN).
// Returns buf.
const char *jnum_text(double v, char *buf, size_t n);
// The JSON text of a tree (formatted or compact) with the rule applied to every number,
// printed by jv_print (integers of 1e15 and more in full); malloc'd (free()), NULL when
// out of memory.
char *jnum_print(const cJSON *json, int formatted);

#endif
