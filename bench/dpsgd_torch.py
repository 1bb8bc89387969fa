#!/usr/bin/python3
"""bench/dpsgd_step.c's job in PyTorch (Debian's python3-torch, no Opacus): one local step
of DP-SGD and one ordinary step, on Fashion-MNIST training records, one thread (torch's and
its BLAS's: the caller pins OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS to 1 as
well), timed in process CPU seconds and in wall seconds.

  non-private: forward on the batch, mean cross-entropy, backward, SGD update;
  dp-sgd, vmap: per-example gradients the way Opacus-style code computes them today,
               functorch's vmap(grad(loss)) over the batch on the functional model (PyTorch's
               fastest per-sample path; torch.func in later releases); each example's L2
               norm over all parameters, scaled by min(1, C / norm), summed; then
               N(0, (sigma C)^2) noise per element, division by the batch size and the SGD
               update (C = 1, sigma = 1, as in bench/dpsgd_step.c);
  dp-sgd, microbatches: the same with per-example gradients from a forward and backward
               on each record alone (the fallback without vmap), for comparison.
Each of `repeats` rounds times the three, interleaved, on `steps` consecutive batches after
resetting the model; prints one JSON line with the medians and minima (CPU: process CPU
ms; cuda: wall ms after a synchronize).
Usage: dpsgd_torch.py MODEL BATCH [steps [repeats [cpu|cuda]]]   (MODEL: mlp, cnn-mnist, lenet, logreg)"""
import gzip, json, os, statistics, struct, sys, time
import numpy as np
import torch
from functorch import grad, make_functional, vmap

torch.set_num_threads(1)
torch.manual_seed(1)
root = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        r, c = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, 1, r, c).astype(np.float32) / 255.0
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int64)


def make(name):
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    if name == "logreg":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    if name == "cnn-mnist":
        return nn.Sequential(nn.Conv2d(1, 10, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(10, 20, 5), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(320, 50), nn.ReLU(), nn.Linear(50, 10))
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 12, 5, 2, 2), nn.Sigmoid(), nn.Conv2d(12, 12, 5, 2, 2), nn.Sigmoid(),
                             nn.Conv2d(12, 12, 5, 1, 2), nn.Sigmoid(), nn.Flatten(), nn.Linear(588, 10))
    raise SystemExit(f"dpsgd_torch.py: unknown model {name}")


def main():
    name, B = sys.argv[1], int(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    dev = torch.device(sys.argv[5] if len(sys.argv) > 5 else "cpu")
    x = torch.from_numpy(idx(f"{root}/train-images-idx3-ubyte.gz")[:B * steps].copy()).to(dev)
    y = torch.from_numpy(idx(f"{root}/train-labels-idx1-ubyte.gz")[:B * steps].copy()).to(dev)
    model = make(name).to(dev)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    params = list(model.parameters())
    lossf = torch.nn.CrossEntropyLoss()
    lr, clip, sigma = 0.05, 1.0, 1.0

    def plain_step(xb, yb):
        for p in params:
            p.grad = None
        lossf(model(xb), yb).backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad

    def private_step(xb, yb):
        acc = [torch.zeros_like(p) for p in params]
        for i in range(len(xb)):
            for p in params:
                p.grad = None
            lossf(model(xb[i:i + 1]), yb[i:i + 1]).backward()
            with torch.no_grad():
                norm = torch.sqrt(sum((p.grad * p.grad).sum() for p in params))
                f = min(1.0, clip / (norm.item() + 1e-12))
                for a, p in zip(acc, params):
                    a.add_(p.grad, alpha=f)
        with torch.no_grad():
            for a, p in zip(acc, params):
                a.add_(torch.normal(0.0, sigma * clip, size=a.shape, device=dev))
                p -= lr * a / len(xb)

    fmodel, _ = make_functional(model)

    def example_loss(weights, xi, yi):
        return lossf(fmodel(weights, xi.unsqueeze(0)), yi.unsqueeze(0))

    per_example_grads = vmap(grad(example_loss), in_dims=(None, 0, 0))

    def vmap_step(xb, yb):
        with torch.no_grad():
            weights = tuple(p.detach() for p in params)
        g = per_example_grads(weights, xb, yb)  # one (B, *shape) tensor per parameter
        with torch.no_grad():
            norms = torch.sqrt(sum((gi.reshape(len(xb), -1) ** 2).sum(1) for gi in g))
            f = torch.clamp(clip / (norms + 1e-12), max=1.0)
            for gi, p in zip(g, params):
                s = torch.einsum("b,b...->...", f, gi)
                s.add_(torch.normal(0.0, sigma * clip, size=s.shape, device=dev))
                p -= lr * s / len(xb)

    def now():
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return time.process_time(), time.perf_counter()

    def timed(step):
        model.load_state_dict(init)
        c0, w0 = now()
        for k in range(steps):
            step(x[k * B:(k + 1) * B], y[k * B:(k + 1) * B])
        c1, w1 = now()
        cpu, wall = (c1 - c0) / steps * 1e3, (w1 - w0) / steps * 1e3
        return (wall if dev.type == "cuda" else cpu), wall

    steps_of = {"plain": plain_step, "vmap": vmap_step, "micro": private_step}
    times = {k: [] for k in steps_of}
    walls = {k: [] for k in steps_of}
    vmap_step(x[:B], y[:B])  # functorch traces on its first call: keep that out of the timings
    for _ in range(repeats):
        for k, step in steps_of.items():
            t, w = timed(step)
            times[k].append(t)
            walls[k].append(w)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "device": dev.type, "model": name,
                      "batch": B, "steps": steps, "repeats": repeats, "threads": torch.get_num_threads(),
                      "ms_per_step": med["plain"], "ms_per_step_min": min(times["plain"]),
                      "dpsgd_vmap_ms_per_step": med["vmap"], "dpsgd_vmap_ms_per_step_min": min(times["vmap"]),
                      "dpsgd_ms_per_step": med["micro"], "dpsgd_ms_per_step_min": min(times["micro"]),
                      "wall_ms_per_step": statistics.median(walls["plain"]),
                      "dpsgd_vmap_wall_ms_per_step": statistics.median(walls["vmap"]),
                      "ratio": med["micro"] / med["plain"], "vmap_ratio": med["vmap"] / med["plain"]}))


if __name__ == "__main__":
    main()
