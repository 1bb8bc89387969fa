// A small fixed matrix run directory for fuzz_matrix and fuzz_baseline: an index
// (results.json) with three cells, their cell files and one audit record, in the format
// of runner/matrix.h. fuzz_run_dir_make writes it under dir; either target then
// overwrites one of its files with the fuzzed input.
#ifndef FEDPRIV_FUZZ_RUN_DIR_H
#define FEDPRIV_FUZZ_RUN_DIR_H

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz/fuzz_util.h"

static const char fuzz_index_json[] =
    "{\"seed\": 1, \"cells\": ["
    "{\"id\": \"none-1\", \"label\": \"none\", \"defense\": \"none\", \"spec_hash\": \"h1\", \"status\": \"done\"},"
    "{\"id\": \"spm-2\", \"label\": \"spm eps 1\", \"defense\": \"spm\", \"variant\": \"corrected\", \"epsilon\": 1,"
    " \"spec_hash\": \"h2\", \"status\": \"done\"},"
    "{\"id\": \"gdp-3\", \"label\": \"gaussian-dpfedavg eps 2\", \"defense\": \"gaussian-dpfedavg\", \"epsilon\": 2,"
    " \"spec_hash\": \"h3\", \"status\": \"diverged\"}]}";

static const char *const fuzz_cell_json[3] = {
    "{\"spec_hash\": \"h1\", \"status\": \"done\", \"spec\": {\"defense\": {\"name\": \"none\"}},"
    " \"model\": {\"test_accuracy\": 0.81, \"test_loss\": 0.5},"
    " \"privacy\": {\"nominal\": {\"epsilon_total\": null}, \"sound\": {\"epsilon_total\": \"inf\"}},"
    " \"attacks\": [{\"name\": \"dlg\", \"status\": \"done\", \"headline\": \"ssim_mean\", \"value\": 0.95,"
    " \"result\": {\"ssim_mean\": 0.95, \"tpr_at_fpr.0.01\": 0.1, \"per\": {\"a\": [1, 2]}}}]}",
    "{\"spec_hash\": \"h2\", \"status\": \"done\", \"spec\": {\"defense\": {\"name\": \"spm\", \"epsilon\": 1}},"
    " \"model\": {\"test_accuracy\": 0.6, \"test_loss\": 1.1},"
    " \"privacy\": {\"nominal\": {\"epsilon_total\": 5}, \"sound\": {\"epsilon_total\": 50}},"
    " \"attacks\": [{\"name\": \"dlg\", \"status\": \"failed\", \"message\": \"x\"},"
    " {\"name\": \"ml-leaks\", \"status\": \"done\", \"value\": 0.52, \"result\": {\"balanced_accuracy\": 0.52}}]}",
    "{\"spec_hash\": \"h3\", \"status\": \"diverged\", \"message\": \"NaN in round 2\", \"model\": {}}"};

static const char fuzz_audit_json[] =
    "[{\"mechanism\": \"spm\", \"variant\": \"corrected\", \"epsilon\": 1, \"epsilon_lower_bound\": 0.8},"
    " {\"mechanism\": \"laplace\", \"epsilon\": 2, \"epsilon_lower_bound\": 2.5}]";

static const char *const fuzz_cell_ids[3] = {"none-1", "spm-2", "gdp-3"};

static inline void fuzz_run_dir_make(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/cells", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/audit", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/results.json", dir);
    fuzz_write(p, fuzz_index_json, strlen(fuzz_index_json));
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/cells/%s.json", dir, fuzz_cell_ids[i]);
        fuzz_write(p, fuzz_cell_json[i], strlen(fuzz_cell_json[i]));
    }
    snprintf(p, sizeof p, "%s/audit/a.json", dir);
    fuzz_write(p, fuzz_audit_json, strlen(fuzz_audit_json));
}

static inline void fuzz_run_dir_remove(const char *dir) {
    char p[512];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/cells/%s.json", dir, fuzz_cell_ids[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/audit/a.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/results.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/cells", dir);
    rmdir(p);
    snprintf(p, sizeof p, "%s/audit", dir);
    rmdir(p);
}

#endif
