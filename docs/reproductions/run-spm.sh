#!/usr/bin/env bash
# Regenerates every number of docs/reproductions/spm.md: SPM (Chen & Zheng, Electronics
# 2024) Table 3, Fashion-MNIST, few clients, eps 0.6, for NoDP, SPM as published, SPM
# corrected, PNPM, LDP-FL and PM, plus one LDP-FL cell with per-layer ranges.
#
#   bash docs/reproductions/run-spm.sh                # the document's run (ROUNDS=8)
#   ROUNDS=50 JOBS=16 THREADS=1 bash docs/reproductions/run-spm.sh   # the paper's T
#
# Run from the repository root after `make fedpriv`. Each cell's config is the method's
# config in fixtures/repro/spm/ (the paper's setting, clients 30, T 50) with "clients"
# and "rounds" replaced; it is written to $OUT/cfg/ and run with `fedpriv train`, one
# result JSON per cell in $OUT (written atomically). A cell whose result exists is
# skipped, so an interrupted run resumes. At the end the script prints the tables of
# the document (markdown) from the results.
#
# Environment: ROUNDS (8), CLIENTS ("5 10 20 30 40 50"), METHODS (all six), JOBS
# (cells run at once, 1), THREADS (per cell, 2), DEVICE (cpu), OUT
# (build/repro/spm-T$ROUNDS), FEDPRIV_BIN (./fedpriv). Results do not depend on THREADS
# or JOBS (the engine is deterministic across thread counts).
set -u
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-8}
clients=${CLIENTS:-"5 10 20 30 40 50"}
methods=${METHODS:-"nodp spm-paper spm-corrected pnpm ldp-fl pm"}
jobs=${JOBS:-1}
threads=${THREADS:-2}
device=${DEVICE:-cpu}
bin=${FEDPRIV_BIN:-./fedpriv}
out=${OUT:-build/repro/spm-T$rounds}
cfgdir=fixtures/repro/spm
[ -x "$bin" ] || { echo "run-spm.sh: $bin is not executable (make fedpriv, or set FEDPRIV_BIN)" >&2; exit 2; }
mkdir -p "$out/cfg"

# The cells: every method at every client count, and ldp-fl-layer at 30 clients.
cells=()
for m in $methods; do
    for c in $clients; do cells+=("$m:$c"); done
done
case " $clients " in *" 30 "*) cells+=("ldp-fl-layer:30") ;; esac

run_cell() { # method clients
    local m=$1 c=$2 name="$1-c$2"
    [ -s "$out/$name.json" ] && return 0
    sed -e "s/\"clients\": [0-9]*/\"clients\": $c/" -e "s/\"rounds\": [0-9]*/\"rounds\": $rounds/" \
        "$cfgdir/$m.json" >"$out/cfg/$name.json"
    "$bin" train --config "$out/cfg/$name.json" --out "$out/$name.json" --threads "$threads" --device "$device" \
        2>"$out/$name.log"
    local rc=$?
    # exit 1 = diverged: the result says so ("status": "diverged") and the table shows it
    if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
        echo "run-spm.sh: $name failed (exit $rc), see $out/$name.log" >&2
        return $rc
    fi
    echo "done $name ($(date +%T))" >&2
}

start=$(date +%s)
failed=0
running=0
for cell in "${cells[@]}"; do
    run_cell "${cell%%:*}" "${cell##*:}" &
    running=$((running + 1))
    if [ $running -ge "$jobs" ]; then
        wait -n || failed=1
        running=$((running - 1))
    fi
done
while [ $running -gt 0 ]; do
    wait -n || failed=1
    running=$((running - 1))
done
echo "run-spm.sh: $(( $(date +%s) - start )) s wall for this invocation" >&2
[ $failed -eq 0 ] || exit 1

