#!/usr/bin/python3
"""The membership-inference job of bench/run-mia.sh in PyTorch: offline LiRA with 16
reference models and RMIA (offline, a = 0.3, gamma = 1, 1000 population samples) with the
first 4 of them, against the overfit Fashion-MNIST client target of
fixtures/mia/ml-leaks-overfit.json. Prints one JSON line per seed.

The same procedure as `fedpriv attack lira` then `fedpriv attack rmia` on that config
(docs/attacks-mia.md), written the way such attacks are written for PyTorch (ML Privacy
Meter, LiRA's reference code): models trained one after another, each with
torch.set_num_threads(threads); signals kept as logits.
  data plan   a random permutation of the 60,000 training images: 2 clients x 100 (client
              0's 100 are the members), 100 non-members, the rest the shadow pool;
  a model     MLP 784-256-10 (PyTorch's default init), a federation of 2 clients, 5 rounds,
              each client 20 local epochs of SGD (lr 0.01, momentum 0.9 reset each round,
              batch 32, reshuffled each epoch, the last batch partial), FedAvg; the global
              model evaluated after each round (target: the 10,000 test images; reference
              models: the first 2,000); the attacked model is client 0's last upload;
  references  model j trains like the target on a random 200-subset of the pool;
  LiRA        phi = z_y - logsumexp_{c != y} z (float64 from the logits); per candidate a
              Gaussian over the 16 models' phi (mean, population sd); score (phi_obs - mu)/sd;
  RMIA        Pr(x) = ((1 + a) mean_OUT p_y + (1 - a)) / 2 over the models that did not train
              on x (candidates and population alike); score = fraction of population z with
              (p(x)/Pr(x)) / (p(z)/Pr(z)) >= gamma.
Random draws are numpy's and torch's (not fedpriv's Philox streams), so the AUCs agree
within sampling error, not bit for bit."""
import gzip, json, os, struct, sys, time
import numpy as np
import torch

threads = int(os.environ.get("BENCH_THREADS", "2"))
seeds = [int(s) for s in os.environ.get("BENCH_SEEDS", "1,2,3").split(",")]
root = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
torch.set_num_threads(threads)

N_REF, N_RMIA, POP, A, GAMMA = 16, 4, 1000, 0.3, 1.0
CLIENTS, PER_CLIENT, ROUNDS, EPOCHS, B, LR, MOM = 2, 100, 5, 20, 32, 0.01, 0.9


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        r, c = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, r * c).astype(np.float32) / 255.0
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int64)


t_load = time.perf_counter()
xtr = torch.from_numpy(idx(f"{root}/train-images-idx3-ubyte.gz"))
ytr = torch.from_numpy(idx(f"{root}/train-labels-idx1-ubyte.gz"))
xte = torch.from_numpy(idx(f"{root}/t10k-images-idx3-ubyte.gz"))
yte = torch.from_numpy(idx(f"{root}/t10k-labels-idx1-ubyte.gz"))
t_load = time.perf_counter() - t_load


def make():
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


def federation(train_idx, seed, n_test, gen):
    """Client 0's last upload of a federation over train_idx (client k: piece k)."""
    torch.manual_seed(seed)
    glob, local = make(), make()
    pieces = [torch.as_tensor(train_idx[k * PER_CLIENT:(k + 1) * PER_CLIENT]) for k in range(CLIENTS)]
    client0 = None
    for r in range(ROUNDS):
        acc = None
        for k in range(CLIENTS):
            local.load_state_dict(glob.state_dict())
            opt = torch.optim.SGD(local.parameters(), lr=LR, momentum=MOM)
            xi, yi = xtr[pieces[k]], ytr[pieces[k]]
            for e in range(EPOCHS):
                order = torch.randperm(len(xi), generator=gen)
                for b in range(0, len(xi), B):
                    bi = order[b:b + B]
                    opt.zero_grad(set_to_none=True)
                    torch.nn.functional.cross_entropy(local(xi[bi]), yi[bi]).backward()
                    opt.step()
            sd = {n: v.clone() for n, v in local.state_dict().items()}
            if k == 0:
                client0 = sd
            acc = sd if acc is None else {n: acc[n] + sd[n] for n in acc}
        glob.load_state_dict({n: v / CLIENTS for n, v in acc.items()})
        with torch.no_grad():
            test_acc = (glob(xte[:n_test]).argmax(1) == yte[:n_test]).float().mean().item()
    model = make()
    model.load_state_dict(client0)
    return model, test_acc


def logits(model, q):
    with torch.no_grad():
        return model(xtr[torch.as_tensor(q)]).double().numpy()


