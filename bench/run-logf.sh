#!/usr/bin/env bash
# The exhaustive check of the kernels' float log (bench/logf_check.c). Usage: bash bench/run-logf.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(make -s --no-print-directory print-build)/logf-check"
bash bench/link.sh bench/logf_check.c "$out"
"$out"
