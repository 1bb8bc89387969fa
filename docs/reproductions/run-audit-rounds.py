#!/usr/bin/env python3
"""Figures of docs/auditing.md, "Many rounds, subsampled clients": one-run audits
(fedpriv audit-training, observer "aggregates") of DP-FedAvg over many rounds with
Bernoulli client sampling at q = 0.1 on Fashion-MNIST logistic regression, 7000 canary
clients beside 10 that train.

  1. the 20-round table: server and client noise at eps 1, 4 and 8, and dp-sgd with
     canary records at q = 0.1, one local step a round (seed 1);
  2. the same nine rows over seeds 1..REPEATS (false alarms, largest eps_hat / eps);
  3. the accounting controls at 20 and 100 rounds: the standard RDP account (fedpriv accountant)
     fed q/10, one round's eps as the total, and a fixed cohort (replace one client)
     accounted as Poisson (add/remove), against eps_hat of the run as trained;
  4. the same at 100 rounds with 28000 canaries on the MLP (its 203,530 coordinates hold
     them; about 3.5 minutes an audit at 2 threads);
  5. the fixed cohort accounted as Poisson where the canaries take part often: half the
     clients a round (q = 0.5), 7000 canaries, seeds 1..5, at 20 and 40 rounds.

usage: docs/reproductions/run-audit-rounds.py [--fedpriv build/release-cpu/fedpriv]
           [--out DIR] [--repeats 20] [--jobs 2]
Prints Markdown tables; every result.json stays under DIR (default /tmp/fedpriv-audit-rounds),
and a rerun reuses the results it finds there.
"""
import argparse, json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

ap = argparse.ArgumentParser()
ap.add_argument("--fedpriv", default="build/release-cpu/fedpriv")
ap.add_argument("--out", default="/tmp/fedpriv-audit-rounds")
ap.add_argument("--repeats", type=int, default=20)
ap.add_argument("--jobs", type=int, default=2)
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
DELTA, Q = 1e-5, 0.1


def config(defense, rounds, seed, sampling="bernoulli", model="logreg", canaries=7000, q=Q):
    # canary clients beside 10 that train, two samples a client; one coordinate each
    # (logreg: 7850 coordinates, mlp: 203,530)
    return {"seed": seed,
            "dataset": {"name": "fashion-mnist", "train_samples": 2 * (canaries + 10) + 20, "test_samples": 100},
            "model": {"name": model},
            "federation": {"clients": canaries + 10, "rounds": rounds, "batch_size": 2, "sample_rate": q,
                           "sampling": sampling},
            "defense": defense,
            "attack": {"name": "audit-training", "method": "one-run", "canaries": canaries,
                       "observer": "aggregates"}}


def records_config(defense, rounds, seed):
    # dp-sgd's record-level claim: 7000 canary records dealt to 10 clients of 20 records
    # (700 each), every client every round, one local step a round at the step's rate
    # q = B / n_k = 2 / 20 = 0.1; observer: each client's upload (the claim's observer)
    return {"seed": seed,
            "dataset": {"name": "fashion-mnist", "train_samples": 200, "test_samples": 100},
            "model": {"name": "logreg"},
            "federation": {"clients": 10, "sample_rate": 1.0, "rounds": rounds, "local_steps": 1, "batch_size": 2,
                           "lr": 0.05},
            "defense": defense,
            "attack": {"name": "audit-training", "method": "one-run", "canaries": 7000, "observer": "uploads"}}


