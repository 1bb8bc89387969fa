#!/usr/bin/env bash
# `make demo`: runs fixtures/demo.json (Fashion-MNIST; no defense, SPM corrected,
# Gaussian DP-FedAvg and Adaptive-Harmony at three values of epsilon each, against DLG,
# iDLG, ML-Leaks, CS-MIA, Basic-MIA and offline LiRA), audits the local-DP mechanisms at
# the same epsilons, and writes the HTML report. About 4 minutes on 2 cores.
#
# The run is resumable: interrupt it and run it again, and finished cells are kept.
# Environment: FEDPRIV (the binary, default ./fedpriv), DEMO_OUT (default build/demo),
# DEMO_JOBS (cells at once, default the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${FEDPRIV:-./fedpriv}"
out="${DEMO_OUT:-build/demo}"
jobs="${DEMO_JOBS:-$(nproc 2>/dev/null || echo 2)}"
[ -x "$bin" ] || { echo "demo: $bin is missing (make fedpriv builds it)" >&2; exit 1; }
start=$(date +%s)

"$bin" matrix fixtures/demo.json --out "$out" --jobs "$jobs"

# Audit findings for the report: bias, variance and an epsilon lower bound of each
# local-DP mechanism at the demo's epsilons (fedpriv audit --json, 10^6 draws per input).
mkdir -p "$out/audit"
audit() { # name variant epsilon [options...]
  local name=$1 variant=$2 eps=$3
  shift 3
  "$bin" audit --mechanism "$name" --variant "$variant" --epsilon "$eps" --samples 1000000 "$@" \
    --json --out "$out/audit/$name-$variant-eps$eps.json" > /dev/null
}
for eps in 1 4 10; do
  audit spm corrected "$eps"
  audit adaptive-harmony corrected "$eps" --clip 1 --dim 10
done
audit spm paper 1   # the published variant, for its bias factor

"$bin" report "$out" -o "$out/report.html" --title "fedpriv demo report"
echo "demo: done in $(( $(date +%s) - start )) s; open $out/report.html in a browser"
