#!/usr/bin/env python3
"""The PyTorch side of the ONNX round trip (tests/test_onnx.c, docs/bring-your-own.md).

usage: onnx_roundtrip.py export DIR      build the three models, export them with
                                         torch.onnx.export, write their data and configs
       onnx_roundtrip.py check DIR       after fedpriv trained them: compare its weights
                                         and logits with PyTorch's

export writes, for each model M in mlp_tanh, lenet_pool, cnn_bn:
  M.onnx             the model (torch.onnx.export, opset 13)
  M.x.f32, M.logits.f32   64 inputs (64x1x12x12) and PyTorch's logits on them, raw float32
  M/train.csv, M/test.csv the same 64 samples with labels (a CSV dataset, {split})
  M.pt               the module's state_dict as exported (the check's starting point)
  M.json             a fedpriv config: one client, one round, one step of SGD on all 64
check reads M.trained.safetensors (fedpriv train --save-model) and M.trained_logits.f32 (fedpriv's
logits of the trained ONNX graph M.trained.onnx written beside it) and checks, each within 1e-5
relative (max |a-b| / max |b|):
  - the trained weights equal PyTorch's after the same SGD step from the same weights on
    the same batch (batch-norm running statistics included);
  - the safetensors loads into the original nn.Module with load_state_dict(strict=True)
    and gives fedpriv's logits.
Exit 0 when all hold, 1 with the differences otherwise.
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

N, K, LR, TOL = 64, 4, 0.1, 1e-5


def models():
    torch.manual_seed(7)
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(144, 16), nn.Tanh(), nn.Linear(16, K))
    torch.manual_seed(8)
    lenet = nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 8, 3), nn.Sigmoid(),
                          nn.Flatten(), nn.Linear(8 * 2 * 2, 12), nn.ReLU(), nn.Linear(12, K))
    torch.manual_seed(9)
    cnn_bn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                           nn.Conv2d(4, 6, 3, stride=2, bias=False), nn.BatchNorm2d(6), nn.ReLU(),
                           nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0), nn.Linear(6, K))
    # Running statistics that are not the defaults, so that evaluation uses them.
    with torch.no_grad():
        for m in cnn_bn.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return {"mlp_tanh": mlp, "lenet_pool": lenet, "cnn_bn": cnn_bn}


def data():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(N, 1, 12, 12, generator=g)
    y = torch.randint(0, K, (N,), generator=g)
    y[:K] = torch.arange(K)  # every class present: the CSV's classes are its labels
    return x, y


def raw(path, t):
    with open(path, "wb") as f:
        f.write(t.detach().contiguous().numpy().astype("<f4").tobytes())


def read_raw(path, shape):
    with open(path, "rb") as f:
        b = f.read()
    return torch.tensor(struct.unpack("<%df" % (len(b) // 4), b)).reshape(shape)


def read_safetensors(path):
    """A tiny safetensors reader (the `safetensors` package is not a Debian package)."""
    with open(path, "rb") as f:
        b = f.read()
    (n,) = struct.unpack("<Q", b[:8])
    hdr = json.loads(b[8:8 + n])
    base, out = 8 + n, {}
    for name, e in hdr.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        fmt = {"F32": "f", "I64": "q"}[e["dtype"]]
        vals = struct.unpack("<%d%s" % ((hi - lo) // struct.calcsize(fmt), fmt), b[base + lo:base + hi])
        out[name] = torch.tensor(vals, dtype=torch.float32 if fmt == "f" else torch.int64).reshape(e["shape"])
    return out


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def export(d):
    x, y = data()
    for name, m in models().items():
        m.eval()
        # Training mode keeps BatchNormalization as a node (evaluation mode folds it into
        # the convolution); do_constant_folding=False keeps every initializer's name.
        mode = torch.onnx.TrainingMode.TRAINING if name == "cnn_bn" else torch.onnx.TrainingMode.EVAL
        if name == "cnn_bn":
            m.train()
        torch.onnx.export(m, x[:2], os.path.join(d, name + ".onnx"), opset_version=13, training=mode,
                          do_constant_folding=False, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
        # Tracing in training mode ran batch norm once: the file holds the statistics after
        # it, and so does the module, which is kept as the check's starting point.
        torch.save(m.state_dict(), os.path.join(d, name + ".pt"))
        m.eval()
        raw(os.path.join(d, name + ".x.f32"), x)
        raw(os.path.join(d, name + ".logits.f32"), m(x))
        os.makedirs(os.path.join(d, name), exist_ok=True)
        for split in ("train", "test"):
            with open(os.path.join(d, name, split + ".csv"), "w") as f:
                f.write("label," + ",".join("f%d" % i for i in range(144)) + "\n")
                for i in range(N):
                    f.write("%d," % int(y[i]) + ",".join("%.9g" % v for v in x[i].flatten().tolist()) + "\n")
        cfg = {"seed": 1, "dataset": {"name": "csv", "path": os.path.abspath(os.path.join(d, name)) + "/{split}.csv"},
               "model": {"onnx": name + ".onnx"},
               "federation": {"clients": 1, "sample_rate": 1.0, "rounds": 1, "local_epochs": 1,
                              "batch_size": N, "lr": LR, "partition": "iid"},
               "defense": {"name": "none"}, "threads": 1}
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(cfg, f)


def check(d):
    x, y = data()
    bad = 0
    for name, m in models().items():
        m.load_state_dict(torch.load(os.path.join(d, name + ".pt")))
        before = {k: v.clone() for k, v in m.state_dict().items()}
        # PyTorch's step: one SGD step on the whole batch, batch norm in training mode.
        m.train()
        opt = torch.optim.SGD(m.parameters(), lr=LR)
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
        want = {k: v for k, v in m.state_dict().items() if not k.endswith("num_batches_tracked")}
        got = read_safetensors(os.path.join(d, name + ".trained.safetensors"))
        # Control: the step moves the weights by far more than the tolerance, so weights left
        # untrained would fail the comparison below. (A convolution's bias before batch norm
        # has no gradient, so not every tensor moves.)
        moved = max(rel(before[k], v) for k, v in want.items())
        if moved <= 100 * TOL:
            print("%s: the SGD step moves no tensor beyond 100x the tolerance: the check could not fail" % name)
            bad += 1
        for k, v in want.items():
            if k not in got:
                print("%s: %s missing from the safetensors" % (name, k))
                bad += 1
            elif rel(got[k], v) > TOL:
                print("%s: %s differs from PyTorch's SGD step by %.3g relative" % (name, k, rel(got[k], v)))
                bad += 1
        fresh = models()[name]
        fresh.load_state_dict(got, strict=True)
        fresh.eval()
        ours = read_raw(os.path.join(d, name + ".trained_logits.f32"), (N, K))
        r = rel(ours, fresh(x).detach())
        if r > TOL:
            print("%s: the reloaded module's logits differ from fedpriv's by %.3g relative" % (name, r))
            bad += 1
        print("%s: SGD step within %.3g (it moved the weights by %.3g), reloaded logits within %.3g" %
              (name, max(rel(got[k], v) for k, v in want.items() if k in got), moved, r))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("export", "check"):
        sys.exit(__doc__)
    if sys.argv[1] == "export":
        export(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2]))
