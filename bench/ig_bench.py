#!/usr/bin/python3
"""Inverting Gradients (Geiping et al., NeurIPS 2020) in PyTorch, the same procedure as
`fedpriv attack inverting-gradients` (attacks/inverting_gradients.c) on the same
Fashion-MNIST test images and the same initial weights (bench/ig_weights.c writes
them): the victim's E full-batch SGD steps at the federation's learning rate from those
weights, the server's estimate (theta0 - thetaE)/(lr E); labels from the last layer (iDLG's
argmin for one image, LLG for a batch); x' from N(0, 1); objective 1 - cos(simulated
estimate, target) over all parameters + tv * TV(x') (mean absolute horizontal and
vertical differences), the E steps simulated with create_graph=True; Adam on the sign of
the gradient, lr 0.1, MultiStepLR at steps // 2.667, // 1.6, // 1.142 (gamma 0.1), x'
clamped to [0, 1] after each step; restarts, the lowest final objective kept;
reconstructions matched to originals by the Hungarian algorithm on SSIM
(scipy.optimize.linear_sum_assignment). Prints one JSON line: recovered fraction (SSIM
>= 0.9), mean SSIM and PSNR, label accuracy, closure evaluations, ms per evaluation
(wall and CPU).

  /usr/bin/python3 bench/ig_bench.py --model lenet --weights W.bin --images 0,1,2,3
      [--batch 4] [--local-steps 1] [--fed-lr 0.01] [--steps 2000] [--restarts 1]
      [--tv 1e-4] [--lr 0.1] [--seed 1] [--threads 1] [--device cpu|cuda] [--time-closure N]
      [--true-labels]

With --time-closure N it inverts nothing: it times N closure evaluations at one x' on the
first batch (CPU ms, median of three runs) and the convolution kernels' share of them.

On a GPU (--device cuda) x' is still drawn on the host from the same generator, then
moved; the timing is wall time with the device synchronised.
"""
import argparse
import gzip
import json
import os
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from skimage.metrics import structural_similarity

SHAPES = {
    "lenet": [(12, 1, 5, 5), (12,), (12, 12, 5, 5), (12,), (12, 12, 5, 5), (12,), (10, 588), (10,)],
    "cnn-mnist": [(10, 1, 5, 5), (10,), (20, 10, 5, 5), (20,), (50, 320), (50,), (10, 50), (10,)],
}


def forward(model, p, x):
    if model == "lenet":  # DLG's LeNet: sigmoid convs, strides 2/2/1, padding 2
        h = torch.sigmoid(F.conv2d(x, p[0], p[1], stride=2, padding=2))
        h = torch.sigmoid(F.conv2d(h, p[2], p[3], stride=2, padding=2))
        h = torch.sigmoid(F.conv2d(h, p[4], p[5], stride=1, padding=2))
        return F.linear(h.flatten(1), p[6], p[7])
    h = F.max_pool2d(F.relu(F.conv2d(x, p[0], p[1])), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p[2], p[3])), 2)
    h = F.relu(F.linear(h.flatten(1), p[4], p[5]))
    return F.linear(h, p[6], p[7])


def load(root, indices):
    with gzip.open(f"{root}/t10k-images-idx3-ubyte.gz", "rb") as f:
        data = f.read()
    _, n, r, c = struct.unpack(">IIII", data[:16])
    with gzip.open(f"{root}/t10k-labels-idx1-ubyte.gz", "rb") as f:
        labels = f.read()
    imgs = [np.frombuffer(data, np.uint8, offset=16 + i * r * c, count=r * c).reshape(1, r, c) for i in indices]
    x = torch.from_numpy(np.stack(imgs).astype(np.float32) / 255.0)
    return x, torch.tensor([labels[8 + i] for i in indices], dtype=torch.long)


