// Backend selection at run time. This is the one place that knows whether the CUDA
// backend was compiled in.
#include "core/backend.h"

#include <string.h>

#ifdef FEDPRIV_HAVE_CUDA
const Backend *cuda_backend_get(FpError *err); // core/cuda/
#endif

const Backend *backend_cuda(FpError *err) {
#ifdef FEDPRIV_HAVE_CUDA
    return cuda_backend_get(err);
#else
    fp_fail(err, FP_EUNSUPPORTED, "this fedpriv was built without the CUDA backend (CUDA=0, or no nvcc at build time)");
    return NULL;
#endif
}

const Backend *backend_by_name(const char *name, FpError *err) {
    if (!name || strcmp(name, "cpu") == 0)
        return backend_cpu();
    if (strcmp(name, "cuda") == 0)
        return backend_cuda(err);
    fp_fail(err, FP_EPARAM, "unknown device \"%s\" (expected cpu or cuda)", name);
    return NULL;
}
