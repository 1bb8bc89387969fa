#!/usr/bin/python3
# Regenerates the metric fixtures: fixtures/ssim/ (small PNG image pairs and the
# SSIM/PSNR/MSE reference values of each pair) and fixtures/roc/ (score/label sets and
# their ROC points, AUC, TPR at FPR, best balanced accuracy, advantage, confusion
# metrics). The C code in eval/ is checked against these values, so they come from
# independent implementations written here, never from fedpriv itself.
#
# Needs the Debian packages python3-numpy, python3-scipy, python3-skimage, python3-pil
# (the system python3). Usage, from the repository root:
#     python3 tools/make-metric-fixtures.py [OUTDIR]        (default: fixtures)
# The output is deterministic: fixed seeds, fixed source images from skimage.data.
#
# SSIM definition (Wang et al. 2004, as the project's spec fixes it): per channel,
# 11-tap Gaussian window sigma 1.5 (exp(-k^2/2 sigma^2), k=-5..5, normalised,
# separable), C1=(0.01 L)^2, C2=(0.03 L)^2 with L=1, population (co)variances, the SSIM
# map kept only at "valid" positions (windows entirely inside the image: 5 px dropped
# on each border), mean per channel, then the mean over channels.
#
# The reference here is a direct numpy implementation of that definition: each window
# is a valid (unpadded) separable correlation written with explicit shifted sums, so
# no padding is ever involved. It is cross-checked against skimage's
# structural_similarity(gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
# data_range=1, channel_axis=-1). skimage filters with mode='reflect' padding and only
# then crops (win_size-1)//2 = 5 px per border before the mean; whether that crop
# happens depends on the skimage version (older releases averaged the whole map). The
# script checks what the installed version does: it asserts that skimage agrees with
# the valid-only reference to 1e-9, and that the full-map mean (what a version without
# the crop would give) differs, so a mismatch in either direction stops the script.
# Inputs are passed as float64 because skimage computes in float32 for float32 input.
import json
import os
import sys

import numpy as np
from PIL import Image
import skimage
import skimage.data
from skimage.metrics import structural_similarity
from skimage.transform import resize

OUT = sys.argv[1] if len(sys.argv) > 1 else "fixtures"
SSIM_DIR = os.path.join(OUT, "ssim")
ROC_DIR = os.path.join(OUT, "roc")


# ---------------------------------------------------------------- SSIM ---------
def gauss_taps(sigma=1.5, radius=5):
    k = np.arange(-radius, radius + 1, dtype=np.float64)
    g = np.exp(-(k * k) / (2 * sigma * sigma))
    return g / g.sum()


def valid_window_mean(x, g):
    """Gaussian-weighted mean of every 11x11 window lying fully inside x (2-D)."""
    r = len(g) // 2
    h, w = x.shape
    rows = sum(g[k] * x[:, k:w - 2 * r + k] for k in range(len(g)))  # along width
    return sum(g[k] * rows[k:h - 2 * r + k, :] for k in range(len(g)))  # along height


def ssim_reference(a, b):
    """a, b: HxW or HxWxC float64 in [0,1]. The spec's SSIM, valid positions only."""
    if a.ndim == 2:
        a, b = a[:, :, None], b[:, :, None]
    g = gauss_taps()
    c1, c2 = (0.01 * 1.0) ** 2, (0.03 * 1.0) ** 2
    per_channel = []
    for ch in range(a.shape[2]):
        x, y = a[:, :, ch], b[:, :, ch]
        mx, my = valid_window_mean(x, g), valid_window_mean(y, g)
        vx = valid_window_mean(x * x, g) - mx * mx  # population (co)variances
        vy = valid_window_mean(y * y, g) - my * my
        vxy = valid_window_mean(x * y, g) - mx * my
        s = ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
        per_channel.append(s.mean())
    return float(np.mean(per_channel))


def ssim_skimage(a, b, full_map_mean=False):
    kw = dict(gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1.0)
    if a.ndim == 3:
        kw["channel_axis"] = -1
    if not full_map_mean:
        return float(structural_similarity(a, b, **kw))
    _, smap = structural_similarity(a, b, full=True, **kw)
    return float(smap.mean())


def to_u8(x):
    return np.clip(np.floor(np.clip(x, 0, 1) * 255 + 0.5), 0, 255).astype(np.uint8)


def small(img, size):
    """A size x size uint8 thumbnail: centre square crop, anti-aliased resize."""
    h, w = img.shape[:2]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    img = img[top:top + s, left:left + s]
    out = resize(img.astype(np.float64) / 255.0, (size, size) + img.shape[2:], anti_aliasing=True)
    return to_u8(out)


def save_png(name, u8):
    Image.fromarray(u8, mode="L" if u8.ndim == 2 else "RGB").save(os.path.join(SSIM_DIR, name))


