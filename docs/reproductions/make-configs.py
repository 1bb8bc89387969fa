#!/usr/bin/env python3
"""Writes the reproduction configs under docs/reproductions/configs/ (committed; run
once after changing a setting here). Each config is a plain `fedpriv train` config, except
SPM's, which are `fedpriv matrix` configs (one per client count: every method and seed)."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- DP-FedASGP vs DP-FedAvg vs FedSMP vs none (docs/reproductions/dp-fedasgp.md) ----
ROUNDS = 25          # the paper runs 200; see the document for why 25
DS = 0.05            # ΔS on the summed-gradient scale (the paper never gives it)
DS_LARGE = 0.15      # a second ΔS, where the noise matters
CLIP = 5.0           # C on the summed local gradient (the paper: 1; see the document)
LR = 0.1             # the paper's η for MNIST
EPS = [0.1, 0.5, 2]

def fed(local_epochs):
    return {"clients": 100, "sample_rate": 0.1, "rounds": ROUNDS, "local_epochs": local_epochs,
            "batch_size": 32, "lr": LR, "partition": "dirichlet", "alpha": 1.0}

DATASETS = {
    "mnist": ({"name": "mnist"}, 5),
    "fmnist": ({"name": "fashion-mnist", "test_samples": 2000}, 1),
}

def asgp_configs():
    out = {}
    for tag, (ds, epochs) in DATASETS.items():
        base = {"seed": 1, "dataset": ds, "model": {"name": "cnn-mnist"}, "federation": fed(epochs), "threads": 2}
        out[f"{tag}-none"] = dict(base, defense={"name": "none"})
        for e in EPS:
            # Paper calibration: ε per round; DP-FedAvg and FedSMP work on the update
            # Δ = −η·G, so their clip and ΔS are η times those on the gradient G.
            out[f"{tag}-dp-fedasgp-eps{e}"] = dict(base, defense={
                "name": "dp-fedasgp", "variant": "paper", "epsilon": e, "clip": CLIP, "sensitivity": DS})
            out[f"{tag}-gaussian-dpfedavg-eps{e}"] = dict(base, defense={
                "name": "gaussian-dpfedavg", "variant": "paper", "epsilon": e, "clip": round(LR * CLIP, 12),
                "sensitivity": round(LR * DS, 12)})
            out[f"{tag}-fedsmp-eps{e}"] = dict(base, defense={
                "name": "fedsmp", "variant": "paper", "epsilon": e, "clip": round(LR * CLIP, 12), "sensitivity": round(LR * DS, 12),
                "topk_fraction": 0.1})
    # A larger ΔS on MNIST, where the noise starts to matter.
    ds, epochs = DATASETS["mnist"]
    base = {"seed": 1, "dataset": ds, "model": {"name": "cnn-mnist"}, "federation": fed(epochs), "threads": 2}
    for e in (0.1, 2):
        out[f"mnist-ds{DS_LARGE}-dp-fedasgp-eps{e}"] = dict(base, defense={
            "name": "dp-fedasgp", "variant": "paper", "epsilon": e, "clip": CLIP, "sensitivity": DS_LARGE})
        out[f"mnist-ds{DS_LARGE}-gaussian-dpfedavg-eps{e}"] = dict(base, defense={
            "name": "gaussian-dpfedavg", "variant": "paper", "epsilon": e, "clip": round(LR * CLIP, 12),
            "sensitivity": round(LR * DS_LARGE, 12)})
        out[f"mnist-ds{DS_LARGE}-fedsmp-eps{e}"] = dict(base, defense={
            "name": "fedsmp", "variant": "paper", "epsilon": e, "clip": round(LR * CLIP, 12),
            "sensitivity": round(LR * DS_LARGE, 12), "topk_fraction": 0.1})
    # The corrected variants at the same SOUND total ε (MNIST only).
    ds, epochs = DATASETS["mnist"]
    base = {"seed": 1, "dataset": ds, "model": {"name": "cnn-mnist"}, "federation": fed(epochs), "threads": 2}
    for e in EPS:
        out[f"mnist-sound-gaussian-dpfedavg-eps{e}"] = dict(base, defense={
            "name": "gaussian-dpfedavg", "epsilon": e, "delta": 1e-5, "clip": round(LR * CLIP, 12)})
        out[f"mnist-sound-fedsmp-eps{e}"] = dict(base, defense={
            "name": "fedsmp", "epsilon": e, "delta": 1e-5, "clip": round(LR * CLIP, 12), "topk_fraction": 0.1})
        out[f"mnist-sound-dp-fedasgp-eps{e}"] = dict(base, defense={
            "name": "dp-fedasgp", "epsilon": round(e / ROUNDS, 6), "clip": CLIP})
    return out

# ---- AVP vs NbAFL vs none (docs/reproductions/avp.md) --------------------------------
MS = [5, 10, 15, 20, 25, 30]

# The seed's uplink sensitivity, NbAFL's 2C/min|D_k|: declared, since fedpriv's default
# is the proven 2C (the records then list it as an assumption).
NBAFL_SENS = "2C/min|D_k|"

def avp_configs():
    out = {}
    for tag, ds in (("mnist", {"name": "mnist"}), ("fmnist", {"name": "fashion-mnist", "test_samples": 2000})):
        def base(m):
            return {"seed": 1, "dataset": ds, "model": {"name": "mlp"}, "threads": 2,
                    "federation": {"clients": 100, "sample_rate": 0.1, "rounds": m, "local_steps": 5,
                                   "batch_size": 32, "lr": 0.05, "partition": "iid"}}
        out[f"{tag}-none-M30"] = dict(base(30), defense={"name": "none"})
        epsilons = [10, 100] if tag == "mnist" else [10]
        for e in epsilons:
            for m in MS:
                out[f"{tag}-avp-eps{e}-M{m}"] = dict(base(m), defense={
                    "name": "avp", "epsilon": e, "delta": 1e-2, "clip": 5, "vartheta": 1.05, "sensitivity": NBAFL_SENS})
                out[f"{tag}-nbafl-eps{e}-M{m}"] = dict(base(m), defense={
                    "name": "nbafl", "epsilon": e, "delta": 1e-2, "clip": 5, "sensitivity": NBAFL_SENS})
        e = epsilons[-1] if tag == "mnist" else 10
        for th in (0.95, 1.02, 1.1):
            out[f"{tag}-avp-eps{e}-M30-vartheta{th}"] = dict(base(30), defense={
                "name": "avp", "epsilon": e, "delta": 1e-2, "clip": 5, "vartheta": th, "sensitivity": NBAFL_SENS})
        for name in ("avp", "nbafl"):
            out[f"{tag}-{name}-eps{e}-M30-delta1e-5"] = dict(base(30), defense={
                "name": name, "epsilon": e, "delta": 1e-5, "clip": 5, "sensitivity": NBAFL_SENS})
        out[f"{tag}-avp-eps{e}-M30-refine15"] = dict(base(30), defense={
            "name": "avp", "epsilon": e, "delta": 1e-2, "clip": 5, "vartheta": 1.05, "refine_at": 15, "sensitivity": NBAFL_SENS})
    return out

# ---- SPM (Chen & Zheng 2024) Table 3 (docs/reproductions/spm.md) ----
# The paper's setting (digest spm.md section 5); fixtures/repro/spm/ holds the same
# setting as one `fedpriv train` config per method (the smoke test and test_explosion run
# those). One matrix per client count C, since a matrix sweeps defenses and seeds, not
# the federation: every method at C, seeds 1-3, T = 50 as published.
SPM_CLIENTS = [5, 10, 20, 30, 40, 50]
SPM_SEEDS = [1, 2, 3]
SPM_EPS = 0.6
SPM_METHODS = [
    {"name": "none"},
    {"name": "spm", "variant": "paper", "epsilon": SPM_EPS},
    {"name": "spm", "variant": "corrected", "epsilon": SPM_EPS},
    {"name": "spm", "variant": "pnpm", "epsilon": SPM_EPS},
    {"name": "ldp-fl", "epsilon": SPM_EPS, "clip": 0.1},
    {"name": "pm", "epsilon": SPM_EPS, "clip": 0.1},
]
SPM_LAYER_RANGE = {"name": "ldp-fl", "epsilon": SPM_EPS, "range": "layer"}  # C = 30 only

def spm_configs():
    out = {}
    for c in SPM_CLIENTS:
        out[f"table3-c{c}"] = {
            "name": f"spm-table3-c{c}",
            "description": f"SPM (Chen & Zheng 2024) Table 3, Fashion-MNIST, {c} clients, eps 0.6, T 50",
            "seeds": SPM_SEEDS,
            "dataset": {"name": "fashion-mnist"},
            "model": {"name": "mlp", "hidden": [256]},
            "federation": {"clients": c, "sample_rate": 0.6, "sampling": "fixed", "rounds": 50, "local_epochs": 3,
                           "batch_size": 64, "lr": 0.05, "momentum": 0, "partition": "iid", "aggregation": "mean"},
            "defenses": SPM_METHODS + ([SPM_LAYER_RANGE] if c == 30 else []),
            "attacks": [],
        }
    return out

def write(sub, configs):
    d = os.path.join(HERE, "configs", sub)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.endswith(".json"):
            os.remove(os.path.join(d, f))
    for name, cfg in configs.items():
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")
    print(f"{len(configs)} configs in docs/reproductions/configs/{sub}/")

if __name__ == "__main__":
    write("dp-fedasgp", asgp_configs())
    write("avp", avp_configs())
    write("spm", spm_configs())
