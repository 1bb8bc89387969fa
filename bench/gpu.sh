#!/usr/bin/env bash
# The GPU check, one script for a machine with an NVIDIA GPU (finishes in well under 8
# minutes on an H100/H200):
#   1. build (or use the prebuilt .gpu/ from tools/pack-gpu.sh),
#   2. the CPU-vs-CUDA tests (every op, first and second order, RNG streams, a short
#      federated run and a DLG run on both backends),
#   3. a federated round in fedpriv on the GPU vs PyTorch on the same GPU: mlp and
#      cnn-cifar on random CIFAR-shaped data,
#   4. DLG (LeNet-sigmoid, one Fashion-MNIST image, 300 L-BFGS steps) on the GPU, fedpriv
#      vs PyTorch with create_graph=True,
#   5. one DP-SGD step (cnn-mnist and mlp, batch 256) on the GPU, fedpriv vs PyTorch with
#      per-example gradients from microbatches of one,
#   6. Inverting Gradients (LeNet-sigmoid and cnn-mnist; batch 1, 4, 8; 1 and 5 local
#      steps simulated) on the GPU, fedpriv vs its PyTorch port (bench/ig_bench.py) on the
#      same images and initial weights,
# and prints the ratios. Outputs go to $OUT (or build/gpu): summary.txt, log.txt and
# results.tar.gz with every result JSON (few files, since few come back from a lent machine).
set -u
cd "$(dirname "$0")/.."
out="${OUT:-build/gpu}"   # what comes back: summary.txt, log.txt and results.tar.gz
work=/tmp/fedpriv-gpu
res="$work/results"
mkdir -p "$out" "$work" "$res"
exec > >(tee -a "$out/log.txt") 2>&1
log() { echo "== $*" | tee -a "$out/summary.txt"; }
py=python3