def local_estimate(model, params, x, y, steps, lr, create_graph):
    """The server's estimate after `steps` full-batch SGD steps: mean of the steps' gradients."""
    p = list(params)
    acc = None
    for _ in range(steps):
        loss = F.cross_entropy(forward(model, p, x), y)
        g = torch.autograd.grad(loss, p, create_graph=create_graph)
        acc = list(g) if acc is None else [a + b for a, b in zip(acc, g)]
        p = [w - lr * d for w, d in zip(p, g)]
    return [a / steps for a in acc]


def labels_from_gradient(gw, batch):
    """iDLG (B = 1) and LLG (Wainakh et al. 2022) on the last weight's row sums."""
    s = gw.sum(dim=1).double().clone()
    if batch == 1:
        return [int(torch.argmin(s))]
    neg = s[s < 0]
    impact = float(-neg.sum()) / batch
    out = [int(c) for c in torch.argsort(s) if s[c] < 0][:batch]
    for c in out:
        s[c] += impact
    while len(out) < batch:
        c = int(torch.argmin(s))
        out.append(c)
        s[c] += impact
    return sorted(out)


def tv(x):
    return (x[:, :, :, 1:] - x[:, :, :, :-1]).abs().mean() + (x[:, :, 1:, :] - x[:, :, :-1, :]).abs().mean()


def distance(model, params, x, labels, target, tnorm, a):
    """The objective at x': 1 - cos(simulated estimate, target) + tv * TV(x')."""
    est = local_estimate(model, params, x, labels, a.local_steps, a.fed_lr, True)
    dot = sum((e * t).sum() for e, t in zip(est, target))
    nrm = torch.sqrt(sum((e * e).sum() for e in est))
    return 1 - dot / (nrm * tnorm) + a.tv * tv(x)


# Autograd's and the dispatcher's own frames around a convolution: their self time is
# framework overhead, not the convolution's arithmetic.
CONV_WRAPPERS = {"aten::conv2d", "aten::convolution", "aten::_convolution", "aten::conv_transpose2d",
                 "aten::_convolution_double_backward", "ConvolutionBackward0", "ConvolutionBackwardBackward0"}


