#!/usr/bin/env bash
# DLG benchmark: the same job in fedpriv and in PyTorch (Debian's python3-torch).
# LeNet with sigmoids, every weight and bias U(-0.5, 0.5), Fashion-MNIST test image 0
# (28x28), dummy image and soft label from N(0, 1), exact second-order gradient
# matching, L-BFGS with PyTorch's defaults, 300 steps. One thread on both sides (the
# closures are far too small for BLAS threads to help). Each side runs REPEATS times
# (default 3), alternating, and the median is reported: milliseconds per closure
# evaluation (CPU time of the process, and wall time), total optimisation time,
# evaluations, final matching loss and SSIM. The two runs draw different weights and
# dummies (Philox vs torch's generator), so evaluation counts differ; the per-evaluation
# time is the like-for-like number. A last line times the closure alone at a fixed point
# (bench/dlg_closure.c: no L-BFGS, no start-up; its checksum of the loss and gradient
# bits compares builds for bit-identical results).
# Usage: bash bench/run-dlg.sh [repeats]      (bench/run.sh runs it too)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-${REPEATS:-3}}"
build=build/bench
mkdir -p "$build"
[ -x ./fedpriv ] || make fedpriv
bash bench/link.sh bench/dlg_closure.c "$build/dlg_closure"
/usr/bin/python3 -c "import torch, skimage" 2>/dev/null || \
  bash tools/install-deps.sh --missing python3-torch python3-numpy python3-skimage
fm="${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ ! -f "$fm/t10k-images-idx3-ubyte.gz" ]; then
  echo "run-dlg.sh: Fashion-MNIST not found in $fm (make deps installs it)" >&2
  exit 2
fi
cat > "$build/dlg-job.json" <<EOF
{"seed": 1,
 "dataset": {"name": "fashion-mnist", "path": "$fm", "split": "test"},
 "model": {"name": "lenet", "init": "uniform"},
 "attack": {"name": "dlg", "images": [0], "batch_size": 1, "steps": 300, "restarts": 1, "attacker": "single"},
 "defense": {"name": "none"}}
EOF
echo "== DLG: LeNet-sigmoid U(-0.5,0.5), Fashion-MNIST test image 0, L-BFGS 300 steps, 1 thread, median of $repeats" >&2
: > "$build/dlg-torch.jsonl"
: > "$build/dlg-fedpriv.jsonl"
for r in $(seq "$repeats"); do
  OPENBLAS_NUM_THREADS=1 ./fedpriv attack dlg --config "$build/dlg-job.json" --out "$build/dlg-fedpriv" --threads 1 2>/dev/null
  cat "$build/dlg-fedpriv/result.json" | /usr/bin/python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)))" \
    >> "$build/dlg-fedpriv.jsonl"
  FASHION_MNIST_DIR="$fm" /usr/bin/python3 bench/dlg_bench.py --image 0 --threads 1 >> "$build/dlg-torch.jsonl"
done
/usr/bin/python3 - "$build" <<'PY'
import json, statistics, sys
b = sys.argv[1]
fp = [json.loads(l) for l in open(f"{b}/dlg-fedpriv.jsonl")]
tp = [json.loads(l) for l in open(f"{b}/dlg-torch.jsonl")]
med = lambda rs, k: statistics.median(r[k] for r in rs)
f_cpu, f_wall = med(fp, "cpu_ms_per_evaluation"), med(fp, "ms_per_evaluation")
t_cpu, t_wall = med(tp, "cpu_ms_per_evaluation"), med(tp, "ms_per_evaluation")
f, t = fp[0], tp[0]
print(f"fedpriv : {f_cpu:6.3f} ms/evaluation CPU ({f_wall:6.3f} wall), {f['closure_evaluations']:5d} evaluations, "
      f"{med(fp, 'optimisation_seconds'):6.2f} s, loss {f['images'][0]['matching_loss']:.3g}, SSIM {f['ssim_mean']:.4f}")
print(f"pytorch : {t_cpu:6.3f} ms/evaluation CPU ({t_wall:6.3f} wall), {t['closure_evaluations']:5d} evaluations, "
      f"{med(tp, 'seconds'):6.2f} s, loss {t['matching_loss']:.3g}, SSIM {t['ssim']:.4f} (torch {t['torch']})")
print(f"ratio   : {t_cpu / f_cpu:6.2f} x PyTorch per evaluation (CPU time; wall {t_wall / f_wall:.2f} x)")
PY
OPENBLAS_NUM_THREADS=1 "$build/dlg_closure" 2000 5 | /usr/bin/python3 -c "import json,sys; c=json.load(sys.stdin); print(f\"closure : {c['cpu_us_per_evaluation'] / 1000:6.3f} ms/evaluation CPU at a fixed point (median of {c['runs']} x {c['evaluations']}; checksum {c['checksum']})\")"
