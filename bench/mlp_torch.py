#!/usr/bin/python3
"""The benchmark job of bench/run.sh in PyTorch: Fashion-MNIST, MLP 784-256-10,
10 IID clients all taking part, E=1, B=64, lr 0.05, 5 rounds of FedAvg, test
accuracy after each round. Prints one JSON line with samples/s and accuracies.

Same work as `fedpriv train --config bench/mlp-job.json`: per round every client
copies the global model, runs one epoch of minibatch SGD over its 6,000 samples
(shuffled each epoch), and the server averages the weights (equal shards, so the
sample-weighted mean is the plain mean)."""
import gzip, json, os, struct, sys, time
import numpy as np
import torch

threads = int(os.environ.get("BENCH_THREADS", "2"))
torch.set_num_threads(threads)
torch.manual_seed(1)
root = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        r, c = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, r * c).astype(np.float32) / 255.0
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int64)


xtr = torch.from_numpy(idx(f"{root}/train-images-idx3-ubyte.gz"))
ytr = torch.from_numpy(idx(f"{root}/train-labels-idx1-ubyte.gz"))
xte = torch.from_numpy(idx(f"{root}/t10k-images-idx3-ubyte.gz"))
yte = torch.from_numpy(idx(f"{root}/t10k-labels-idx1-ubyte.gz"))

clients, rounds, B, lr = 10, int(os.environ.get("BENCH_ROUNDS", "5")), 64, 0.05
perm = torch.randperm(len(xtr))
shards = perm.view(clients, -1)


def make():
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))


glob = make()
local = make()
opt = torch.optim.SGD(local.parameters(), lr=lr)
lossf = torch.nn.CrossEntropyLoss()
accs = []
train_time = 0.0
train_cpu = 0.0  # process CPU seconds (all threads): the figure that holds on a busy machine
samples = 0
for r in range(rounds):
    t0, c0 = time.perf_counter(), time.process_time()
    acc_state = None
    for k in range(clients):
        local.load_state_dict(glob.state_dict())
        idxs = shards[k][torch.randperm(shards.shape[1])]
        for b in range(0, len(idxs), B):
            bi = idxs[b:b + B]
            opt.zero_grad(set_to_none=True)
            loss = lossf(local(xtr[bi]), ytr[bi])
            loss.backward()
            opt.step()
            samples += len(bi)
        sd = local.state_dict()
        if acc_state is None:
            acc_state = {n: v.clone() for n, v in sd.items()}
        else:
            for n in acc_state:
                acc_state[n] += sd[n]
    glob.load_state_dict({n: v / clients for n, v in acc_state.items()})
    train_time += time.perf_counter() - t0
    train_cpu += time.process_time() - c0
    with torch.no_grad():
        accs.append((glob(xte).argmax(1) == yte).float().mean().item())
    print(f"torch round {r + 1}: test accuracy {accs[-1]:.4f}", file=sys.stderr)
print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "threads": threads,
                  "samples_per_s": samples / train_time, "train_seconds": train_time,
                  "samples_per_cpu_s": samples / train_cpu, "train_cpu_seconds": train_cpu,
                  "accuracy": accs}))
