#!/usr/bin/env bash
# Builds a benchmark program against the fedpriv library that make built (with the CUDA
# libraries when the library holds the CUDA backend, Open MPI's when it was built with
# MPI). Run from the repository root.
# Usage: bash bench/link.sh SOURCE.c OUTPUT   (BENCH_LDFLAGS, if set, go to the linker)
set -euo pipefail
make -s fedpriv >/dev/null || true   # (re)builds the library; copying ./fedpriv may fail while it runs
lib="$(make -s --no-print-directory print-build)/libfedpriv.a"
if [ ! -f "$lib" ]; then
  echo "bench/link.sh: $lib is missing (make failed? run make to see why)" >&2
  exit 2
fi
cuda_libs=""
if ar t "$lib" | grep -q '\.cu\.o$'; then
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  cuda_home=${nvcc%/bin/nvcc}
  cuda_libs="-L$cuda_home/lib64 -Wl,-rpath,$cuda_home/lib64 -lcudnn -lcudart -lstdc++ -ldl"
fi
mpi_libs=""
if nm "$lib" 2>/dev/null | grep -q ' U MPI_Init_thread$'; then # built with MPI (core/comm.c)
  mpi_libs=$(mpicc --showme:link)
fi
cc -std=c11 -D_GNU_SOURCE -O2 -I. $(pkg-config --cflags libcjson openblas) "$1" "$lib" \
  $(pkg-config --libs vips libcjson libpng zlib openblas fftw3l libprotobuf-c) $cuda_libs $mpi_libs -lm -pthread ${BENCH_LDFLAGS:-} -o "$2"
