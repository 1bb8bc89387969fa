// libFuzzer target: reference-model cache entries (attacks/refcache.c refcache_load).
//
// The input is the whole entry file, placed where the fixed identity "fuzz-identity"
// looks for it; the lookup asks for 3 queries (indices 3, 10, 17, content hashes 1, 2, 3)
// of 2 classes, as the seeds hold them. A load is a hit with the seed's 6 logits, a miss,
// or an error that says why; it never reads outside the file or trusts its counts.
#include <stdio.h>
#include <unistd.h>

#include "attacks/refcache.h"
#include "fuzz/fuzz_util.h"

static char dir[128], path[256];

static void cleanup(void) {
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const id = "fuzz-identity";
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s", fuzz_tmpdir());
        refcache_path(dir, id, path, sizeof path);
        atexit(cleanup);
    }
    fuzz_write(path, data, size);
    const uint32_t q[3] = {3, 10, 17};
    const uint64_t c[3] = {1, 2, 3};
    float logits[6];
    double acc;
    int hit = 0;
    FpError err = {0};
    unsigned char member[3];
    FpStatus st = refcache_load(dir, id, q, c, 3, 2, logits, member, &acc, &hit, &err);
    if ((st != FP_OK && (!err.msg[0] || hit)) || (st == FP_OK && hit != 0 && hit != 1))
        abort();
    return 0;
}
