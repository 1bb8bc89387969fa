#!/usr/bin/env bash
# Membership inference against DP-SGD (docs/dpsgd.md, "Membership inference"): offline
# LiRA and RMIA, 16 reference models each (shared through the reference-model cache), on
# every config of docs/reproductions/configs/dpsgd-mia/, then one table.
#
#   bash docs/reproductions/run-dpsgd-mia.sh
#
# Run from the repository root after `make fedpriv`. Results go to $OUT (default
# build/repro/dpsgd-mia/), NAME.lira.json and NAME.rmia.json per config; one that exists
# is not run again, so an interrupted run resumes (and the cache in NAME/ keeps the
# reference models already trained). FEDPRIV_BIN: another binary.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${FEDPRIV_BIN:-./fedpriv}
out=${OUT:-build/repro/dpsgd-mia}
mkdir -p "$out"
for cfg in "$here"/configs/dpsgd-mia/*.json; do
    base=$(basename "$cfg" .json)
    for attack in lira rmia; do
        [ -s "$out/$base.$attack.json" ] && continue
        echo "== $base: $attack" >&2
        t0=$(date +%s)
        "$bin" attack "$attack" --config "$cfg" --out "$out/$base" 2>"$out/$base.$attack.log" || {
            echo "run-dpsgd-mia.sh: $base $attack failed (exit $?), see $out/$base.$attack.log" >&2
            exit 1
        }
        cp "$out/$base/result.json" "$out/$base.$attack.json.tmp" && mv "$out/$base.$attack.json.tmp" "$out/$base.$attack.json"
        echo "   $(( $(date +%s) - t0 )) s" >&2
    done
done
python3 - "$out" "$here"/configs/dpsgd-mia/*.json <<'PY'
import json, os, sys
out = sys.argv[1]
print("| config | defense | sound ε (guarantee) | test accuracy | LiRA AUC | LiRA TPR @ 1% FPR | RMIA AUC | RMIA TPR @ 1% FPR |")
print("|---|---|---|---|---|---|---|---|")
for cfg in sys.argv[2:]:
    base = os.path.basename(cfg)[:-5]
    lira = json.load(open(os.path.join(out, base + ".lira.json")))
    rmia = json.load(open(os.path.join(out, base + ".rmia.json")))
    t = lira["target"]
    d = t.get("defense", {})
    p = d.get("privacy", {})
    sound = p.get("sound", {})
    eps = sound.get("epsilon_total", sound.get("epsilon_total_conditional", float("inf")))
    if d.get("name", "none") == "none":
        eps_s = "∞ (none)"
    else:
        cond = sound.get("epsilon_total_conditional")
        eps_s = "%.2f (%s)" % (cond if cond is not None and p.get("guarantee") == "conditional" else eps,
                                p.get("guarantee", "?"))
    print("| %s | %s | %s | %.4f | %.3f | %.3f | %.3f | %.3f |" % (
        base, d.get("name", "none"), eps_s, t["test_accuracy"], lira["auc"], lira["tpr_at_fpr"]["0.01"],
        rmia["auc"], rmia["tpr_at_fpr"]["0.01"]))
PY
