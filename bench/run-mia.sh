#!/usr/bin/env bash
# Membership inference: the same offline LiRA (16 reference models) and RMIA (offline, the
# first 4 of them) procedure in fedpriv and in PyTorch (bench/mia_torch.py, Debian's
# python3-torch), on the overfit Fashion-MNIST client target of
# fixtures/mia/ml-leaks-overfit.json, for several seeds. fedpriv runs `attack lira` then
# `attack rmia` into a folder of its own that reads LiRA's reference models from LiRA's
# cache (--reference-models; each
# command trains its own target). Prints the AUCs and TPRs per seed, whether the two
# implementations agree within sampling error (the difference of the mean AUCs against
# twice its standard error over the seeds), and the time ratios: wall and CPU seconds of
# the procedure (data loading excluded on both sides), at the same thread count, with the
# machine's load average before and after.
# Usage: bash bench/run-mia.sh [threads] [seeds]   (default: 1 thread, seeds 1,2,3)
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-1}"
seeds="${2:-1,2,3}"
build=build/bench/mia
mkdir -p "$build"
[ -x ./fedpriv ] || make fedpriv
command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c "import torch, numpy" 2>/dev/null || \
  bash tools/install-deps.sh --missing python3-torch python3-numpy

# Both sides' threads pinned alike (OpenMP, OpenBLAS, MKL; torch.set_num_threads through
# BENCH_THREADS): PyTorch's own OpenBLAS otherwise runs a thread per core.
export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
echo "== MIA: offline LiRA (16 reference models) and RMIA (4), overfit Fashion-MNIST client target, $threads thread(s), seeds $seeds" >&2
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for s in ${seeds//,/ }; do
  out="$build/fedpriv-$s"
  rm -rf "$out"
  for n in 16 4; do
    /usr/bin/python3 - "$s" "$threads" "$n" > "$build/seed$s-$n.json" <<'PY'
import json, sys
c = json.load(open("fixtures/mia/ml-leaks-overfit.json"))
c["seed"], c["threads"] = int(sys.argv[1]), int(sys.argv[2])
c["attack"]["shadow_models"] = int(sys.argv[3])
print(json.dumps(c))
PY
  done
  mkdir -p "$out"
  ./fedpriv attack lira --config "$build/seed$s-16.json" --out "$out/lira" 2> "$out/lira.log" ||
    { echo "bench/run-mia.sh: fedpriv attack lira failed (seed $s):" >&2; tail -3 "$out/lira.log" >&2; exit 1; }
  cp "$out/lira/result.json" "$out/lira.json"
  ./fedpriv attack rmia --config "$build/seed$s-4.json" --out "$out/rmia" \
    --reference-models "$out/lira/reference-models" 2> "$out/rmia.log" ||
    { echo "bench/run-mia.sh: fedpriv attack rmia failed (seed $s):" >&2; tail -3 "$out/rmia.log" >&2; exit 1; }
  cp "$out/rmia/result.json" "$out/rmia.json"
  echo "fedpriv seed $s done" >&2
done
BENCH_THREADS="$threads" BENCH_SEEDS="$seeds" /usr/bin/python3 bench/mia_torch.py > "$build/torch.jsonl"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 - "$build" "$seeds" "$threads" "$load_before" "$load_after" <<'PY'
import json, math, sys
b, seeds, threads, lb, la = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3], sys.argv[4], sys.argv[5]
torch = {r["seed"]: r for r in map(json.loads, open(f"{b}/torch.jsonl"))}
rows, fw, fc, tw, tc = [], 0.0, 0.0, 0.0, 0.0
print(f"{'seed':>4} | {'fedpriv LiRA AUC':>16} {'TPR@1%':>6} | {'torch LiRA AUC':>14} {'TPR@1%':>6} | "
      f"{'fedpriv RMIA AUC':>16} {'TPR@1%':>6} | {'torch RMIA AUC':>14} {'TPR@1%':>6}")
for s in seeds:
    l = json.load(open(f"{b}/fedpriv-{s}/lira.json"))
    r = json.load(open(f"{b}/fedpriv-{s}/rmia.json"))
    t = torch[s]
    assert r["run"]["reference_models"]["trained_now"] == 0, "RMIA should read LiRA's models"
    rows.append((l["auc"], t["lira_auc"], r["auc"], t["rmia_auc"]))
    fw += l["wall_seconds"] + r["wall_seconds"]
    fc += l["cpu_seconds"] + r["cpu_seconds"]
    tw += t["wall_seconds"]
    tc += t["cpu_seconds"]
    print(f"{s:>4} | {l['auc']:16.4f} {l['tpr_at_fpr']['0.01']:6.3f} | {t['lira_auc']:14.4f} "
          f"{t['lira_tpr_at_fpr']['0.01']:6.3f} | {r['auc']:16.4f} {r['tpr_at_fpr']['0.01']:6.3f} | "
          f"{t['rmia_auc']:14.4f} {t['rmia_tpr_at_fpr']['0.01']:6.3f}")
k = len(rows)
def ms(v):
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else float("nan")
    return m, sd
for name, i in (("LiRA", 0), ("RMIA", 2)):
    (mf, sf), (mt, st) = ms([r[i] for r in rows]), ms([r[i + 1] for r in rows])
    se = math.sqrt(sf * sf / k + st * st / k)
    hm = torch[seeds[0]][f"{name.lower()}_auc_se"]
    ok = abs(mf - mt) <= 2 * se
    print(f"{name}: AUC fedpriv {mf:.4f} +- {sf:.4f}, PyTorch {mt:.4f} +- {st:.4f} (sd over {k} seeds); "
          f"difference {mf - mt:+.4f}, its standard error {se:.4f} (one run's Hanley-McNeil SE {hm:.3f}): "
          f"{'within' if ok else 'NOT within'} sampling error (2 SE)")
print(f"time, {threads} thread(s), procedure only (data loading excluded):")
print(f"  wall: fedpriv {fw:7.1f} s, PyTorch {tw:7.1f} s, ratio {tw / fw:5.2f} x")
print(f"  CPU : fedpriv {fc:7.1f} s, PyTorch {tc:7.1f} s, ratio {tc / fc:5.2f} x")
print(f"  load average (1, 5, 15 min) before: {lb}, after: {la}")
PY
