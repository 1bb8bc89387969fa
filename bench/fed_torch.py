#!/usr/bin/env python3
"""One federated job in PyTorch, the same work as `fedpriv train` on the matching
config: N IID clients all taking part, E local epochs of minibatch SGD (batch B, lr),
FedAvg of the weights, test accuracy after each round.

  fed_torch.py --model mlp|cnn-cifar --data fashion|cifar DIR --device cpu|cuda
               [--clients 10] [--rounds 5] [--batch 64] [--lr 0.05] [--threads N]

Prints one JSON line: samples/s of local training (evaluation excluded), per-round
accuracy. The data is read from the same files fedpriv reads (Fashion-MNIST IDX or
CIFAR-10 binary batches)."""
import argparse, gzip, json, os, struct, sys, time

import numpy as np
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="mlp")
ap.add_argument("--data", nargs=2, default=["fashion", "/usr/share/datasets/fashion-mnist"])
ap.add_argument("--device", default="cpu")
ap.add_argument("--clients", type=int, default=10)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--lr", type=float, default=0.05)
ap.add_argument("--threads", type=int, default=os.cpu_count())
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(1)
dev = torch.device(a.device)


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        r, c = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, 1, r, c).astype(np.float32) / 255.0
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int64)


def cifar(paths):
    raw = np.concatenate([np.fromfile(p, np.uint8).reshape(-1, 3073) for p in paths])
    return raw[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0, raw[:, 0].astype(np.int64)


kind, root = a.data
if kind == "fashion":
    xtr, ytr = idx(f"{root}/train-images-idx3-ubyte.gz"), idx(f"{root}/train-labels-idx1-ubyte.gz")
    xte, yte = idx(f"{root}/t10k-images-idx3-ubyte.gz"), idx(f"{root}/t10k-labels-idx1-ubyte.gz")
else:
    xtr, ytr = cifar([f"{root}/data_batch_{i}.bin" for i in range(1, 6)])
    xte, yte = cifar([f"{root}/test_batch.bin"])
xtr, ytr, xte, yte = (torch.from_numpy(v).to(dev) for v in (xtr, ytr, xte, yte))
C, H, W = xtr.shape[1:]


def make():
    if a.model == "mlp":
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(C * H * W, 256), torch.nn.ReLU(),
                                   torch.nn.Linear(256, 10))
    if a.model == "cnn-cifar":
        return torch.nn.Sequential(
            torch.nn.Conv2d(C, 64, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(64, 128, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
            torch.nn.Linear(128 * (H // 4) * (W // 4), 384), torch.nn.ReLU(), torch.nn.Linear(384, 192),
            torch.nn.ReLU(), torch.nn.Linear(192, 10))
    raise SystemExit(f"unknown model {a.model}")


glob, local = make().to(dev), make().to(dev)
opt = torch.optim.SGD(local.parameters(), lr=a.lr)
lossf = torch.nn.CrossEntropyLoss()
shards = torch.randperm(len(xtr), device=dev)[: len(xtr) // a.clients * a.clients].view(a.clients, -1)
accs, train_time, samples = [], 0.0, 0
for r in range(a.rounds):
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    acc_state = None
    for k in range(a.clients):
        local.load_state_dict(glob.state_dict())
        for _ in range(a.epochs):
            ids = shards[k][torch.randperm(shards.shape[1], device=dev)]
            for b in range(0, len(ids), a.batch):
                bi = ids[b:b + a.batch]
                opt.zero_grad(set_to_none=True)
                lossf(local(xtr[bi]), ytr[bi]).backward()
                opt.step()
                samples += len(bi)
        sd = local.state_dict()
        if acc_state is None:
            acc_state = {n: v.clone() for n, v in sd.items()}
        else:
            for n in acc_state:
                acc_state[n] += sd[n]
    glob.load_state_dict({n: v / a.clients for n, v in acc_state.items()})
    if dev.type == "cuda":
        torch.cuda.synchronize()
    train_time += time.perf_counter() - t0
    with torch.no_grad():
        accs.append(sum((glob(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                        for i in range(0, len(xte), 1000)) / len(xte))
print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "device": a.device, "model": a.model,
                  "samples_per_s": samples / train_time, "train_seconds": train_time, "accuracy": accs}))
