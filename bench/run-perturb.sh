#!/usr/bin/env bash
# Perturbation throughput of the local-DP mechanisms on a 10^7-element upload (one
# thread), the safe and the float samplers side by side, and the federated defenses' Gaussian
# and Laplace noise (bench/perturb_bench.c, linked
# against the library make builds). Usage: bash bench/run-perturb.sh [ELEMENTS [RUNS]]
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(make -s --no-print-directory print-build)/perturb-bench"
bash bench/link.sh bench/perturb_bench.c "$out"
"$out" "$@"
