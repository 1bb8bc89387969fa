// Strict, validating reads from cJSON objects. Every failure names the JSON path
// ("federation.lr: must be > 0, got -1") so the CLI can print one clear line and exit 2.
//
// Every JSON file fedpriv reads goes through jv_load_file (or jv_parse for text in
// memory): cJSON parses, and a strict scanner (core/jsonv_text.c) checks the text beside
// the tree, rejecting what cJSON lets through: duplicate keys, \u0000, raw control
// characters in strings, leading zeros, bytes that are not UTF-8, numbers a double cannot
// hold. Failures read "FILE:LINE:COLUMN: JSON.PATH: what".
#ifndef FEDPRIV_CORE_JSONV_H
#define FEDPRIV_CORE_JSONV_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "core/status.h"

// Range flags for jv_number / jv_int.
#define JV_OPTIONAL 0
#define JV_REQUIRED 1

// Fails on any key of obj not in allowed (NULL-terminated). obj must be an object.
FpStatus jv_keys(const cJSON *obj, const char *path, const char *const *allowed, FpError *err);
// 1 when key is in list (NULL-terminated; a NULL list holds nothing).
int jv_key_in(const char *key, const char *const *list);

// Fails when obj has both keys a and b (options that replace each other).
FpStatus jv_exclusive(const cJSON *obj, const char *path, const char *a, const char *b, FpError *err);

// Reads obj[key] as a number in [lo, hi] (lo_open / hi_open make the bound strict).
// When absent: error if required, else *out = def.
FpStatus jv_number(const cJSON *obj, const char *path, const char *key, int required, double def, double lo,
                   int lo_open, double hi, int hi_open, double *out, FpError *err);
// An integer in [lo, hi], read exactly: from the number's text where a double may not
// hold it (jv_parse keeps the text of literals with 16+ significant digits), so
// 4503599627370496.5 is not an integer and 9007199254740993 is not 9007199254740992.
FpStatus jv_int(const cJSON *obj, const char *path, const char *key, int required, long long def, long long lo,
                long long hi, long long *out, FpError *err);
FpStatus jv_bool(const cJSON *obj, const char *path, const char *key, int def, int *out, FpError *err);
// A string; *out points into the cJSON tree (or at def).
FpStatus jv_string(const cJSON *obj, const char *path, const char *key, int required, const char *def,
                   const char **out, FpError *err);
// A string that must be one of choices (NULL-terminated); *out = its index.
FpStatus jv_choice(const cJSON *obj, const char *path, const char *key, const char *const *choices, int def,
                   int *out, FpError *err);
// An object (or NULL when absent and optional).
FpStatus jv_object(const cJSON *obj, const char *path, const char *key, int required, const cJSON **out,
                   FpError *err);
// An array of numbers; *out malloc'd (caller frees), *n its length. min_len/max_len bound the length.
FpStatus jv_number_array(const cJSON *obj, const char *path, const char *key, int required, int min_len,
                         int max_len, double **out, int *n, FpError *err);

// "parent.key" into buf (size n); returns buf.
const char *jv_path(char *buf, size_t n, const char *parent, const char *key);

// Reads and parses a JSON file strictly (jv_parse): a user's file given by path (a link
// is followed, core/files.h fp_read_input), a regular file of at most 1 GiB (a FIFO is
// refused, not waited on). Missing file → FP_EIO, bad JSON or not a regular file →
// FP_EFORMAT with the line, the column and the JSON path.
FpStatus jv_load_file(const char *filename, cJSON **out, FpError *err);

// Reads dir/rel strictly like jv_load_file, but only from inside dir: no link at any
// component, no "..", a regular file (core/files.h fp_read_beneath). For the files of a
// run folder that fedpriv reads back. *missing (when not NULL) is 1 when it does not exist.
FpStatus jv_load_beneath(const char *dir, const char *rel, cJSON **out, int *missing, FpError *err);

// Parses len bytes of text (text[len] must be 0) as one strict JSON value; name is for
// messages. On failure *out is NULL.
FpStatus jv_parse(const char *name, const char *text, size_t len, cJSON **out, FpError *err);

// A number literal's text read exactly: 1 (and *out) when it is an integer that fits a
// long long, -1 when it is an integer that does not, 0 when it is not an integer.
int jv_text_integer(const char *text, long long *out);

// JSON text of j (formatted or compact; free() it), with every integral number of
// magnitude 1e15 .. 2^63 written in full ("5000000000000001", where cJSON's 15
// significant digits would write 5e+15): seeds and counts come back as they went out.
// NULL when out of memory.
char *jv_print(const cJSON *j, int formatted);

// Writes JSON (jnum_print: the non-finite rule, then jv_print) to filename atomically: a
// new temp file beside it ("FILE.tmp.HOST.PID", core/proc.h; created exclusively, never through a link), fsync,
// rename. A failed write leaves any earlier file untouched and no partial file behind; a
// killed one leaves only the temp file.
FpStatus jv_write_file_atomic(const char *filename, const cJSON *json, FpError *err);

#endif
