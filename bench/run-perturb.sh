#!/usr/bin/env bash
# Perturbation throughput of the local-DP mechanisms on a 10^7-element upload (one
# thread). Builds the library if needed, links bench/perturb_bench.c against it and
# runs it. Usage: bash bench/run-perturb.sh [ELEMENTS [RUNS]]
set -euo pipefail
cd "$(dirname "$0")/.."
make -s fedpriv >/dev/null || true   # (re)builds the library; copying ./fedpriv may fail while it runs
LIB="$(make -s --no-print-directory print-build)/libfedpriv.a"
OUT=$(dirname "$LIB")/perturb-bench
gcc -std=c11 -D_GNU_SOURCE -O3 -march=native -I. $(pkg-config --cflags libcjson) bench/perturb_bench.c "$LIB" $(pkg-config --libs libcjson) -lm -o "$OUT"
"$OUT" "$@"
