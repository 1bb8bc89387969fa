#!/usr/bin/env bash
# `make demo`: runs fixtures/demo.json (a cross-silo federation of 10 Fashion-MNIST clients
# where every attack leaks without a defense; DP-SGD and client-noise DP-FedAvg at three
# epsilon each, server-noise DP-FedAvg, SPM corrected and Adaptive-Harmony corrected once;
# two seeds; iDLG on the federation's own mlp, RMIA and LiRA on client 0's upload), audits
# the local-DP mechanisms at the same epsilons, and writes the HTML report
# (docs/report.md, "The demo", gives its time and CPU time).
#
# The run is resumable: interrupt it and run it again, and finished cells are kept.
# Environment: FEDPRIV (the binary, default ./fedpriv), DEMO_MATRIX (default
# fixtures/demo.json; fixtures/demo-small.json is the one-minute version CI runs),
# DEMO_OUT (default build/demo for fixtures/demo.json, build/demo-NAME for another matrix
# NAME.json: a run folder holds one matrix, so the two demos never refuse each other's
# folder), DEMO_JOBS (cells at once, default the number of cores),
# DEMO_AUDIT_SAMPLES (draws per audit input, default 10^6).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${FEDPRIV:-./fedpriv}"
matrix="${DEMO_MATRIX:-fixtures/demo.json}"
name="$(basename "$matrix" .json)"
if [ "$name" = demo ]; then default_out=build/demo; else default_out="build/demo-$name"; fi
out="${DEMO_OUT:-$default_out}"
jobs="${DEMO_JOBS:-$(nproc 2>/dev/null || echo 2)}"
samples="${DEMO_AUDIT_SAMPLES:-1000000}"
[ -x "$bin" ] || { echo "demo: $bin is missing (make fedpriv builds it)" >&2; exit 1; }
[ -f "$matrix" ] || { echo "demo: $matrix: no such matrix file" >&2; exit 1; }
start=$(date +%s)
echo "demo: $matrix into $out, $jobs cells at a time (load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo ?))"

"$bin" matrix "$matrix" --out "$out" --jobs "$jobs"

# Audit findings for the report: bias, variance and an epsilon lower bound of each
# local-DP mechanism at the demo's epsilons (fedpriv audit --json).
mkdir -p "$out/audit"
audit() { # name variant epsilon [options...]
  local name=$1 variant=$2 eps=$3
  shift 3
  "$bin" audit --mechanism "$name" --variant "$variant" --epsilon "$eps" --samples "$samples" "$@" \
    --json --out "$out/audit/$name-$variant-eps$eps.json" > /dev/null
}
audit spm corrected 1
audit adaptive-harmony corrected 4 --clip 0.5 --dim 10
audit spm paper 1   # the published variant, for its bias factor

"$bin" report "$out" -o "$out/report.html" --title "fedpriv demo report"
echo "demo: done in $(( $(date +%s) - start )) s (load average now: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo ?)); open $out/report.html in a browser"
