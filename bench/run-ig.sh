#!/usr/bin/env bash
# Inverting Gradients benchmark: `fedpriv attack inverting-gradients` and its PyTorch port
# (bench/ig_bench.py, Debian's python3-torch, CPU) on the same Fashion-MNIST test images
# and the same initial weights (bench/ig_weights.c: model_init with the job's seed; the
# victims are observed at their first participation, round 1, whose global weights
# these are). Per setting (model, batch B, local steps E): recovered fraction (SSIM >=
# 0.9), mean SSIM and PSNR after the optimal assignment, label accuracy, CPU ms per
# closure evaluation on each side, and their ratio. One thread on both sides. No defense;
# federation lr 0.01, full-batch local steps (batch_size 64), default initialisation.
#
# Usage: bash bench/run-ig.sh
#   MODELS="lenet cnn-mnist" BATCHES="1 4 8" LOCAL="1 5" IMAGES="0 1 2 3 4 5 6 7"
#   STEPS=2000 RESTARTS=1 TV=1e-4 TORCH=1 (0: fedpriv only) TORCH_IMAGES (default IMAGES)
#   TORCH_STEPS (default STEPS)
#   BASELINE=path/to/another/fedpriv: also time that build on the same jobs, in the same
#   run (its ms per evaluation and ratio to PyTorch in a last column), to compare builds
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/bench
mkdir -p "$build/ig"
[ -x ./fedpriv ] || make fedpriv
bash bench/link.sh bench/ig_weights.c "$build/ig_weights"
fm="${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ ! -f "$fm/t10k-images-idx3-ubyte.gz" ]; then
  echo "run-ig.sh: Fashion-MNIST not found in $fm (make deps installs it)" >&2
  exit 2
fi
MODELS="${MODELS:-lenet cnn-mnist}"; BATCHES="${BATCHES:-1 4 8}"; LOCAL="${LOCAL:-1 5}"
IMAGES="${IMAGES:-0 1 2 3 4 5 6 7}"; STEPS="${STEPS:-2000}"; RESTARTS="${RESTARTS:-1}"; TV="${TV:-1e-4}"
TORCH="${TORCH:-1}"; TORCH_IMAGES="${TORCH_IMAGES:-$IMAGES}"; TORCH_STEPS="${TORCH_STEPS:-$STEPS}"
if [ "$TORCH" = 1 ]; then
  /usr/bin/python3 -c "import torch, skimage, scipy" 2>/dev/null || \
    bash tools/install-deps.sh --missing python3-torch python3-numpy python3-skimage python3-scipy
fi
BASELINE="${BASELINE:-}"
comma() { echo "$*" | tr ' ' ','; }
if [ "$STEPS" -lt 2000 ] || [ "$TORCH_STEPS" -lt 2000 ]; then
  echo "== Inverting Gradients at $STEPS steps (PyTorch $TORCH_STEPS): a timing run; the ms/eval ratio holds, the recovery columns need the default 2000 steps" >&2
fi
printf '%-10s %2s %2s | %-44s | %-44s | %s%s\n' model B E "fedpriv: recovered SSIM PSNR labels ms/eval" \
  "pytorch: recovered SSIM PSNR labels ms/eval" "ratio" "${BASELINE:+ | baseline: ms/eval ratio}"
for m in $MODELS; do
  "$build/ig_weights" "$m" default 1 "$build/ig/$m.bin" >/dev/null
  for E in $LOCAL; do
    for B in $BATCHES; do
      tag="$m-b$B-e$E"
      local_key=""
      [ "$E" -gt 1 ] && local_key=', "local": "federation"'
      cat > "$build/ig/$tag.json" <<EOF
{"seed": 1,
 "dataset": {"name": "fashion-mnist", "path": "$fm", "split": "test"},
 "model": {"name": "$m", "init": "default"},
 "federation": {"clients": 16, "local_steps": $E, "batch_size": 64, "lr": 0.01},
 "attack": {"name": "inverting-gradients", "images": [$(comma $IMAGES)], "batch_size": $B,
            "steps": $STEPS, "restarts": $RESTARTS, "tv": $TV, "snapshot_every": 0$local_key},
 "defense": {"name": "none"}}
EOF
      rm -rf "$build/ig/$tag" "$build/ig/$tag-baseline" # a finished run directory would be resumed, not timed
      OPENBLAS_NUM_THREADS=1 ./fedpriv attack inverting-gradients --config "$build/ig/$tag.json" \
        --out "$build/ig/$tag" --threads 1 2>/dev/null
      f=$(/usr/bin/python3 -c "
import json; r = json.load(open('$build/ig/$tag/result.json'))
print(f\"{r['recovered_fraction']:5.3f} {r['ssim_mean']:6.3f} {r['psnr_mean']:6.2f} {r.get('label_multiset_accuracy', 0):5.3f} {r['cpu_ms_per_evaluation']:7.3f}\")")
      t="-"; ratio="-"
      if [ "$TORCH" = 1 ]; then
        /usr/bin/python3 bench/ig_bench.py --model "$m" --weights "$build/ig/$m.bin" --images "$(comma $TORCH_IMAGES)" \
          --batch "$B" --local-steps "$E" --fed-lr 0.01 --steps "$TORCH_STEPS" --restarts "$RESTARTS" --tv "$TV" \
          --threads 1 > "$build/ig/$tag-torch.json"
        t=$(/usr/bin/python3 -c "
import json; r = json.load(open('$build/ig/$tag-torch.json'))
print(f\"{r['recovered_fraction']:5.3f} {r['ssim_mean']:6.3f} {r['psnr_mean']:6.2f} {r['label_multiset_accuracy']:5.3f} {r['cpu_ms_per_evaluation']:7.3f}\")")
        ratio=$(echo "$f $t" | awk '{printf "%.2fx", $10 / $5}')
      fi
      base=""
      if [ -n "$BASELINE" ]; then
        OPENBLAS_NUM_THREADS=1 "$BASELINE" attack inverting-gradients --config "$build/ig/$tag.json" \
          --out "$build/ig/$tag-baseline" --threads 1 2>/dev/null
        base=$(/usr/bin/python3 -c "
import json; r = json.load(open('$build/ig/$tag-baseline/result.json'))
print(f\"{r['cpu_ms_per_evaluation']:7.3f}\")")
        bratio="-"
        [ "$TORCH" = 1 ] && bratio=$(echo "$base $t" | awk '{printf "%.2fx", $6 / $1}')
        base=" | $base $bratio"
      fi
      printf '%-10s %2s %2s | %-44s | %-44s | %s%s\n' "$m" "$B" "$E" "$f" "$t" "$ratio" "$base"
    done
  done
done
