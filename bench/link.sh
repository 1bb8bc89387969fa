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
# The compile and link flags come from the Makefile, so a library it gains (or a backend
# it found: CUDA, Open MPI) is never missing here. (A `nm | grep -q` probe under pipefail
# used to fail with SIGPIPE and silently drop Open MPI's flags.)
cflags=$(make -s --no-print-directory print-compile-flags)
ldflags=$(make -s --no-print-directory print-link-flags)
# shellcheck disable=SC2086
cc $cflags -O2 "$1" "$lib" $ldflags ${BENCH_LDFLAGS:-} -o "$2"