def time_closure(model, params, target, labels, shape, a, gen, n):
    """CPU ms per closure evaluation (objective and its gradient in x') at one fixed x', the
    median of three runs of n, and the share of it in convolution kernels (self CPU time of
    the profiled convolution operators other than CONV_WRAPPERS)."""
    tnorm = torch.sqrt(sum((t * t).sum() for t in target))
    x = torch.randn(shape, generator=gen).to(a.device).requires_grad_(True)

    def closure():
        return torch.autograd.grad(distance(model, params, x, labels, target, tnorm, a), [x])

    for _ in range(max(1, n // 10)):
        closure()
    runs = []
    for _ in range(3):
        c0 = time.process_time()
        for _ in range(n):
            closure()
        runs.append(1e3 * (time.process_time() - c0) / n)
    m = max(1, n // 4)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(m):
            closure()
    kernels = [k for k in prof.key_averages() if "conv" in k.key and k.key not in CONV_WRAPPERS]
    return {"cpu_ms_per_evaluation": sorted(runs)[1],
            "conv_kernel_ms_per_evaluation": sum(k.self_cpu_time_total for k in kernels) / m / 1e3,
            "conv_kernel_ops": sorted(k.key for k in kernels)}


def invert(model, params, target, labels, shape, a, gen):
    tnorm = torch.sqrt(sum((t * t).sum() for t in target))
    best, best_loss, evals = None, float("inf"), 0
    for _ in range(a.restarts):
        x = torch.randn(shape, generator=gen).to(a.device).requires_grad_(True)
        opt = torch.optim.Adam([x], lr=a.lr)
        sched = torch.optim.lr_scheduler.MultiStepLR(
            opt, milestones=[a.steps // 2.667, a.steps // 1.6, a.steps // 1.142], gamma=0.1)

        def objective():
            return distance(model, params, x, labels, target, tnorm, a)

        for _ in range(a.steps):
            opt.zero_grad()
            loss = objective()
            x.grad, = torch.autograd.grad(loss, [x])
            x.grad.sign_()
            evals += 1
            opt.step()
            sched.step()
            with torch.no_grad():
                x.clamp_(0, 1)
        final = float(objective().detach())
        if final < best_loss:
            best, best_loss = x.detach().clone(), final
    return best, best_loss, evals


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(SHAPES), default="lenet")
    ap.add_argument("--weights", required=True)
    ap.add_argument("--images", default="0")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--local-steps", type=int, default=1)
    ap.add_argument("--fed-lr", type=float, default=0.01)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument("--tv", type=float, default=1e-4)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--true-labels", action="store_true",
                    help="give the batch's true labels instead of reading them off the gradient (the parity rows)")
    ap.add_argument("--time-closure", type=int, default=0, metavar="N",
                    help="no inversion: time N closure evaluations on the first batch (CPU)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    root = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
    flat = torch.from_numpy(np.fromfile(a.weights, dtype=np.float32))
    params, off = [], 0
    for s in SHAPES[a.model]:
        n = int(np.prod(s))
        params.append(flat[off:off + n].reshape(s).clone().to(a.device).requires_grad_(True))
        off += n
    assert off == flat.numel(), f"{a.weights}: {flat.numel()} floats, the model has {off}"
    indices = [int(i) for i in a.images.split(",")]
    assert len(indices) % a.batch == 0
    gen = torch.Generator().manual_seed(a.seed)
    ssims, psnrs, label_ok, in_multiset, evals, wall, cpu = [], [], 0, 0, 0, 0.0, 0.0
    for b in range(0, len(indices), a.batch):
        x, y = load(root, indices[b:b + a.batch])
        x, y = x.to(a.device), y.to(a.device)
        target = [t.detach() for t in local_estimate(a.model, params, x, y, a.local_steps, a.fed_lr, False)]
        labels = y.clone() if a.true_labels else \
            torch.tensor(labels_from_gradient(target[6], a.batch), dtype=torch.long, device=a.device)
        rest = [int(v) for v in labels]
        for v in y.tolist():
            if v in rest:
                rest.remove(v)
                in_multiset += 1
        if a.time_closure > 0:
            print(json.dumps({"model": a.model, "batch": a.batch, "local_steps": a.local_steps,
                              **time_closure(a.model, params, target, labels, x.shape, a, gen, a.time_closure),
                              "torch": torch.__version__}))
            return
        t0, c0 = time.perf_counter(), time.process_time()
        rec, loss, n = invert(a.model, params, target, labels, x.shape, a, gen)
        if a.device != "cpu":
            torch.cuda.synchronize()
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        evals += n
        orig = x.cpu().numpy()[:, 0]
        recn = rec.clamp(0, 1).cpu().numpy()[:, 0]
        B = a.batch
        sim = np.array([[structural_similarity(orig[i], recn[j], gaussian_weights=True, sigma=1.5,
                                               use_sample_covariance=False, data_range=1.0)
                         for j in range(B)] for i in range(B)])
        rows, cols = linear_sum_assignment(-sim)
        for i, j in zip(rows, cols):
            ssims.append(float(sim[i, j]))
            mse = float(np.mean((orig[i] - recn[j]) ** 2))
            psnr = 10 * np.log10(1.0 / mse) if mse > 0 else float("inf")
            psnrs.append(float(psnr))
            label_ok += int(labels[j]) == int(y[i])
    n = len(ssims)
    print(json.dumps({
        "model": a.model, "batch": a.batch, "local_steps": a.local_steps, "images": n,
        "recovered_fraction": sum(s >= 0.9 for s in ssims) / n, "ssim_mean": float(np.mean(ssims)),
        "psnr_mean": float(np.mean(psnrs)), "label_accuracy": label_ok / n, "label_multiset_accuracy": in_multiset / n,
        "closure_evaluations": evals,
        "seconds": wall, "ms_per_evaluation": 1e3 * wall / evals, "cpu_ms_per_evaluation": 1e3 * cpu / evals,
        "device": a.device, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
