#!/usr/bin/env python3
"""PyTorch's view of the ONNX files fedpriv writes for built-in models (tests/test_onnx_out.c,
docs/bring-your-own.md).

usage: onnx_export_check.py DIR

For each DIR/M.onnx with DIR/M.x.f32 (the inputs, raw float32, the graph input's shape)
and DIR/M.logits.f32 (fedpriv's logits of the trained model on them):
  - onnx.checker.check_model(full_check=True) accepts the file (the schema, every node's
    attributes, shape inference);
  - the graph evaluated node by node with torch.nn.functional, as the ONNX operators
    define them, gives fedpriv's logits within 1e-5 relative (max |a-b| / max |b|);
  - for mlp, logreg and lenet: the initializers load into the nn.Module written below
    (the documented names) with load_state_dict(strict=True), and it gives the same logits.
Exit 0 when all hold, 1 with the differences otherwise, 3 when the onnx package (Debian's
python3-onnx) is missing.
"""
import glob
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import onnx
    from onnx import numpy_helper
except ImportError:
    print("SKIP: the onnx package (python3-onnx) is not installed")
    sys.exit(3)

TOL = 1e-5


def read_raw(path, shape):
    with open(path, "rb") as f:
        b = f.read()
    return torch.tensor(struct.unpack("<%df" % (len(b) // 4), b)).reshape(shape)


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def conv(v, a):
    p = a.get("pads", [0, 0, 0, 0])
    assert p[0] == p[2] and p[1] == p[3]
    return F.conv2d(v[0], v[1], v[2] if len(v) > 2 else None, stride=a.get("strides", [1, 1]), padding=p[:2])


def gemm(v, a):
    A, B = v[0], v[1]
    if a.get("transA", 0):
        A = A.t()
    if a.get("transB", 0):
        B = B.t()
    y = a.get("alpha", 1.0) * (A @ B)
    return y + a.get("beta", 1.0) * v[2] if len(v) > 2 else y


OPS = {
    "Gemm": gemm,
    "Conv": conv,
    "Relu": lambda v, a: F.relu(v[0]),
    "Sigmoid": lambda v, a: torch.sigmoid(v[0]),
    "Tanh": lambda v, a: torch.tanh(v[0]),
    "MaxPool": lambda v, a: F.max_pool2d(v[0], a["kernel_shape"], a.get("strides", [1, 1])),
    "AveragePool": lambda v, a: F.avg_pool2d(v[0], a["kernel_shape"], a.get("strides", [1, 1])),
    "Flatten": lambda v, a: v[0].reshape(v[0].shape[: a.get("axis", 1)].numel(), -1),
    "Softmax": lambda v, a: F.softmax(v[0], dim=a.get("axis", -1)),
    "LogSoftmax": lambda v, a: F.log_softmax(v[0], dim=a.get("axis", -1)),
}


def evaluate(model, x):
    g = model.graph
    env = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in g.initializer}
    env[g.input[0].name] = x
    for n in g.node:
        env[n.output[0]] = OPS[n.op_type]([env[i] for i in n.input], attrs(n))
    return env[g.output[0].name]


class MLP(nn.Module):
    """fedpriv's mlp and logreg: fc1 .. fcK, ReLU between them (models/mlp.c)."""

    def __init__(self, sizes):
        super().__init__()
        for i in range(len(sizes) - 1):
            setattr(self, "fc%d" % (i + 1), nn.Linear(sizes[i], sizes[i + 1]))
        self.k = len(sizes) - 1

    def forward(self, x):
        h = x.flatten(1)
        for i in range(self.k):
            h = getattr(self, "fc%d" % (i + 1))(h)
            h = torch.relu(h) if i + 1 < self.k else h
        return h


class LeNet(nn.Module):
    """fedpriv's lenet (DLG's, models/cnn.c): three 5x5 sigmoid convolutions, one linear."""

    def __init__(self, c, flat, k):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 12, 5, stride=2, padding=2)
        self.conv2 = nn.Conv2d(12, 12, 5, stride=2, padding=2)
        self.conv3 = nn.Conv2d(12, 12, 5, stride=1, padding=2)
        self.fc = nn.Linear(flat, k)

    def forward(self, x):
        h = torch.sigmoid(self.conv1(x))
        h = torch.sigmoid(self.conv2(h))
        h = torch.sigmoid(self.conv3(h))
        return self.fc(h.flatten(1))


def module_for(model, state):
    name = model.graph.name
    if name in ("mlp", "logreg"):
        k = len([n for n in state if n.endswith(".weight")])
        sizes = [state["fc1.weight"].shape[1]] + [state["fc%d.weight" % (i + 1)].shape[0] for i in range(k)]
        return MLP(sizes)
    if name == "lenet":
        w, f = state["conv1.weight"], state["fc.weight"]
        return LeNet(w.shape[1], f.shape[1], f.shape[0])
    return None


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def main(d):
    bad, n = 0, 0
    for path in sorted(glob.glob(os.path.join(d, "*.onnx"))):
        stem = path[: -len(".onnx")]
        if not os.path.exists(stem + ".x.f32"):
            continue
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        dims = [dd.dim_value for dd in model.graph.input[0].type.tensor_type.shape.dim[1:]]
        want = read_raw(stem + ".logits.f32", (-1, model.graph.output[0].type.tensor_type.shape.dim[1].dim_value))
        x = read_raw(stem + ".x.f32", [want.shape[0]] + dims)
        with torch.no_grad():
            r = rel(evaluate(model, x), want)
            line = "%s (%s): checker ok, graph in torch within %.3g" % (os.path.basename(path), model.graph.name, r)
            bad += r > TOL
            state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
            mod = module_for(model, state)
            if mod is not None:
                mod.load_state_dict(state, strict=True)
                r2 = rel(mod(x), want)
                line += ", nn.Module (load_state_dict strict) within %.3g" % r2
                bad += r2 > TOL
        print(line)
        n += 1
    if n == 0:
        print("no exported models in %s" % d)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