def load_png(name):
    """What the C side reads: the stored 8-bit values / 255, as float64."""
    with Image.open(os.path.join(SSIM_DIR, name)) as im:
        return np.asarray(im, dtype=np.float64) / 255.0


def make_ssim():
    os.makedirs(SSIM_DIR, exist_ok=True)
    rng = np.random.default_rng(20240604)
    gray = {"camera28": small(skimage.data.camera(), 28), "coins28": small(skimage.data.coins(), 28),
            "moon28": small(skimage.data.moon(), 28)}
    colour = {"astronaut32": small(skimage.data.astronaut(), 32), "chelsea32": small(skimage.data.chelsea(), 32),
              "coffee32": small(skimage.data.coffee(), 32)}
    images = dict(gray)
    images.update(colour)
    for base in ("camera28", "astronaut32"):
        x = images[base].astype(np.float64) / 255.0
        images[base + "-noisy"] = to_u8(x + rng.normal(0.0, 0.1, size=x.shape))
        images[base + "-verynoisy"] = to_u8(x + rng.normal(0.0, 0.4, size=x.shape))
        images[base + "-shifted"] = np.roll(images[base], shift=(1, 2), axis=(0, 1))
        images[base + "-contrast"] = to_u8(0.5 * x + 0.25)
    # Pure noise, as a DLG run starts from.
    images["noise28"] = to_u8(rng.uniform(0, 1, size=(28, 28)))
    images["noise32"] = to_u8(rng.uniform(0, 1, size=(32, 32, 3)))
    for name, u8 in images.items():
        save_png(name + ".png", u8)

    pairs = [("camera28", "camera28"), ("camera28", "camera28-noisy"), ("camera28", "camera28-verynoisy"),
             ("camera28", "camera28-shifted"), ("camera28", "camera28-contrast"), ("camera28", "coins28"),
             ("moon28", "coins28"), ("camera28", "noise28"),
             ("astronaut32", "astronaut32"), ("astronaut32", "astronaut32-noisy"),
             ("astronaut32", "astronaut32-verynoisy"), ("astronaut32", "astronaut32-shifted"),
             ("astronaut32", "astronaut32-contrast"), ("astronaut32", "chelsea32"), ("coffee32", "chelsea32"),
             ("astronaut32", "noise32")]
    out = []
    for an, bn in pairs:
        a, b = load_png(an + ".png"), load_png(bn + ".png")
        ref = ssim_reference(a, b)
        sk = ssim_skimage(a, b)
        if abs(ref - sk) > 1e-9:
            raise SystemExit(f"skimage {skimage.__version__} disagrees with the valid-only SSIM on "
                             f"{an}/{bn}: {sk} vs {ref}; it may not crop to valid positions")
        full = ssim_skimage(a, b, full_map_mean=True)
        if an != bn and abs(full - ref) < 1e-6:
            raise SystemExit(f"full-map mean equals the valid mean on {an}/{bn}: the crop check proves nothing")
        mse = float(np.mean((a - b) ** 2))
        psnr = None if mse == 0 else float(10 * np.log10(1.0 / mse))  # JSON has no infinity
        out.append({"a": an + ".png", "b": bn + ".png", "ssim": ref, "ssim_skimage": sk,
                    "ssim_full_map_mean": full, "mse": mse, "psnr": psnr})
    doc = {"about": "SSIM (Wang 2004; 11-tap Gaussian sigma 1.5, C1=(0.01)^2, C2=(0.03)^2, data range 1, "
                    "population covariances, valid positions only, mean per channel then over channels) of PNG "
                    "pairs read as value/255. 'ssim' is the numpy reference, 'ssim_skimage' skimage "
                    f"{skimage.__version__} structural_similarity(gaussian_weights=True, sigma=1.5, "
                    "use_sample_covariance=False, data_range=1, channel_axis=-1), 'ssim_full_map_mean' the "
                    "mean over the whole reflect-padded map (the wrong convention, for contrast). "
                    "psnr = 10 log10(1/mse), null when mse = 0 (infinite). Made by tools/make-metric-fixtures.py.",
           "pairs": out}
    with open(os.path.join(SSIM_DIR, "reference.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


# ----------------------------------------------------------------- ROC ---------
def average_ranks(x):
    """1-based ranks, ties given the mean of the ranks they span."""
    uniq, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))  # 0-based first position of each value
    mean_rank = first + (counts + 1) / 2.0
    return mean_rank[inv]


def auc_mann_whitney(scores, labels):
    """AUC = U / (n1 n0), U from the rank sum of the members (ties count 1/2)."""
    r = average_ranks(scores)
    n1 = int(labels.sum())
    n0 = len(labels) - n1
    u = r[labels == 1].sum() - n1 * (n1 + 1) / 2.0
    return float(u / (n1 * n0))


