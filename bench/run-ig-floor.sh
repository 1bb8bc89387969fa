#!/usr/bin/env bash
# Where an Inverting Gradients closure evaluation spends its time, on both sides, one
# thread each: fedpriv's closure (bench/ig_closure.c) with its OpenBLAS sgemm calls timed
# (linked with --wrap=cblas_sgemm; packing included), and the PyTorch port's closure
# (bench/ig_bench.py --time-closure) with its convolution kernels' self time (oneDNN's and
# ATen's, from torch.profiler). The GEMMs are the part of fedpriv's closure that no change
# outside OpenBLAS can make faster: where they alone take longer than a fifth of PyTorch's
# closure, fedpriv cannot be 5x faster per evaluation with OpenBLAS computing its
# convolutions ("floor" column: GEMM time / (PyTorch time / 5), above 1 means so).
# Thread CPU time. fedpriv's closure: the median of 3 processes of bench/ig_closure (each
# the median of 3 runs of N evaluations at the model's default initialisation; separate
# processes spread by 5% here, once by 20%), its GEMMs from one process of the wrapped
# build (whose timing adds about 40 ns a call). PyTorch's: the median of 3 runs of N on the
# first batch of Fashion-MNIST test images (the closure's cost does not depend on the
# values).
#
# Usage: bash bench/run-ig-floor.sh
#   MODELS="lenet cnn-mnist" BATCHES="1 4 8" LOCAL="1 5" N=100 TV=1e-4
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/bench
mkdir -p "$build/ig"
export OPENBLAS_NUM_THREADS=1
bash bench/link.sh bench/ig_closure.c "$build/ig_closure"
BENCH_LDFLAGS=-Wl,--wrap=cblas_sgemm bash bench/link.sh bench/ig_closure.c "$build/ig_closure_gemm"
bash bench/link.sh bench/ig_weights.c "$build/ig_weights"
/usr/bin/python3 -c "import torch, skimage, scipy" 2>/dev/null || \
  bash tools/install-deps.sh --missing python3-torch python3-numpy python3-skimage python3-scipy
MODELS="${MODELS:-lenet cnn-mnist}"; BATCHES="${BATCHES:-1 4 8}"; LOCAL="${LOCAL:-1 5}"
N="${N:-100}"; TV="${TV:-1e-4}"
field() { grep -o "\"$1\": [0-9.e+-]*" | head -1 | cut -d' ' -f2; }
echo "blas: $(./fedpriv --version | grep -o 'OpenBLAS [^;]*' || echo unknown)"
printf '%-10s %2s %2s | %-26s | %-26s | %6s | %5s\n' model B E "fedpriv ms: closure, GEMM" \
  "pytorch ms: closure, conv" ratio floor
for m in $MODELS; do
  "$build/ig_weights" "$m" default 1 "$build/ig/$m.bin" >/dev/null
  for e in $LOCAL; do
    for b in $BATCHES; do
      fu=$(for r in 1 2 3; do "$build/ig_closure" "$m" "$b" "$e" "$N" 3 | field cpu_us_per_evaluation; done |
        sort -g | sed -n 2p)
      gu=$("$build/ig_closure_gemm" "$m" "$b" "$e" "$N" 3 | field gemm_us_per_evaluation)
      images=$(seq -s, 0 $((b - 1)))
      pt=$(/usr/bin/python3 bench/ig_bench.py --model "$m" --weights "$build/ig/$m.bin" --images "$images" \
        --batch "$b" --local-steps "$e" --tv "$TV" --time-closure "$N")
      pm=$(echo "$pt" | field cpu_ms_per_evaluation); pc=$(echo "$pt" | field conv_kernel_ms_per_evaluation)
      awk -v m="$m" -v b="$b" -v e="$e" -v fu="$fu" -v gu="$gu" -v pm="$pm" -v pc="$pc" 'BEGIN {
        printf "%-10s %2d %2d | %7.3f %7.3f (%3.0f%%)     | %7.3f %7.3f (%3.0f%%)     | %5.2fx | %5.2f\n",
          m, b, e, fu / 1e3, gu / 1e3, 100 * gu / fu, pm, pc, 100 * pc / pm, pm * 1e3 / fu, gu / 1e3 / (pm / 5) }'
    done
  done
done
