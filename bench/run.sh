#!/usr/bin/env bash
# CPU benchmarks: the same federated job in fedpriv and in PyTorch (Debian's
# python3-torch, same thread count), the GEMM floor from a measured sgemm rate, and the
# other benchmarks present in bench/ (perturbation throughput, DLG).
# Usage: bash bench/run.sh [threads]   (default: all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-$(nproc)}"
build=build/bench
mkdir -p "$build"
BLAS_CFLAGS=$(pkg-config --cflags openblas)
BLAS_LIBS=$(pkg-config --libs openblas)
cc -O3 -march=native $BLAS_CFLAGS bench/sgemm_rate.c -o "$build/sgemm_rate" $BLAS_LIBS -pthread
[ -x ./fedpriv ] || make fedpriv
command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c "import torch" 2>/dev/null || \
  bash tools/install-deps.sh --missing python3-torch python3-numpy

echo "== MLP federated job: Fashion-MNIST, 784-256-10, 10 clients, E=1, B=64, lr 0.05, 5 rounds, $threads threads" >&2
./fedpriv train --config bench/mlp-job.json --threads "$threads" --out "$build/fedpriv-mlp.json"
BENCH_THREADS="$threads" /usr/bin/python3 bench/mlp_torch.py > "$build/torch-mlp.json"
"$build/sgemm_rate" "$threads" > "$build/sgemm.json"
/usr/bin/python3 - "$build" <<'PY'
import json, sys
b = sys.argv[1]
fp = json.load(open(f"{b}/fedpriv-mlp.json"))
tp = json.load(open(f"{b}/torch-mlp.json"))
sg = json.load(open(f"{b}/sgemm.json"))
train_s = sum(r["train_seconds"] for r in fp["rounds"])
samples = 60000 * len(fp["rounds"])
fps = samples / train_s
print(f"fedpriv : {fps:10.0f} samples/s  (train {train_s:.2f} s, final accuracy {fp['final']['test_accuracy']:.4f})")
print(f"pytorch : {tp['samples_per_s']:10.0f} samples/s  (train {tp['train_seconds']:.2f} s, final accuracy {tp['accuracy'][-1]:.4f}, torch {tp['torch']})")
print(f"ratio   : {fps / tp['samples_per_s']:10.2f} x PyTorch")
print(f"floor   : {sg['floor_samples_per_s']:10.0f} samples/s from sgemm {sg['sgemm_gflops']:.1f} GFLOP/s on the job's shapes")
print(f"of floor: {fps / sg['floor_samples_per_s'] * 100:10.1f} %")
PY
for extra in bench/run-*.sh; do
  [ -f "$extra" ] && bash "$extra"
done
exit 0
