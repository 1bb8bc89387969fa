#!/usr/bin/env bash
# CPU benchmarks: the same federated job in fedpriv and in PyTorch (Debian's
# python3-torch, same thread count), the GEMM floor from a measured sgemm rate, and the
# other benchmarks present in bench/ (perturbation throughput, DLG).
#
# The first block is wall-clock time at `threads` threads; it only means something on an
# otherwise idle machine. The second block ("CPU time") is the same job timed in CPU
# seconds, one thread on both sides (bench/mlp_cpu.c, with the GEMM floor measured in the
# same process; PyTorch's process CPU time), which holds on a busy machine too.
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
bash bench/link.sh bench/mlp_cpu.c "$build/mlp_cpu"
command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c "import torch" 2>/dev/null || \
  bash tools/install-deps.sh --missing python3-torch python3-numpy

echo "== MLP federated job: Fashion-MNIST, 784-256-10, 10 clients, E=1, B=64, lr 0.05, 5 rounds, $threads threads" >&2
# Both sides' threads pinned alike: OpenMP, OpenBLAS (PyTorch's own BLAS too, which
# torch.set_num_threads does not reach) and MKL, plus torch.set_num_threads (BENCH_THREADS).
pin() { OMP_NUM_THREADS="$1" OPENBLAS_NUM_THREADS="$1" MKL_NUM_THREADS="$1" BENCH_THREADS="$1" "${@:2}"; }
pin "$threads" ./fedpriv train --config bench/mlp-job.json --threads "$threads" --out "$build/fedpriv-mlp.json"
pin "$threads" /usr/bin/python3 bench/mlp_torch.py > "$build/torch-mlp.json"
pin "$threads" "$build/sgemm_rate" "$threads" > "$build/sgemm.json"
echo "== the same job in CPU time, 1 thread: fedpriv (median of 3, GEMM floor measured beside it) and PyTorch" >&2
pin 1 "$build/mlp_cpu" bench/mlp-job.json 1 3 > "$build/fedpriv-mlp-cpu.json"
pin 1 /usr/bin/python3 bench/mlp_torch.py 2>/dev/null > "$build/torch-mlp-1.json"
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
fc = json.load(open(f"{b}/fedpriv-mlp-cpu.json"))
t1 = json.load(open(f"{b}/torch-mlp-1.json"))
print("CPU time, 1 thread (samples per CPU second):")
print(f"fedpriv : {fc['samples_per_cpu_s']:10.0f} samples/s  (train {fc['cpu_seconds']:.2f} CPU s, final accuracy {fc['test_accuracy']:.4f})")
print(f"pytorch : {t1['samples_per_cpu_s']:10.0f} samples/s  (train {t1['train_cpu_seconds']:.2f} CPU s, final accuracy {t1['accuracy'][-1]:.4f})")
print(f"ratio   : {fc['samples_per_cpu_s'] / t1['samples_per_cpu_s']:10.2f} x PyTorch")
print(f"floor   : {fc['floor_samples_per_cpu_s']:10.0f} samples/s from the job's GEMMs alone")
print(f"of floor: {fc['of_floor'] * 100:10.1f} %")
PY
# Inverting Gradients end to end (run-ig.sh) is more than an hour on two cores at its
# default 2000 L-BFGS steps; `make bench` times it at BENCH_IG_STEPS steps (100 unless
# set), which is enough for the per-evaluation ratio but not for the recovery columns:
# `bash bench/run-ig.sh` alone runs the full length.
for extra in bench/run-*.sh; do
  [ -f "$extra" ] || continue
  if [ "$extra" = bench/run-ig.sh ]; then
    STEPS="${BENCH_IG_STEPS:-100}" bash "$extra"
  else
    bash "$extra"
  fi
done
exit 0
