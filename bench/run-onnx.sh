#!/usr/bin/env bash
# An imported ONNX model against the same built-in model (docs/bring-your-own.md, "Speed"):
# the built-in mlp (784-256-10) and lenet (DLG's) train a federated Fashion-MNIST job, and so
# do the same architectures imported from the ONNX files fedpriv exports for them
# (--save-model), from the same initial weights ("init": "uniform" draws the built-in
# model's from the seed in both), so both runs compute the same thing (their final test
# losses are checked equal, bit for bit in the JSON).
#
# The runs alternate (built-in, imported, built-in, ...) so that a change in the machine's
# load hits both; one thread (--threads 1, OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1). Each
# run is timed as a process: wall seconds and CPU seconds (user + system, from wait4), and
# the training seconds the result records (the rounds' train_seconds: no loading). The
# figures: min and median of each, the ratio imported / built-in of each, and the load
# average before and after. CPU time holds on a busy machine; wall time only on an idle one.
# Usage: bash bench/run-onnx.sh [repetitions]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-3}"
out=build/bench/onnx
mkdir -p "$out"
[ -x ./fedpriv ] || make fedpriv
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
/usr/bin/python3 - "$out" "$reps" <<'PY'
import json, os, statistics, subprocess, sys, time

out, reps = sys.argv[1], int(sys.argv[2])
data = {"name": "fashion-mnist", "train_samples": 20000, "test_samples": 1000}
fed = {"clients": 10, "sample_rate": 1.0, "rounds": 2, "local_epochs": 1, "batch_size": 64, "lr": 0.05,
       "partition": "iid"}
models = {"mlp": {"name": "mlp", "init": "uniform"}, "lenet": {"name": "lenet", "init": "uniform"}}


def config(path, model, **over):
    cfg = {"seed": 1, "dataset": dict(data, **over.get("data", {})), "model": model,
           "federation": dict(fed, **over.get("fed", {})), "defense": {"name": "none"}}
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def run(args):
    t0 = time.perf_counter()
    p = subprocess.Popen(["./fedpriv"] + args + ["--threads", "1"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("bench/run-onnx.sh: fedpriv %s failed" % " ".join(args))
    return wall, ru.ru_utime + ru.ru_stime


print("== imported ONNX model vs the same built-in model: Fashion-MNIST (%d samples), 10 clients, E=1, B=64, "
      "2 rounds, 1 thread, %d repetitions, interleaved" % (data["train_samples"], reps), file=sys.stderr)
load0 = os.getloadavg()
rows = []
for name, model in models.items():
    # The ONNX file of the built-in architecture: fedpriv's own export, from a short run.
    short = config(f"{out}/{name}-export.json", model, data={"train_samples": 640}, fed={"rounds": 1})
    run(["train", "--config", short, "--save-model", f"{out}/{name}.safetensors", "--out", f"{out}/{name}-export.out.json"])
    cfgs = {"built-in": config(f"{out}/{name}-builtin.json", model),
            "imported": config(f"{out}/{name}-imported.json", {"onnx": f"{name}.onnx", "init": "uniform"})}
    t = {k: {"wall": [], "cpu": [], "train": []} for k in cfgs}
    loss = {}
    for r in range(reps):
        for kind, cfg in cfgs.items():
            res = f"{out}/{name}-{kind}.result.json"
            wall, cpu = run(["train", "--config", cfg, "--out", res])
            j = json.load(open(res))
            t[kind]["wall"].append(wall)
            t[kind]["cpu"].append(cpu)
            t[kind]["train"].append(sum(x["train_seconds"] for x in j["rounds"]))
            loss[kind] = j["final"]["test_loss"]
    same = loss["built-in"] == loss["imported"]
    print(f"{name}: final test loss built-in {loss['built-in']!r}, imported {loss['imported']!r}: "
          f"{'the same' if same else 'DIFFERENT'}")
    for kind in cfgs:
        print("  %-9s " % kind + "   ".join(
            "%s min %.3f median %.3f s" % (m, min(v), statistics.median(v)) for m, v in t[kind].items()))
    ratio = {m: (min(t["imported"][m]) / min(t["built-in"][m]),
                 statistics.median(t["imported"][m]) / statistics.median(t["built-in"][m])) for m in ("wall", "cpu", "train")}
    print("  imported / built-in: " + "   ".join("%s %.3f (min) %.3f (median)" % (m, a, b) for m, (a, b) in ratio.items()))
    rows.append({"model": name, "same_result": same, "times": t, "ratio": ratio})
load1 = os.getloadavg()
print("load average before %.2f %.2f %.2f, after %.2f %.2f %.2f (%d cores)" % (load0 + load1 + (os.cpu_count(),)))
json.dump({"rows": rows, "load_before": load0, "load_after": load1}, open(f"{out}/bench-onnx.json", "w"), indent=1)
PY
