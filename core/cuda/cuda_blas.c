// cuBLAS, opened when the CUDA backend initialises rather than linked into fedpriv.
//
// Why: linking libcublas maps it (and libcublasLt, about 540 MB on disk) at every
// start-up, and relocating it touches about 220 MB of pages: `fedpriv --help` took 0.5 s
// and 240 MB of resident memory in a CUDA build against 0.06 s and 25 MB without, for
// every run, including CPU-only ones, every MPI rank and every process a matrix starts.
// Opened here, only a run that uses the GPU pays it. fedpriv calls four cuBLAS entry
// points; they are looked up by their exported names (cublas_v2.h maps cublasCreate and
// cublasSgemm to the *_v2 symbols), from the library whose major version matches the
// headers this was compiled against. The search follows dlopen(3): LD_LIBRARY_PATH, then
// the executable's run path (the Makefile sets it to the toolkit's lib64).
#include <dlfcn.h>
#include <stdio.h>

#include "core/cuda/cuda_internal.h"

#define CUDA_BLAS_STR_(x) #x
#define CUDA_BLAS_STR(x) CUDA_BLAS_STR_(x)
#define CUDA_BLAS_SONAME "libcublas.so." CUDA_BLAS_STR(CUBLAS_VER_MAJOR)

const char *cuda_blas_soname(void) { return CUDA_BLAS_SONAME; }

FpStatus cuda_blas_load(CudaBlasApi *api, FpError *err) {
    void *lib = dlopen(CUDA_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return fp_fail(err, FP_EBACKEND, "cannot open cuBLAS (%s): %s", CUDA_BLAS_SONAME, why ? why : "not found");
    }
    static const struct {
        const char *symbol;
        size_t offset;
    } entries[] = {
        {"cublasCreate_v2", offsetof(CudaBlasApi, create)},
        {"cublasSetMathMode", offsetof(CudaBlasApi, set_math_mode)},
        {"cublasGetStatusString", offsetof(CudaBlasApi, status_string)},
        {"cublasSgemm_v2", offsetof(CudaBlasApi, sgemm)},
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        void *f = dlsym(lib, entries[i].symbol);
        if (!f) {
            dlclose(lib);
            return fp_fail(err, FP_EBACKEND, "%s has no %s (a cuBLAS older than these headers?)", CUDA_BLAS_SONAME,
                           entries[i].symbol);
        }
        // POSIX guarantees that a dlsym result converts to a function pointer.
        *(void **)((char *)api + entries[i].offset) = f;
    }
    api->library = lib; // kept open for the process's life, like the linked library was
    return FP_OK;
}