def phi(z, y):
    zy = z[np.arange(len(y)), y]
    other = z.copy()
    other[np.arange(len(y)), y] = -np.inf
    m = other.max(1)
    return zy - (m + np.log(np.exp(other - m[:, None]).sum(1)))


def log_prob(z, y):
    p = phi(z, y)
    return np.where(p > 0, -np.log1p(np.exp(-p)), p - np.log1p(np.exp(p)))


def roc_metrics(score, label):
    """AUC (ties count one half) and the TPR of the last ROC point with FPR <= t."""
    order = np.argsort(-score, kind="mergesort")
    s, l = score[order], label[order]
    P, Nn = l.sum(), (1 - l).sum()
    tps, fps, out = np.cumsum(l), np.cumsum(1 - l), []
    last = np.r_[np.diff(s) != 0, True]  # the last index of each tied group
    tpr, fpr = np.r_[0, tps[last] / P], np.r_[0, fps[last] / Nn]
    auc = np.trapz(tpr, fpr)
    return auc, {t: float(tpr[fpr <= t + 1e-12].max()) for t in (0.01, 0.001)}


def hanley_mcneil(auc, m, n):
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    return float(np.sqrt((auc * (1 - auc) + (m - 1) * (q1 - auc * auc) + (n - 1) * (q2 - auc * auc)) / (m * n)))


for seed in seeds:
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    perm = rng.permutation(len(xtr))
    train_idx = perm[:CLIENTS * PER_CLIENT]
    members = rng.permutation(train_idx[:PER_CLIENT])
    non_members = perm[CLIENTS * PER_CLIENT:CLIENTS * PER_CLIENT + PER_CLIENT]
    pool = perm[CLIENTS * PER_CLIENT + PER_CLIENT:]
    cands = np.r_[members, non_members]
    label = np.r_[np.ones(PER_CLIENT), np.zeros(PER_CLIENT)]
    population = rng.choice(pool, POP, replace=False)
    queries = np.r_[cands, population]
    yq = ytr[torch.as_tensor(queries)].numpy()
    target, target_acc = federation(train_idx, 1000 + seed, 10000, gen)
    zt = logits(target, queries)
    t_ref = time.perf_counter()
    ref_z, ref_sets, ref_acc = [], [], []
    for j in range(N_REF):
        subset = rng.choice(pool, CLIENTS * PER_CLIENT, replace=False)
        m, a = federation(subset, 2000 + 100 * seed + j, 2000, gen)
        ref_z.append(logits(m, queries))
        ref_sets.append(set(subset.tolist()))
        ref_acc.append(a)
    t_ref = time.perf_counter() - t_ref
    n = len(cands)
    # LiRA offline, 16 models.
    phis = np.stack([phi(z[:n], yq[:n]) for z in ref_z])
    mu, sd = phis.mean(0), np.maximum(phis.std(0), 1e-6)
    lira = (phi(zt[:n], yq[:n]) - mu) / sd
    lira_auc, lira_tpr = roc_metrics(lira, label)
    # RMIA offline, the first 4 models.
    lp = np.stack([log_prob(z, yq) for z in ref_z[:N_RMIA]])
    out = np.array([[q not in s for q in queries.tolist()] for s in ref_sets[:N_RMIA]])
    cnt = out.sum(0)
    mean_out = np.where(out, np.exp(lp), 0).sum(0) / np.maximum(cnt, 1)
    pr = 0.5 * ((1 + A) * mean_out + (1 - A))
    lr = log_prob(zt, yq) - np.log(pr)
    lr_z = np.sort(lr[n:][cnt[n:] > 0])
    rmia = np.searchsorted(lr_z, lr[:n] - np.log(GAMMA), side="right") / len(lr_z)
    rmia_auc, rmia_tpr = roc_metrics(rmia, label)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "threads": threads, "seed": seed,
                      "lira_auc": lira_auc, "lira_tpr_at_fpr": lira_tpr,
                      "lira_auc_se": hanley_mcneil(lira_auc, PER_CLIENT, PER_CLIENT),
                      "rmia_auc": rmia_auc, "rmia_tpr_at_fpr": rmia_tpr,
                      "rmia_auc_se": hanley_mcneil(rmia_auc, PER_CLIENT, PER_CLIENT),
                      "target_test_accuracy": target_acc, "reference_test_accuracy_mean": float(np.mean(ref_acc)),
                      "reference_seconds": t_ref, "wall_seconds": wall, "cpu_seconds": cpu,
                      "load_seconds": t_load}), flush=True)
