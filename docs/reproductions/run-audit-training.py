#!/usr/bin/env python3
"""Figures of docs/auditing.md: training-run audits (fedpriv audit-training) of the
client-level defenses, corrected and as published, of an under-noised DP-FedAvg, of
dp-sgd with canary records (and an under-noised dp-sgd), of AVP and NbAFL (whose ds = 2C
covers any change of a client's upload; NbAFL's 2C/min|D_k| does not), of flat DP-FL with a
fixed and a measured clip, of layerwise (and, as a control, as published), of the local-DP
defenses against their per-coordinate account (and SPM as published), at two epsilons, with the one-run and the multi-run audit; then 20 repeated
one-run audits of each corrected defense with a claim (false alarms at 95% confidence).

usage: docs/reproductions/run-audit-training.py [--fedpriv build/release-cpu/fedpriv]
           [--out DIR] [--repeats 20] [--runs 200] [--skip-repeats]
Prints Markdown tables; every result.json stays under DIR (default /tmp/fedpriv-audit-training).
"""
import argparse, json, os, subprocess, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--fedpriv", default="build/release-cpu/fedpriv")
ap.add_argument("--out", default="/tmp/fedpriv-audit-training")
ap.add_argument("--repeats", type=int, default=20)
ap.add_argument("--runs", type=int, default=200)
ap.add_argument("--skip-repeats", action="store_true")
ap.add_argument("--canaries", type=int, default=7000)
args = ap.parse_args()
# One-run canaries (clients or records), each in its own coordinate of the logistic
# regression's 7850: more canaries, more guesses, a tighter bound.
CANARIES = args.canaries
os.makedirs(args.out, exist_ok=True)

# layerwise measures its importance on an LSTM's sigmoid gates: its rows run on power-load's
# LSTM (hidden 32, 5,153 parameters, so at most 5,000 canaries, one coordinate each), two
# samples a client, the rest the server's.
LSTM_CANARIES = 5000

def lstm_rows(defense):
    return defense["name"] == "layerwise"

def config(defense, attack, seed, one_run, records=False):
    if records:
        # Canary records (dp-sgd): 10 clients of 20 records, one local step over the whole
        # local set (q = 1); the canaries are dealt to the clients (a tenth each in one run; in
        # the multi-run audit one record in the last client).
        return {"seed": seed,
                "dataset": {"name": "fashion-mnist", "train_samples": 200, "test_samples": 100},
                "model": {"name": "logreg"},
                "federation": {"clients": 10, "sample_rate": 1.0, "rounds": 1, "local_steps": 1, "batch_size": 64,
                               "lr": 0.05},
                "defense": defense, "attack": dict({"name": "audit-training"}, **attack)}
    # One run: M canary clients beside 10 that train; multi-run: 10 clients, the last the canary.
    clients = attack.get("canaries", CANARIES) + 10 if one_run else 10
    if lstm_rows(defense):
        return {"seed": seed,
                "dataset": {"name": "power-load", "train_samples": 2 * clients + 220, "test_samples": 100},
                "model": {"name": "lstm", "hidden": 32},
                "federation": {"clients": clients, "sample_rate": 1.0, "rounds": 1, "batch_size": 2,
                               "samples_per_client": 2, "lr": 0.05},
                "defense": defense, "attack": dict({"name": "audit-training"}, **attack)}
    return {"seed": seed,
            "dataset": {"name": "fashion-mnist", "train_samples": 2 * clients + 20, "test_samples": 100},
            "model": {"name": "logreg"},
            "federation": {"clients": clients, "sample_rate": 1.0, "rounds": 1, "batch_size": 2, "lr": 0.05},
            "defense": defense, "attack": dict({"name": "audit-training"}, **attack)}

def audit(tag, defense, attack, seed=1, one_run=True, records=False):
    d = os.path.join(args.out, tag)
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "config.json")
    json.dump(config(defense, attack, seed, one_run, records), open(cfg, "w"), indent=1)
    t0 = time.time()
    p = subprocess.run([args.fedpriv, "audit-training", "--config", cfg, "--out", d], capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"{tag}: exit {p.returncode}: {p.stderr.strip()}")
    r = json.load(open(os.path.join(d, "result.json")))
    r["_wall"] = wall
    return r

