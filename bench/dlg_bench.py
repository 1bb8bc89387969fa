#!/usr/bin/python3
"""DLG in PyTorch, as mit-han-lab/dlg main.py runs it, on the benchmark job of
bench/run-dlg.sh: LeNet with sigmoids (Conv 1->12 k5 s2 p2, 12->12 k5 s2 p2, 12->12 k5
s1 p2, Linear 588->10), every weight and bias U(-0.5, 0.5), one Fashion-MNIST 28x28
test image, one-hot label, dummy image and label logits from N(0, 1), objective
sum over parameters of ||grad(x', softmax(y')) - grad||^2 with create_graph=True,
torch.optim.LBFGS with its defaults (lr 1, max_iter 20, history 100, no line search),
300 step() calls. Prints one JSON line: closure evaluations, total wall and CPU
seconds, ms per evaluation (wall and CPU), the final matching loss, and SSIM (Wang 2004: 11-tap Gaussian, sigma 1.5,
valid positions, data range 1; skimage) of the clamped reconstruction.

  /usr/bin/python3 bench/dlg_bench.py [--image 0] [--steps 300] [--seed 1234]
                                      [--threads 1] [--noise 0.1] [--png out.png]
  /usr/bin/python3 bench/dlg_bench.py --lbfgs-reference
      prints the torch.optim.LBFGS trajectories that tests/test_dlg.c checks against.
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load_image(root, index):
    with gzip.open(f"{root}/t10k-images-idx3-ubyte.gz", "rb") as f:
        data = f.read()
    _, n, r, c = struct.unpack(">IIII", data[:16])
    img = np.frombuffer(data, np.uint8, offset=16 + index * r * c, count=r * c).reshape(1, 1, r, c)
    with gzip.open(f"{root}/t10k-labels-idx1-ubyte.gz", "rb") as f:
        labels = f.read()
    return torch.from_numpy(img.astype(np.float32) / 255.0), int(labels[8 + index])


class LeNet(nn.Module):
    # models/vision.py of the DLG repository, for 1-channel 28x28 input (hidden 588).
    def __init__(self, channels=1, hidden=588, classes=10):
        super().__init__()
        act = nn.Sigmoid
        self.body = nn.Sequential(
            nn.Conv2d(channels, 12, kernel_size=5, padding=5 // 2, stride=2), act(),
            nn.Conv2d(12, 12, kernel_size=5, padding=5 // 2, stride=2), act(),
            nn.Conv2d(12, 12, kernel_size=5, padding=5 // 2, stride=1), act())
        self.fc = nn.Sequential(nn.Linear(hidden, classes))

    def forward(self, x):
        out = self.body(x)
        return self.fc(out.view(out.size(0), -1))


def weights_init(m):
    if hasattr(m, "weight"):
        m.weight.data.uniform_(-0.5, 0.5)
    if hasattr(m, "bias"):
        m.bias.data.uniform_(-0.5, 0.5)


def cross_entropy_for_onehot(pred, target):
    return torch.mean(torch.sum(-target * F.log_softmax(pred, dim=-1), 1))


def ssim(a, b):
    from skimage.metrics import structural_similarity
    return float(structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
                                       data_range=1.0))


def dlg(args):
    torch.set_num_threads(args.threads)
    root = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
    dev = torch.device(args.device)
    gt, label = load_image(root, args.image)
    gt = gt.to(dev)
    gt_onehot = F.one_hot(torch.tensor([label]), num_classes=10).float().to(dev)
    net = LeNet()
    torch.manual_seed(args.seed)  # the reference seeds after construction, before weights_init
    net.apply(weights_init)
    net = net.to(dev)
    pred = net(gt)
    dy_dx = torch.autograd.grad(cross_entropy_for_onehot(pred, gt_onehot), net.parameters())
    original = [g.detach().clone() for g in dy_dx]
    if args.noise > 0:  # Gaussian noise on the shared gradient (DLG paper, section 5)
        original = [g + args.noise * torch.randn_like(g) for g in original]
    dummy_data = torch.randn(gt.size()).to(dev).requires_grad_(True)
    dummy_label = torch.randn(gt_onehot.size()).to(dev).requires_grad_(True)
    optimizer = torch.optim.LBFGS([dummy_data, dummy_label])
    evals = [0]

    def closure():
        optimizer.zero_grad()
        dummy_pred = net(dummy_data)
        dummy_loss = cross_entropy_for_onehot(dummy_pred, F.softmax(dummy_label, dim=-1))
        dummy_dy_dx = torch.autograd.grad(dummy_loss, net.parameters(), create_graph=True)
        grad_diff = 0
        for gx, gy in zip(dummy_dy_dx, original):
            grad_diff += ((gx - gy) ** 2).sum()
        grad_diff.backward()
        evals[0] += 1
        return grad_diff

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(args.steps):
        optimizer.step(closure)
    sync()
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    with torch.enable_grad():
        final = float(closure())
    evals[0] -= 1  # the final evaluation is not part of the timed optimisation
    rec = dummy_data.detach().clamp(0, 1)[0, 0].cpu().numpy()
    if args.png:
        from PIL import Image
        Image.fromarray(np.round(rec * 255).astype(np.uint8)).save(args.png)
    print(json.dumps({"torch": torch.__version__, "threads": args.threads, "image": args.image, "noise": args.noise, "label": label,
                      "recovered_label": int(dummy_label.detach().argmax()), "steps": args.steps,
                      "closure_evaluations": evals[0], "seconds": seconds,
                      "ms_per_evaluation": 1e3 * seconds / max(evals[0], 1), "cpu_seconds": cpu_seconds,
                      "cpu_ms_per_evaluation": 1e3 * cpu_seconds / max(evals[0], 1), "matching_loss": final,
                      "device": args.device, "ssim": ssim(gt[0, 0].cpu().numpy(), rec)}))


def lbfgs_reference():
    """Trajectories of torch.optim.LBFGS in float64 on a smooth 5-dimensional function
    (a weighted quadratic, a quartic and a softplus) and, in float32, one step on the
    Rosenbrock function from (-1.5, 2)."""
    a = torch.tensor([1.0, 2.0, 0.5, 3.0, 1.5], dtype=torch.float64)
    c = torch.tensor([0.3, -0.2, 0.5, 0.1, -0.4], dtype=torch.float64)

    def smooth(x):
        return (a * (x - c) ** 2).sum() + 0.25 * x.sum() ** 4 + torch.log(1 + torch.exp(x[0] - x[1]))

    def rosen(x):
        return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2

    def run(f, x0, dtype, steps, **kw):
        x = torch.tensor(x0, dtype=dtype, requires_grad=True)
        opt = torch.optim.LBFGS([x], **kw)

        def closure():
            opt.zero_grad()
            loss = f(x)
            loss.backward()
            return loss

        for _ in range(steps):
            opt.step(closure)
            st = opt.state[opt._params[0]]
            print("    {{%s}, %d, %d}," % (", ".join("%.9g" % v for v in x.detach().tolist()), st["func_evals"],
                                           st["n_iter"]))

    print("// smooth, float64, lr 0.5, max_iter 4 (max_eval 5), from (1, -1, 0.5, 2, -1.5): x, func_evals, n_iter")
    run(smooth, [1.0, -1.0, 0.5, 2.0, -1.5], torch.float64, 4, lr=0.5, max_iter=4)
    print("// rosenbrock, float32, defaults, from (-1.5, 2), one step")
    run(rosen, [-1.5, 2.0], torch.float32, 1)
    print("// rosenbrock, float32, max_eval 5, from (-1.5, 2), two steps")
    run(rosen, [-1.5, 2.0], torch.float32, 2, max_eval=5)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image", type=int, default=0)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--noise", type=float, default=0.0, help="std of Gaussian noise added to the gradient")
    ap.add_argument("--png")
    ap.add_argument("--lbfgs-reference", action="store_true")
    args = ap.parse_args()
    if args.lbfgs_reference:
        lbfgs_reference()
    else:
        dlg(args)
