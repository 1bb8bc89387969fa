// Strict, validating reads from cJSON objects. Every failure names the JSON path
// ("federation.lr: must be > 0, got -1") so the CLI can print one clear line and exit 2.
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

// Reads obj[key] as a number in [lo, hi] (lo_open / hi_open make the bound strict).
// When absent: error if required, else *out = def.
FpStatus jv_number(const cJSON *obj, const char *path, const char *key, int required, double def, double lo,
                   int lo_open, double hi, int hi_open, double *out, FpError *err);
// An integer in [lo, hi].
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

// Reads and parses a JSON file. Missing file → FP_EIO, bad JSON → FP_EFORMAT with the line.
FpStatus jv_load_file(const char *filename, cJSON **out, FpError *err);

// Writes JSON to filename atomically: a temp file beside it ("FILE.tmp.HOST.PID",
// core/proc.h), fsync, rename. A failed write leaves any earlier file untouched and no
// partial file behind; a killed one leaves only the temp file.
FpStatus jv_write_file_atomic(const char *filename, const cJSON *json, FpError *err);

#endif