if [ -x .gpu/fedpriv ]; then
  bin=.gpu/fedpriv tests=.gpu/fedpriv-tests
  mkdir -p /tmp/fedpriv-libs && tar -C /tmp/fedpriv-libs -xJf .gpu/libs.tar.xz
  extra=/tmp/fedpriv-libs/libs
  # cuBLAS and cuDNN from the GPU machine: the toolkit's, or PyTorch's wheels.
  for lib in libcudnn.so.9 libcublas.so.13 libcudart.so.13; do
    f=$(find /usr/local/cuda/lib64/ /usr/local/cuda*/ /opt /usr/lib /usr/local/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$f" ] && extra="$extra:$(dirname "$f")"
  done
  export LD_LIBRARY_PATH="$extra:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  fm="$PWD/.gpu/fashion-mnist"
  ig_weights=.gpu   # ig-lenet.bin and ig-cnn-mnist.bin, written by bench/ig_weights
else
  make -j"$(nproc)" CUDA=1 MPI=0 fedpriv build/release/fedpriv-tests || exit 1
  bin=build/release/fedpriv tests=build/release/fedpriv-tests
  fm=/usr/share/datasets/fashion-mnist
  ig_weights="$work"
  bash bench/link.sh bench/ig_weights.c "$work/ig_weights" || exit 1
  for m in lenet cnn-mnist; do "$work/ig_weights" $m default 1 "$work/ig-$m.bin" >/dev/null; done
fi
nvidia-smi -L 2>&1 | tee -a "$out/summary.txt"
ldd "$bin" | grep -E "not found" && { echo "missing libraries"; exit 1; }

log "CPU-vs-CUDA tests"
FEDPRIV_BIN=$PWD/$bin FEDPRIV_REQUIRE_CUDA=1 FEDPRIV_FASHION_MNIST_DIR=$fm FP_TEST_SUITE=cuda \
  timeout 240 "$tests" > "$work/cuda-tests.txt" 2>&1
cp "$work/cuda-tests.txt" "$res/"   # every line, in results.tar.gz
grep -E "^cuda|^x\(|SKIP|Checks|:F:|:E:|error" "$work/cuda-tests.txt" | grep -v "pool" | cut -c1-300 | tail -70

log "random CIFAR-shaped data"
$py tools/make-random-cifar.py /tmp/rcifar 20000 2000 1
for model in mlp cnn-cifar; do
  cat > /tmp/fed-$model.json <<JSON
{"seed": 1, "dataset": {"name": "cifar10", "path": "/tmp/rcifar"}, "model": {"name": "$model"},
 "federation": {"clients": 10, "rounds": 2, "local_epochs": 1, "batch_size": 64, "lr": 0.05},
 "defense": {"name": "none"}, "device": "cuda"}
JSON
  log "federated rounds, $model, fedpriv on the GPU"
  timeout 120 "$bin" train --config /tmp/fed-$model.json --out "$res/fedpriv-$model.json" 2>&1 | tail -2
  log "federated rounds, $model, PyTorch on the GPU"
  timeout 120 $py bench/fed_torch.py --model $model --data cifar /tmp/rcifar --device cuda --rounds 2 \
    > "$res/torch-$model.json" 2>/dev/null; cat "$res/torch-$model.json"
done

log "DLG on the GPU: fedpriv"
cat > /tmp/dlg.json <<JSON
{"seed": 1, "dataset": {"name": "fashion-mnist", "path": "$fm", "split": "test"},
 "model": {"name": "lenet", "init": "uniform"},
 "attack": {"name": "dlg", "images": [0], "batch_size": 1, "steps": 300, "restarts": 1, "attacker": "single"},
 "defense": {"name": "none"}, "device": "cuda"}
JSON
timeout 120 "$bin" attack dlg --config /tmp/dlg.json --out "$work/dlg-fedpriv" 2>&1 | tail -2
cp "$work/dlg-fedpriv/result.json" "$res/dlg-fedpriv.json" 2>/dev/null
log "DLG on the GPU: PyTorch"
FASHION_MNIST_DIR="$fm" timeout 120 $py bench/dlg_bench.py --device cuda --image 0 \
  --steps 300 > "$res/dlg-torch.json" 2>/dev/null; cat "$res/dlg-torch.json"

log "DP-SGD step on the GPU (cnn-mnist and mlp, B=256): fedpriv, then PyTorch with microbatches of one"
dpsgd_bin=.gpu/dpsgd_step
[ -x "$dpsgd_bin" ] || { dpsgd_bin=build/bench/dpsgd_step; mkdir -p build/bench; bash bench/link.sh bench/dpsgd_step.c "$dpsgd_bin"; }
for model in cnn-mnist mlp; do
  FASHION_MNIST_DIR="$fm" timeout 60 "$dpsgd_bin" $model 256 20 3 cuda > "$res/dpsgd-fedpriv-$model.json"
  FASHION_MNIST_DIR="$fm" timeout 120 $py bench/dpsgd_torch.py $model 256 3 3 cuda > "$res/dpsgd-torch-$model.json" 2>/dev/null
  cat "$res/dpsgd-fedpriv-$model.json" "$res/dpsgd-torch-$model.json"
done

log "dp-sgd federation on the GPU and the CPU (Fashion-MNIST mlp, 10 clients, sigma 1, C 1, 1 round)"
for dev in cuda cpu; do
  cat > /tmp/dpsgd-fed-$dev.json <<JSON
{"seed": 1, "dataset": {"name": "fashion-mnist", "path": "$fm"}, "model": {"name": "mlp"},
 "federation": {"clients": 10, "rounds": 1, "local_epochs": 1, "batch_size": 64, "lr": 0.05},
 "defense": {"name": "dp-sgd", "clip": 1, "noise_multiplier": 1.0}, "device": "$dev", "threads": 16}
JSON
  timeout 200 "$bin" train --config /tmp/dpsgd-fed-$dev.json --out "$res/dpsgd-fed-$dev.json" 2>&1 | tail -1
done

ig_steps="${IG_STEPS:-300}"
log "Inverting Gradients on the GPU (B 1/4/8, 1 and 5 local steps, $ig_steps steps, images 0..B-1): fedpriv, then PyTorch"
for m in lenet cnn-mnist; do
  for setting in "1 1" "4 1" "8 1" "1 5" "4 5" "8 5"; do
    set -- $setting; B=$1 E=$2 tag="ig-$m-b$B-e$E"
    images=$(seq -s, 0 $((B - 1)))
    local_key=""; [ "$E" -gt 1 ] && local_key=', "local": "federation"'
    cat > "$work/$tag.json" <<JSON
{"seed": 1, "dataset": {"name": "fashion-mnist", "path": "$fm", "split": "test"},
 "model": {"name": "$m", "init": "default"},
 "federation": {"clients": 16, "local_steps": $E, "batch_size": 64, "lr": 0.01},
 "attack": {"name": "inverting-gradients", "images": [$images], "batch_size": $B, "steps": $ig_steps,
            "restarts": 1, "tv": 1e-4, "snapshot_every": 0$local_key},
 "defense": {"name": "none"}, "device": "cuda"}
JSON
    rm -rf "$work/$tag"
    timeout 120 "$bin" attack inverting-gradients --config "$work/$tag.json" --out "$work/$tag" >/dev/null 2>&1
    cp "$work/$tag/result.json" "$res/$tag-fedpriv.json" 2>/dev/null
    FASHION_MNIST_DIR="$fm" timeout 120 $py bench/ig_bench.py --model $m --weights "$ig_weights/ig-$m.bin" \
      --images "$images" --batch $B --local-steps $E --fed-lr 0.01 --steps $ig_steps --device cuda \
      > "$res/$tag-torch.json" 2>/dev/null
  done
done

log "ratios (same GPU)"
$py - "$res" <<'PY' | tee -a "$out/summary.txt"
import json, os, sys
o = sys.argv[1]
def load(p):
    try:
        return json.load(open(os.path.join(o, p)))
    except Exception as e:
        return None
for m in ("mlp", "cnn-cifar"):
    f, t = load(f"fedpriv-{m}.json"), load(f"torch-{m}.json")
    if f and t and f.get("rounds"):
        n = 20000 * len(f["rounds"])
        fs = n / sum(r["train_seconds"] for r in f["rounds"])
        print(f"federated {m:9s}: fedpriv {fs:9.0f} samples/s, pytorch {t['samples_per_s']:9.0f} samples/s, ratio {fs / t['samples_per_s']:.2f}x")
    else:
        print(f"federated {m}: missing result")
f, t = load("dlg-fedpriv.json"), load("dlg-torch.json")
if f and t:
    fm = f.get("ms_per_evaluation") or f.get("timing", {}).get("ms_per_evaluation")
    tm = t.get("ms_per_eval_wall") or t.get("ms_per_evaluation")
    print(f"DLG: fedpriv {fm} ms/evaluation (SSIM {f.get('ssim_mean')}), pytorch {tm} ms/evaluation (SSIM {t.get('ssim')})"
          + (f", ratio {tm / fm:.2f}x" if fm and tm else ""))
else:
    print("DLG: missing result")
for m in ("cnn-mnist", "mlp"):
    f, t = load(f"dpsgd-fedpriv-{m}.json"), load(f"dpsgd-torch-{m}.json")
    if f and t:
        print(f"DP-SGD step {m} B=256: fedpriv {f['dpsgd_ms_per_step']:.3f} ms ({f['ratio']:.2f}x its ordinary step), "
              f"pytorch microbatches {t['dpsgd_ms_per_step']:.2f} ms, ratio {t['dpsgd_ms_per_step'] / f['dpsgd_ms_per_step']:.1f}x")
    else:
        print(f"DP-SGD step {m}: missing result")
for m in ("lenet", "cnn-mnist"):
    for b, e in ((1, 1), (4, 1), (8, 1), (1, 5), (4, 5), (8, 5)):
        f, t = load(f"ig-{m}-b{b}-e{e}-fedpriv.json"), load(f"ig-{m}-b{b}-e{e}-torch.json")
        if f and t:
            print(f"IG {m:9s} B={b} E={e}: fedpriv {f['ms_per_evaluation']:7.3f} ms/closure (SSIM {f['ssim_mean']:.3f}), "
                  f"pytorch {t['ms_per_evaluation']:7.3f} ms/closure (SSIM {t['ssim_mean']:.3f}), "
                  f"ratio {t['ms_per_evaluation'] / f['ms_per_evaluation']:.2f}x")
        else:
            print(f"IG {m} B={b} E={e}: missing result")
PY
tar -C "$work" -czf "$out/results.tar.gz" results
exit 0