OUT="$out" ROUNDS="$rounds" CLIENTS="$clients" METHODS="$methods" python3 - <<'EOF'
import json, os
out, rounds = os.environ["OUT"], int(os.environ["ROUNDS"])
clients = os.environ["CLIENTS"].split()
methods = os.environ["METHODS"].split()
label = {"nodp": "NoDP", "spm-paper": "SPM paper", "spm-corrected": "SPM corrected", "pnpm": "PNPM",
         "ldp-fl": "LDP-FL", "pm": "PM", "ldp-fl-layer": "LDP-FL, layer range"}
# Table 3 of the paper (digest spm.md section 6); SPM's row is the published mechanism.
paper = {"nodp": [84.47, 84.56, 84.54, 84.55, 84.54, 84.58], "spm-paper": [83.78, 83.99, 83.64, 83.28, 82.93, 82.62],
         "pnpm": [81.89, 81.56, 81.05, 81.14, 80.56, 80.71], "ldp-fl": [80.71, 80.67, 81.08, 80.95, 80.62, 80.97],
         "pm": [56.05, 64.20, 70.46, 69.85, 64.25, 71.88]}
paper_clients = ["5", "10", "20", "30", "40", "50"]

def load(m, c):
    p = os.path.join(out, f"{m}-c{c}.json")
    return json.load(open(p)) if os.path.exists(p) else None

def final(r):
    if r is None:
        return "—"
    if r["status"] == "diverged":
        return f"diverged (round {r['diverged_round']})"
    s = f"{100 * r['final']['test_accuracy']:.2f}"
    boom = r["final"].get("loss_exploded")
    return s + f" (loss exploded, round {boom['round']})" if boom else s

def best(r):
    if r is None:
        return "—"
    acc = [x["test_accuracy"] for x in r["rounds"] if x.get("test_accuracy") is not None]
    return f"{100 * max(acc):.2f}" if acc else "—"

# What one round's aggregation does to a weight, from the closed forms (spm.md 1.3):
# m = round(q C) clients each send SPM(w); the mean has E = f w and Var = V w^2 / m.
import math
eps, q = 0.6, 0.6
u = math.exp(eps)
V = {"spm-paper": (3 * u * u + 1) / (3 * (u - 1) ** 2) - u * u / (u + 1) ** 2,
     "spm-corrected": (4 * u + (u + 1) ** 2 / (3 * u * u)) / (u - 1) ** 2,
     "pnpm": 4 * (u + 1 / 3) / (u - 1) ** 2}
f = {"spm-paper": u / (u + 1), "spm-corrected": 1.0, "pnpm": 1.0}
ms = [int(math.floor(q * int(c) + 0.5)) for c in clients]
print(f"### One round of aggregation, theory (eps = {eps}, m = round(qC) = {', '.join(map(str, ms))})\n")
print("| method | E[agg]/w | Var[one upload]/w^2 | " + " | ".join(f"sd(agg)/\\|w\\|, m = {m}" for m in ms) + " |")
print("|---|---|---|" + "---|" * len(ms))
for k in V:
    print(f"| {label[k]} | {f[k]:.4f} | {V[k]:.3f} | " + " | ".join(f"{math.sqrt(V[k] / m):.2f}" for m in ms) + " |")
print("\n| method | " + " | ".join(f"E[agg^2]/w^2, m = {m}" for m in ms) + " |")
print("|---|" + "---|" * len(ms))
for k in V:
    print(f"| {label[k]} | " + " | ".join(f"{f[k] ** 2 + V[k] / m:.2f}" for m in ms) + " |")
h, B, r = math.exp(eps / 2), (u + 1) / (u - 1), 0.1
sd_pm0 = r * math.sqrt((h + 3) / (3 * (h - 1) ** 2))
print(f"\nLDP-FL and PM with clip {r}: sd of one upload's coordinate at w = 0: LDP-FL r*B = {r * B:.3f}, "
      f"PM {sd_pm0:.3f}; of the aggregate, m = {ms[0]}..{ms[-1]}: LDP-FL {r * B / math.sqrt(ms[0]):.3f}.."
      f"{r * B / math.sqrt(ms[-1]):.3f}, PM {sd_pm0 / math.sqrt(ms[0]):.3f}..{sd_pm0 / math.sqrt(ms[-1]):.3f} "
      f"(first-layer weights start in +-1/sqrt(784) = {1 / math.sqrt(784):.4f})\n")

