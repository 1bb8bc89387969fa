#!/usr/bin/env python3
"""Reads a `fedpriv export` table back with Python's csv (and json) module and checks that
it holds every value of the matrix run, exactly, infinities included.

usage: export_roundtrip.py RUN_DIR EXPORT.csv [EXPORT.jsonl]
Exit 0 when every (cell, attack, metric) of the run's cell files is one row whose value
parses to the same double (or is empty / null for no value), and nothing else is there;
1 with the differences otherwise.
"""
import csv
import json
import math
import os
import re
import sys

COLUMNS = ["cell", "setting", "defense", "variant", "params", "epsilon", "epsilon_nominal", "epsilon_sound",
           "epsilon_conditional", "guarantee", "epsilon_upload", "upload_guarantee", "epsilon_standard_rdp",
           "epsilon_standard_pld", "unit", "seed", "status", "attack", "attacked_model", "metric", "value"]


def escape(text):
    """Text as the CSV writes it: core/status.c fp_escape, the terminal escaping. C0
    controls and DEL as \\n, \\t, \\r or \\xNN; C1 controls, the line and paragraph
    separators and the bidirectional controls as \\uXXXX; everything else as it is."""
    out = []
    for ch in text:
        c = ord(ch)
        if ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif c < 0x20 or c == 0x7F:
            out.append("\\x%02x" % c)
        elif 0x80 <= c <= 0x9F or c in (0x2028, 0x2029, 0x200E, 0x200F, 0x061C) or 0x202A <= c <= 0x202E \
                or 0x2066 <= c <= 0x2069:
            out.append("\\u%04x" % c)
        else:
            out.append(ch)
    return "".join(out)


def num(v):
    """A JSON value by fedpriv's non-finite rule, as a float."""
    if v is None:
        return math.nan
    if v == "inf":
        return math.inf
    if v == "-inf":
        return -math.inf
    return float(v)


def is_value(v):
    return v is None or v in ("inf", "-inf") or (isinstance(v, (int, float)) and not isinstance(v, bool))


def is_timing(key):
    return key.endswith("seconds") or re.search(r"(^|_)ms(_|$)", key) is not None


def leaves(obj, prefix, out):
    for k, v in obj.items():
        if is_timing(k):
            continue
        path = prefix + "." + k if prefix else k
        if isinstance(v, dict):
            leaves(v, path, out)
        elif is_value(v):
            out[path] = num(v)


def expected(run):
    index = json.load(open(os.path.join(run, "results.json")))
    labels = {k: a.get("label", a["name"]) for k, a in enumerate(index["attacks"])}
    want, cols = {}, {}
    for e in index["cells"]:
        path = os.path.join(run, "cells", e["id"] + ".json")
        if not os.path.exists(path):
            continue
        c = json.load(open(path))
        priv = c.get("privacy", {})
        cols[e["id"]] = {"epsilon": num(e.get("epsilon")), "seed": num(e.get("seed")),
                         "epsilon_nominal": num(priv.get("nominal", {}).get("epsilon_total")),
                         "epsilon_sound": num(priv.get("sound", {}).get("epsilon_total")),
                         "epsilon_conditional": num(priv.get("sound", {}).get("epsilon_total_conditional")),
                         "epsilon_standard_rdp": num(priv.get("standard", {}).get("rdp")),
                         "epsilon_standard_pld": num(priv.get("standard", {}).get("pld")),
                         "guarantee": priv.get("guarantee", ""), "unit": priv.get("unit", ""),
                         "epsilon_upload": num(priv.get("sound", {}).get("upload", {}).get("epsilon_total")),
                         "upload_guarantee": priv.get("sound", {}).get("upload", {}).get("guarantee", ""),
                         "defense": e["defense"], "setting": e["label"]}
        want[(e["id"], "", "model_accuracy")] = num(c["model"].get("test_accuracy"))
        want[(e["id"], "", "model_loss")] = num(c["model"].get("test_loss"))
        for a in c["attacks"]:
            label = labels[a["index"]]
            if a["status"] != "done":
                want[(e["id"], label, a["headline"])] = math.nan
                continue
            got = {}
            leaves(a["result"], "", got)
            for m, v in got.items():
                want[(e["id"], label, m)] = v
    return want, cols


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def compare(name, rows, parse, want, cols, text=lambda s: s):
    problems = []
    got = {}
    for r in rows:
        key = (r["cell"], r["attack"], r["metric"])
        if key in got:
            problems.append(f"{name}: {key} twice")
        got[key] = parse(r["value"])
        c = cols.get(r["cell"])
        if c is None:
            problems.append(f"{name}: unknown cell {r['cell']}")
            continue
        for col in ("epsilon", "seed", "epsilon_nominal", "epsilon_sound", "epsilon_conditional", "epsilon_upload",
                    "epsilon_standard_rdp", "epsilon_standard_pld"):
            if not same(parse(r[col]), c[col]):
                problems.append(f"{name}: {key} {col} = {r[col]!r}, the run has {c[col]!r}")
        for col in ("guarantee", "upload_guarantee", "unit", "defense", "setting"):
            if r[col] != text(c[col]):
                problems.append(f"{name}: {key} {col} = {r[col]!r}, the run has {c[col]!r}")
    for key in want.keys() - got.keys():
        problems.append(f"{name}: missing {key}")
    for key in got.keys() - want.keys():
        problems.append(f"{name}: not in the run: {key}")
    for key in want.keys() & got.keys():
        if not same(want[key], got[key]):
            problems.append(f"{name}: {key} = {got[key]!r}, the run has {want[key]!r}")
    return got, problems


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    run = sys.argv[1]
    want, cols = expected(run)
    with open(sys.argv[2], newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        rows = list(reader)
    problems = [] if header == COLUMNS else [f"csv: header {header}"]
    # CSV text is escaped for the terminal (what round-trips is the escaped text); JSONL
    # holds every string exactly.
    got, p = compare("csv", rows, lambda s: math.nan if s == "" else float(s), want, cols, escape)
    problems += p
    for sign in (1, -1):
        if any(v == sign * math.inf for v in want.values()) and not any(v == sign * math.inf for v in got.values()):
            problems.append(f"csv: the run's {'+' if sign > 0 else '-'}inf values are not there")
    if len(sys.argv) == 4:
        with open(sys.argv[3], encoding="utf-8") as f:
            jrows = [json.loads(line) for line in f]
        if any(list(r.keys()) != COLUMNS for r in jrows):
            problems.append("jsonl: keys differ from the columns")
        _, p = compare("jsonl", jrows, lambda v: math.nan if v == "" else num(v), want, cols)
        problems += p
    for line in problems[:40]:
        print(line, file=sys.stderr)
    print(f"export round trip: {len(want)} values, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
