#!/usr/bin/env bash
# DP-SGD step benchmark: one local step of DP-SGD (per-example gradients, clipping at C = 1,
# Gaussian noise σ = 1 on the sum) against one ordinary step, in fedpriv (bench/dpsgd_step.c)
# and in PyTorch (bench/dpsgd_torch.py) with per-example gradients from functorch's vmap and
# from microbatches of one, on Fashion-MNIST training records. One thread on both sides
# (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS and torch.set_num_threads), process
# CPU time (holds on a busy machine), medians of REPEATS rounds, the three PyTorch steps
# interleaved. The load average is printed before and after.
# Prints, per model and batch size: ms per ordinary step, PyTorch's ordinary step and how
# many times faster fedpriv's is, ms per DP-SGD step (the safe sampler, dp-sgd's default),
# their ratio, the same with the float sampler (the step's noise before the safe sampler),
# the ratio without the noise draws, PyTorch's DP-SGD step with vmap and with microbatches,
# and fedpriv's speed-up over the faster of the two (PyTorch's best way for that model and
# batch).
# Usage: bash bench/run-dpsgd.sh [repeats]      (bench/run.sh runs it too)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-${REPEATS:-3}}"
build=build/bench
mkdir -p "$build"
bash bench/link.sh bench/dpsgd_step.c "$build/dpsgd_step"
/usr/bin/python3 -c "import torch" 2>/dev/null || bash tools/install-deps.sh --missing python3-torch python3-numpy
export FASHION_MNIST_DIR="${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
# PyTorch runs on the same system OpenBLAS and oneDNN, so OPENBLAS_CORETYPE (when set) picks
# both sides' GEMM kernels alike; the kernel set in use is printed with the load.
kernels=$("$build/dpsgd_step" --kernels 2>/dev/null || echo unknown)
echo "== DP-SGD step vs ordinary step, 1 thread, CPU time, median of $repeats; OpenBLAS $kernels kernels; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
: > "$build/dpsgd-fedpriv.jsonl"
: > "$build/dpsgd-torch.jsonl"
for job in "mlp 64" "mlp 256" "mlp 1024" "cnn-mnist 64" "cnn-mnist 256" "lenet 64" "lenet 256"; do
  set -- $job
  steps=$(( 6400 / $2 > 40 ? 40 : 6400 / $2 ))
  tsteps=$(( 1280 / $2 > 10 ? 10 : (1280 / $2 > 2 ? 1280 / $2 : 2) ))
  "$build/dpsgd_step" "$1" "$2" "$steps" "$repeats" >> "$build/dpsgd-fedpriv.jsonl"
  /usr/bin/python3 bench/dpsgd_torch.py "$1" "$2" "$tsteps" "$repeats" >> "$build/dpsgd-torch.jsonl"
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
/usr/bin/python3 - "$build" <<'PY'
import json, sys
b = sys.argv[1]
fp = [json.loads(l) for l in open(f"{b}/dpsgd-fedpriv.jsonl")]
tp = [json.loads(l) for l in open(f"{b}/dpsgd-torch.jsonl")]
print(f"{'model':10s} {'B':>5s} | {'step ms':>8s} {'torch step':>10s} {'step x':>6s} | {'DP ms':>8s} {'DP/step':>7s} | {'float ms':>8s} "
      f"{'float/step':>10s} | {'no-noise':>8s} | {'torch vmap':>10s} {'torch micro':>11s} {'vs best':>8s}")
for f, t in zip(fp, tp):
    best = min(t['dpsgd_vmap_ms_per_step'], t['dpsgd_ms_per_step'])
    print(f"{f['model']:10s} {f['batch']:5d} | {f['ms_per_step']:8.3f} {t['ms_per_step']:10.3f} "
          f"{t['ms_per_step'] / f['ms_per_step']:5.2f}x | {f['dpsgd_ms_per_step']:8.3f} "
          f"{f['ratio']:7.2f} | {f['dpsgd_float_ms_per_step']:8.3f} "
          f"{f['dpsgd_float_ms_per_step'] / f['ms_per_step']:10.2f} | "
          f"{f['dpsgd_no_noise_ms_per_step'] / f['ms_per_step']:8.2f} | "
          f"{t['dpsgd_vmap_ms_per_step']:10.2f} {t['dpsgd_ms_per_step']:11.2f} {best / f['dpsgd_ms_per_step']:7.2f}x")
print(f"(PyTorch {tp[0]['torch']}, its ordinary step: " +
      ", ".join(f"{t['model']} B={t['batch']} {t['ms_per_step']:.2f} ms" for t in tp) + ")")
PY