print(f"### Test accuracy (%) after T = {rounds} rounds (final round); paper's Table 3 (T = 50) in brackets\n")
print("| method | " + " | ".join(f"C = {c}" for c in clients) + " |")
print("|---|" + "---|" * len(clients))
for m in methods + ["ldp-fl-layer"]:
    cells = []
    for c in clients:
        r = load(m, c)
        if r is None and m == "ldp-fl-layer":
            cells.append("")
            continue
        s = final(r)
        key = "spm-paper" if m == "spm-paper" else m
        if key in paper and c in paper_clients:
            s += f" [{paper[key][paper_clients.index(c)]:.2f}]"
        cells.append(s)
    print(f"| {label[m]} | " + " | ".join(cells) + " |")

print(f"\n### Best round's test accuracy (%) over the T = {rounds} rounds\n")
print("| method | " + " | ".join(f"C = {c}" for c in clients) + " |")
print("|---|" + "---|" * len(clients))
for m in methods:
    print(f"| {label[m]} | " + " | ".join(best(load(m, c)) for c in clients) + " |")

def loss(r):
    if r is None:
        return "—"
    if r["status"] == "diverged":
        return "diverged"
    return f"{r['final']['test_loss']:.3g}"

print(f"\n### Test loss (cross-entropy) after round 1 and after T = {rounds}\n")
print("| method | " + " | ".join(f"C = {c}" for c in clients) + " |")
print("|---|" + "---|" * len(clients))
for m in methods:
    cells = []
    for c in clients:
        r = load(m, c)
        first = f"{r['rounds'][0]['test_loss']:.3g}" if r and r["rounds"] else "—"
        cells.append(f"{first} → {loss(r)}")
    print(f"| {label[m]} | " + " | ".join(cells) + " |")

c30 = "30" if "30" in clients else clients[0]
print(f"\n### Test accuracy (%) per round, C = {c30}\n")
print("| round | " + " | ".join(label[m] for m in methods + ["ldp-fl-layer"]) + " |")
print("|---|" + "---|" * (len(methods) + 1))
res = {m: load(m, c30) for m in methods + ["ldp-fl-layer"]}
for i in range(rounds):
    row = []
    for m in methods + ["ldp-fl-layer"]:
        r = res[m]
        if r is None or i >= len(r["rounds"]) or r["rounds"][i].get("test_accuracy") is None:
            row.append("—")
        else:
            row.append(f"{100 * r['rounds'][i]['test_accuracy']:.2f}")
    print(f"| {i + 1} | " + " | ".join(row) + " |")

print("\n### Privacy records of the last round (C = %s)\n" % c30)
print("| method | unit | nominal eps per round | nominal total | sound total | participants per round |")
print("|---|---|---|---|---|---|")
for m in methods + ["ldp-fl-layer"]:
    r = res[m]
    if r is None or not r["rounds"]:
        continue
    last = r["rounds"][-1]
    p = last["privacy"]
    nom, snd = p["nominal"], p["sound"]
    fmt = lambda v: "—" if v is None else (v if isinstance(v, str) else f"{v:.6g}")
    print(f"| {label[m]} | {p['unit']} | {fmt(nom.get('epsilon_round'))} | {fmt(nom.get('epsilon_total'))} | "
          f"{fmt(snd.get('epsilon_total'))} | {last['participants']} |")

secs = [load(m, c)["wall_seconds"] for m in methods for c in clients if load(m, c)]
extra = load("ldp-fl-layer", "30")
if extra:
    secs.append(extra["wall_seconds"])
print(f"\n{len(secs)} cells, {sum(secs):.0f} s of training wall time in total "
      f"(sum of the results' wall_seconds; data loading not included)")
EOF