# (label, defense for epsilon e, observer, extra audit keys[, canary records]); the
# corrected defenses with a claim first (the repeats take the first five).
def suite(e, z_of, s_of):
    return [
        ("gaussian-dpfedavg (server noise)", {"name": "gaussian-dpfedavg", "epsilon": e}, "final-model", {}),
        ("gaussian-dpfedavg (client noise)", {"name": "gaussian-dpfedavg", "epsilon": e, "noise": "client"},
         "final-model", {}),
        ("fedsmp corrected (rand-k 0.5)", {"name": "fedsmp", "epsilon": e, "topk_fraction": 0.5}, "aggregates", {}),
        ("dp-fedasgp corrected", {"name": "dp-fedasgp", "epsilon": e}, "uploads", {}),
        ("dp-sgd (canary records)", {"name": "dp-sgd", "epsilon": e}, "uploads", {}, True),
        ("control: gaussian-dpfedavg, noise x 0.25, declares eps",
         {"name": "gaussian-dpfedavg", "noise_multiplier": z_of[e] / 4}, "final-model", {"epsilon_claimed": e}),
        ("control: fedsmp paper (top-k 0.1)", {"name": "fedsmp", "variant": "paper", "epsilon": e}, "uploads",
         {"neighbours": "remove"}),
        ("control: dp-fedasgp paper", {"name": "dp-fedasgp", "variant": "paper", "epsilon": e}, "uploads", {}),
        ("control: dp-sgd, noise x 0.25, declares eps", {"name": "dp-sgd", "noise_multiplier": s_of[e] / 4},
         "uploads", {"epsilon_claimed": e}, True),
        ("avp corrected (canary clients; ds = 2C covers a client)", {"name": "avp", "epsilon": e}, "uploads", {}),
        ("nbafl corrected (canary clients; ds = 2C covers a client)", {"name": "nbafl", "epsilon": e}, "uploads", {}),
        ("nbafl, ds = 2C/min|D_k| (record-level only: no claim for canary clients)",
         {"name": "nbafl", "epsilon": e, "sensitivity": "2C/min|D_k|"}, "uploads", {}),
        ("flat-laplace corrected, fixed clip 1", {"name": "flat-laplace", "epsilon_total": e, "clip": 1}, "uploads", {}),
        ("flat-laplace corrected, clip measured on the canary's data", {"name": "flat-laplace", "epsilon_total": e},
         "uploads", {}),
        ("layerwise corrected (lstm; importance and clip on the canary's data)",
         {"name": "layerwise", "epsilon_total": e, "aggregation": "fedavg"}, "uploads", {}),
        ("control: layerwise paper, declares eps",
         {"name": "layerwise", "variant": "paper", "epsilon_total": e, "aggregation": "fedavg"}, "uploads",
         {"epsilon_claimed": e}),
        ("laplace (local, per coordinate)", {"name": "laplace", "epsilon": e, "clip": 1}, "uploads", {}),
        ("gaussian (local, per coordinate)", {"name": "gaussian", "epsilon": e, "clip": 1}, "uploads", {}),
        ("duchi (local, per coordinate)", {"name": "duchi", "epsilon": e, "clip": 1}, "uploads", {}),
        ("pm (local, per coordinate)", {"name": "pm", "epsilon": e, "clip": 1}, "uploads", {}),
        ("ldp-fl (local, per coordinate)", {"name": "ldp-fl", "epsilon": e, "clip": 1}, "uploads", {}),
        ("adaptive-harmony corrected (local, per coordinate)", {"name": "adaptive-harmony", "epsilon": e, "clip": 1},
         "uploads", {}),
        ("spm corrected (no sound bound: the paper's claim)", {"name": "spm", "epsilon": e}, "uploads",
         {"neighbours": "remove"}),
        ("control: spm paper", {"name": "spm", "variant": "paper", "epsilon": e}, "uploads", {"neighbours": "remove"}),
    ]

# The corrected defenses with a claim, audited again over seeds for false alarms.
def repeated(label):
    return not label.startswith("control") and "no claim" not in label and "no sound bound" not in label

EPS = [1, 4]
z_of, s_of = {}, {}
for e in EPS:  # the multipliers the corrected DP-FedAvg and dp-sgd find for eps (one round, full cohort)
    r = audit(f"z-{e}", {"name": "gaussian-dpfedavg", "epsilon": e}, {"canaries": 20}, one_run=True)
    z_of[e] = r["defense_resolved"]["noise_multiplier"]
    r = audit(f"s-{e}", {"name": "dp-sgd", "epsilon": e}, {"canaries": 20}, one_run=True, records=True)
    s_of[e] = r["defense_resolved"]["noise_multiplier"]

def fmt(x):
    return "inf" if x is None or isinstance(x, str) else f"{x:.3f}"

print("| defense | eps | observer | claimed (source) | one-run eps_hat | guesses (correct) | s | multi-run eps_hat | test | s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for e in EPS:
    for i, (label, d, obs, extra, *rec) in enumerate(suite(e, z_of, s_of)):
        records = bool(rec and rec[0])
        a1 = dict({"canaries": LSTM_CANARIES if lstm_rows(d) else CANARIES, "observer": obs}, **extra)
        r1 = audit(f"one-{e}-{i}", d, a1, records=records)
        am = dict({"method": "multi-run", "runs": args.runs, "observer": obs}, **extra)
        rm = audit(f"multi-{e}-{i}", d, am, one_run=False, records=records)
        t = rm["test"]
        print(f"| {label} | {e} | {obs} | {fmt(r1['epsilon_claimed'])} ({r1['claim_source']}) | "
              f"**{r1['epsilon_lower_bound']:.3f}** | {r1['guesses']} ({r1['correct']}) | {r1['seconds']:.1f} | "
              f"**{rm['epsilon_lower_bound']:.3f}** | {t['score']} {t['fires_when']}: {t['fired_in']}/{t['runs_in']} "
              f"in, {t['fired_out']}/{t['runs_out']} out | {rm['seconds']:.1f} |", flush=True)

if not args.skip_repeats:
    print()
    print(f"| corrected defense (eps 4) | observer | audits | passes | max eps_hat | mean eps_hat | claimed |")
    print("|---|---|---|---|---|---|---|")
    for i, (label, d, obs, extra, *rec) in enumerate(suite(4, z_of, s_of)):
        if not repeated(label):
            continue
        vals, passes, claim = [], 0, None
        for seed in range(1, args.repeats + 1):
            m = LSTM_CANARIES if lstm_rows(d) else CANARIES
            r = audit(f"rep-{i}-{seed}", d, dict({"canaries": m, "observer": obs}, **extra), seed=seed,
                      records=bool(rec and rec[0]))
            vals.append(r["epsilon_lower_bound"])
            passes += bool(r["pass"])
            claim = r["epsilon_claimed"]
        print(f"| {label} | {obs} | {len(vals)} | {passes} | {max(vals):.3f} | {sum(vals)/len(vals):.3f} | "
              f"{fmt(claim)} |", flush=True)