def run(name, cfg):
    d = os.path.join(args.out, name)
    res = os.path.join(d, "result.json")
    if not os.path.exists(res):
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        p = subprocess.run([args.fedpriv, "audit-training", "--config", os.path.join(d, "config.json"),
                            "--out", d, "--threads", "1"], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{name}: exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
    with open(res) as f:
        return json.load(f)


def accountant(q, steps, z):
    p = subprocess.run([args.fedpriv, "accountant", "--q", str(q), "--steps", str(steps), "--sigma", str(z),
                        "--delta", str(DELTA), "--json"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["epsilon"]


def many(jobs):
    with ThreadPoolExecutor(args.jobs) as ex:
        return list(ex.map(lambda j: run(*j), jobs))


ROWS = [(noise, eps) for noise in ("server", "client", "dp-sgd") for eps in (1, 4, 8)]


def row_config(n, e, seed):
    if n == "dp-sgd":
        return records_config({"name": "dp-sgd", "epsilon": e}, 20, seed)
    return config({"name": "gaussian-dpfedavg", "epsilon": e, "noise": n}, 20, seed)


def row_label(n):
    return "dp-sgd (canary records, uploads)" if n == "dp-sgd" else f"gaussian-dpfedavg ({n} noise)"


# 1. The 20-round table, seed 1.
table = many([(f"t20-{n}-eps{e}-s1", row_config(n, e, 1)) for n, e in ROWS])
print("| defense | eps | z drawn | claimed (source) | one-run eps_hat | SNJ | f-DP | score | guesses (correct) | ceiling | s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (n, e), r in zip(ROWS, table):
    z = r["defense_resolved"]["noise_multiplier"]
    print(f"| {row_label(n)} | {e} | {z:.4g} | {r['epsilon_claimed']:.3f} ({r['claim_source']}) "
          f"| **{r['epsilon_lower_bound']:.3f}** | {r['epsilon_steinke_nasr_jagielski']:.3f} | {r['epsilon_fdp']:.3f} "
          f"| {r['score']} | {r['guesses']} ({r['correct']}) | {r['epsilon_ceiling']:.3f} | {r['seconds']:.1f} |")

# 2. Seeds 1..REPEATS.
print()
print("| noise | eps | mean eps_hat | largest eps_hat (eps_hat/eps) | flagged |")
print("|---|---|---|---|---|")
flagged_total = 0
for n, e in ROWS:
    rs = many([(f"t20-{n}-eps{e}-s{s}", row_config(n, e, s)) for s in range(1, args.repeats + 1)])
    hats = [r["epsilon_lower_bound"] for r in rs]
    flagged = sum(not r["pass"] for r in rs)
    flagged_total += flagged
    print(f"| {n} | {e} | {sum(hats) / len(hats):.3f} | {max(hats):.3f} ({max(hats) / e:.2f}) | {flagged} of {len(rs)} |")
print(f"\n{flagged_total} of {len(ROWS) * args.repeats} audits flagged")

# 3 and 4. The controls: both samplings at multiplier z, and the three broken accounts.
def verdict(claim, r):
    return f"{claim:.3f}: **caught**" if r["epsilon_lower_bound"] > claim else f"{claim:.3f}: not caught"


def controls(first, tag, rounds, z, model="logreg", canaries=7000):
    d = {"name": "gaussian-dpfedavg", "noise_multiplier": z, "noise": "server"}
    poisson, fixed = many([(f"{tag}-bernoulli-z{z}", config(d, rounds, 1, "bernoulli", model, canaries)),
                           (f"{tag}-fixed-z{z}", config(d, rounds, 1, "fixed", model, canaries))])
    q10, one, as_poisson = accountant(Q / 10, rounds, z), accountant(Q, 1, z), accountant(Q, rounds, z)
    print(f"| {first} | {z} | Poisson (bernoulli), remove | {poisson['epsilon_claimed']:.3f} "
          f"| {poisson['epsilon_lower_bound']:.3f} | {verdict(q10, poisson)} | {verdict(one, poisson)} | — |")
    print(f"| {first} | {z} | fixed cohort, replace | {fixed['epsilon_claimed']:.3f} ({fixed['claim_source']}) "
          f"| {fixed['epsilon_lower_bound']:.3f} | — | — | {verdict(as_poisson, fixed)} |")


COLUMNS = "| z | sampling | own account | eps_hat | q/10 control | one round as the total | fixed cohort as Poisson |"
print()
print("| rounds " + COLUMNS)
print("|---" * 8 + "|")
for rounds in (20, 100):
    for z in (0.5, 1, 1.5, 2):
        controls(rounds, f"t{rounds}", rounds, z)

# More canaries: the MLP, 28000 canary clients, 100 rounds.
print()
print("| canaries (model) " + COLUMNS)
print("|---" * 8 + "|")
for z in (2, 3):
    controls("28000 (mlp)", "m100", 100, z, "mlp", 28000)

# 5. The fixed cohort as Poisson at q = 0.5: each canary in half the rounds, seeds 1..5.
HALF = [(20, 4), (40, 6)]
print()
print("| rounds | z | own account (fixed cohort, replace) | Poisson account (the control) | eps_hat, seeds 1-5 | caught |")
print("|---|---|---|---|---|---|")
for rounds, z in HALF:
    d = {"name": "gaussian-dpfedavg", "noise_multiplier": z, "noise": "server"}
    rs = many([(f"h{rounds}-fixed-z{z}-s{s}", config(d, rounds, s, "fixed", q=0.5)) for s in range(1, 6)])
    control = accountant(0.5, rounds, z)
    hats = [r["epsilon_lower_bound"] for r in rs]
    print(f"| {rounds} | {z} | {rs[0]['epsilon_claimed']:.3f} ({rs[0]['claim_source']}) | {control:.3f} "
          f"| {', '.join(f'{h:.3f}' for h in hats)} | {sum(h > control for h in hats)} of {len(hats)} |")