def roc_brute_force(scores, labels):
    """One point per distinct score t (descending), counting score >= t directly,
    after the (0, 0) point; no cumulative sums, no sorting of the pairs."""
    n1 = int(labels.sum())
    n0 = len(labels) - n1
    fpr, tpr, thr = [0.0], [0.0], []
    for t in sorted(set(scores.tolist()), reverse=True):
        pred = scores >= t
        tpr.append(int(np.sum(pred & (labels == 1))) / n1)
        fpr.append(int(np.sum(pred & (labels == 0))) / n0)
        thr.append(t)
    return np.array(fpr), np.array(tpr), thr


def confusion(scores, labels, t):
    pred = scores >= t
    tp = int(np.sum(pred & (labels == 1)))
    fp = int(np.sum(pred & (labels == 0)))
    fn = int(np.sum(~pred & (labels == 1)))
    tn = int(np.sum(~pred & (labels == 0)))
    return {"threshold": float(t), "tp": tp, "fp": fp, "tn": tn, "fn": fn,
            "accuracy": (tp + tn) / len(labels), "precision": tp / (tp + fp) if tp + fp else 0.0,
            "recall": tp / (tp + fn)}


def roc_case(name, scores, labels, keep_points):
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    fpr, tpr, thr = roc_brute_force(scores, labels)
    auc = auc_mann_whitney(scores, labels)
    trapezoid = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))
    if abs(trapezoid - auc) > 1e-12:
        raise SystemExit(f"{name}: trapezoid {trapezoid} != Mann-Whitney {auc}")
    # TPR at FPR <= t: here the largest TPR among points with FPR <= t (the same as
    # the last such point, because the curve is monotone).
    tpr_at = {str(t): float(np.max(tpr[fpr <= t])) for t in (0.001, 0.01, 0.1, 0.5)}
    case = {"name": name, "scores": scores.tolist(), "labels": labels.tolist(),
            "n_points": len(fpr), "auc": auc, "tpr_at_fpr": tpr_at,
            "best_balanced_accuracy": float(np.max(1 - (fpr + (1 - tpr)) / 2)),
            "advantage": float(np.max(tpr - fpr)),
            "confusion": [confusion(scores, labels, t) for t in
                          (float(np.median(scores)), float(np.max(scores)), float(np.min(scores)))]}
    if keep_points:
        case["fpr"], case["tpr"], case["thresholds"] = fpr.tolist(), tpr.tolist(), thr
    return case


def make_roc():
    os.makedirs(ROC_DIR, exist_ok=True)
    rng = np.random.default_rng(7)
    cases = []
    # Hand-sized, with ties inside and across the classes.
    cases.append(roc_case("tiny-ties", [0.9, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.4, 0.3, 0.1, 0.8, 0.2],
                          [1, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0], True))
    # Shifted Gaussians rounded to 2 decimals: many ties, balanced 200/200.
    s = np.round(np.concatenate([rng.normal(0.7, 1, 200), rng.normal(0, 1, 200)]), 2)
    y = np.concatenate([np.ones(200, int), np.zeros(200, int)])
    p = rng.permutation(len(s))
    cases.append(roc_case("gauss-ties", s[p], y[p], True))
    # Integer scores 0..9, imbalanced 120 members / 180 non-members.
    s = np.concatenate([rng.integers(2, 10, 120), rng.integers(0, 8, 180)]).astype(float)
    y = np.concatenate([np.ones(120, int), np.zeros(180, int)])
    p = rng.permutation(len(s))
    cases.append(roc_case("integer-scores", s[p], y[p], True))
    # 1000/1000, heavy-tailed members, 4 decimals: the low-FPR regime (TPR at 0.1% FPR).
    s = np.round(np.concatenate([rng.standard_t(3, 1000) + 0.3, rng.normal(0, 1, 1000)]), 4)
    y = np.concatenate([np.ones(1000, int), np.zeros(1000, int)])
    p = rng.permutation(len(s))
    cases.append(roc_case("low-fpr", s[p], y[p], False))
    doc = {"about": "ROC references from plain numpy: points by direct counting of score >= t for every "
                    "distinct score t (descending) after (0,0); AUC by the Mann-Whitney U statistic with "
                    "average ranks for ties (checked equal to the trapezoid rule on those points); "
                    "tpr_at_fpr[t] = largest TPR among points with FPR <= t; best_balanced_accuracy = "
                    "max 1-(FPR+FNR)/2; advantage = max TPR-FPR; confusion predicts member iff score >= "
                    "threshold (precision 0 when nothing is predicted). thresholds omit the first point's "
                    "(+infinity). Made by tools/make-metric-fixtures.py.",
           "cases": cases}
    with open(os.path.join(ROC_DIR, "reference.json"), "w") as f:
        json.dump(doc, f)
        f.write("\n")


if __name__ == "__main__":
    make_ssim()
    make_roc()
    print(f"wrote {SSIM_DIR}/ and {ROC_DIR}/")
