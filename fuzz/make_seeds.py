#!/usr/bin/env python3
"""Regenerates the seed corpora of fuzz/corpus/<target>/ (valid and broken inputs,
each a few KB at most). The prefix bytes follow each target's input layout (see the
banner of fuzz/fuzz_<target>.c). Run from the repository root: python3 fuzz/make_seeds.py
Regression inputs (fuzz/corpus/<target>/regress-*) are committed as found, not made here."""
import gzip, os, struct, zlib

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

def put(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def gz(b):
    return gzip.compress(b, mtime=0)

# --- IDX: [n_classes byte][image-file length, u16 LE][images][labels] -------------
def idx_images(n, h, w):
    return struct.pack(">IIII", 0x803, n, h, w) + bytes((i * 37) % 256 for i in range(n * h * w))
def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)
def idx_input(ncls, img, lab):
    return bytes([ncls]) + struct.pack("<H", len(img)) + img + lab
img, lab = idx_images(3, 4, 5), idx_labels([0, 9, 3])
put("idx", "valid-raw", idx_input(10, img, lab))
put("idx", "valid-gzip", idx_input(0, gz(img), gz(lab)))
put("idx", "valid-mixed", idx_input(4, img, gz(idx_labels([0, 1, 3]))))
put("idx", "broken-truncated", idx_input(10, img[:-3], lab))
put("idx", "broken-magic", idx_input(10, b"\0\0\x08\x02" + img[4:], lab))
put("idx", "broken-count", idx_input(10, img, idx_labels([0, 1])))
put("idx", "broken-label", idx_input(10, img, idx_labels([0, 1, 12])))
put("idx", "broken-gzip", idx_input(10, gz(img)[:-6], lab))
put("idx", "broken-huge-dims", idx_input(10, struct.pack(">IIII", 0x803, 0xFFFFFFFF, 0xFFFF, 0xFFFF), lab))

# --- CIFAR-10: [mode byte][...] ----------------------------------------------------
rec = lambda label, k: bytes([label]) + bytes((i * k) % 256 for i in range(3072))
put("cifar", "valid-one", b"\0" + rec(3, 7))
put("cifar", "valid-gzip", b"\0" + gz(rec(3, 7) + rec(9, 11)))
two = rec(1, 3)
put("cifar", "valid-two-files", b"\1" + struct.pack("<H", len(two)) + two + rec(2, 5))
put("cifar", "broken-short", b"\0" + rec(3, 7)[:-1])
put("cifar", "broken-label", b"\0" + rec(10, 7))
put("cifar", "broken-empty-second", b"\1" + struct.pack("<H", len(two)) + two)
put("cifar", "broken-gzip", b"\0" + gz(rec(3, 7))[:-9])

# --- CSV: [mode byte][file] ----------------------------------------------------------
put("csv", "valid-label", b"\0a,b,label\n1,2,0\n3.5,-4e2,1\n5,6,1\n7,8,0\n9,1,2\n2,2,0\n1,1,1\n")
put("csv", "valid-strings", b"\0x,label\r\n1,cat\r\n2,\"dog\"\r\n3,\"a \"\"q\"\" ,b\"\r\n\r\n4,cat\r\n")
put("csv", "valid-target", b"\1f1,f2,target\n0.1,0.2,10\n0.3,0.4,11\n0.5,0.6,12\n")
put("csv", "valid-unlabelled", b"\2u,v\n1,2\n3,4\n")
put("csv", "broken-both", b"\3label,target\n1,2\n")
put("csv", "broken-nan", b"\0a,label\nnan,1\ninf,0\n")
put("csv", "broken-fields", b"\0a,b,label\n1,2\n1,2,3,4\n")
put("csv", "broken-quote", b"\0a,label\n\"1,0\n")
put("csv", "broken-nolabel", b"\0a,b\n1,2\n")
put("csv", "broken-empty", b"\0")

# --- MNIST JSON (every digit file is the input) ---------------------------------------
one = "[" + ",".join("0" if i % 3 else "0.5" for i in range(784)) + "]"
put("mnist_json", "valid-one", ('{"data": %s}' % one).encode())
put("mnist_json", "broken-short", b'{"data": [0, 0.5, 1]}')
put("mnist_json", "broken-range", ('{"data": %s}' % one.replace("0.5", "1.5", 1)).encode())
put("mnist_json", "broken-key", b'{"data": [], "extra": 1}')
put("mnist_json", "broken-syntax", b'{"data": [0, 1,')
put("mnist_json", "broken-type", b'{"data": {"a": 1}}')
put("mnist_json", "broken-gzip", gz(b'{"data": [0,'))

# --- PNG: hand-made files (zlib + CRC) --------------------------------------------------
def chunk(t, body):
    return struct.pack(">I", len(body)) + t + body + struct.pack(">I", zlib.crc32(t + body) & 0xFFFFFFFF)
def png(w, h, depth, ctype, rows, extra=b""):
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)
    raw = b"".join(b"\0" + r for r in rows)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
put("png", "valid-gray8", png(4, 3, 8, 0, [bytes([0, 64, 128, 255])] * 3))
put("png", "valid-rgb8", png(2, 2, 8, 2, [bytes(range(6)), bytes(range(100, 106))]))
put("png", "valid-gray1", png(9, 2, 1, 0, [b"\xaa\x80", b"\x55\x00"]))
put("png", "valid-rgba16", png(1, 2, 16, 6, [bytes(8), bytes(range(8))]))
put("png", "valid-palette", png(2, 1, 8, 3, [b"\x00\x01"], chunk(b"PLTE", b"\xff\0\0\0\xff\0") + chunk(b"tRNS", b"\x80")))
put("png", "valid-gray-alpha", png(2, 1, 8, 4, [b"\x10\x20\x30\x40"]))
good = png(4, 3, 8, 0, [bytes([0, 64, 128, 255])] * 3)
put("png", "broken-truncated", good[:-20])
put("png", "broken-crc", good[:40] + bytes([good[40] ^ 1]) + good[41:])
put("png", "broken-signature", b"\x89PNG\r\n\x1a\x00" + good[8:])
put("png", "broken-huge", png(100000, 1, 8, 0, [b"\0"]))
put("png", "broken-short-data", png(4, 3, 8, 0, [bytes([0, 64, 128, 255])]))

# --- weight files: [model byte: even mlp hidden [4], odd logreg][file] -----------------
def weights(name, layers, scale=0.25):
    b = b"FPMW" + struct.pack("<I", 1) + struct.pack("<I", len(name)) + name.encode() + struct.pack("<I", len(layers))
    for ln, count in layers:
        b += struct.pack("<I", len(ln)) + ln.encode() + struct.pack("<I", count)
        b += struct.pack("<%df" % count, *[scale * ((i % 7) - 3) for i in range(count)])
    return b
mlp = [("fc1.weight", 16), ("fc1.bias", 4), ("fc2.weight", 12), ("fc2.bias", 3)]
logreg = [("fc1.weight", 12), ("fc1.bias", 3)]
put("weights", "valid-mlp", b"\0" + weights("mlp", mlp))
put("weights", "valid-logreg", b"\1" + weights("logreg", logreg))
put("weights", "broken-wrong-model", b"\1" + weights("mlp", mlp))
put("weights", "broken-truncated", b"\0" + weights("mlp", mlp)[:-5])
put("weights", "broken-trailing", b"\1" + weights("logreg", logreg) + b"x")
put("weights", "broken-magic", b"\0FPMX" + weights("mlp", mlp)[4:])
put("weights", "broken-layer-count", b"\0" + weights("mlp", mlp[:3]))
put("weights", "broken-name-len", b"\0FPMW" + struct.pack("<II", 1, 0xFFFFFFFF) + b"mlp")

# --- reference-model cache entries (attacks/refcache.h): the whole file ------------
def refentry(identity=b"fuzz-identity", q=(3, 10, 17), c=(1, 2, 3), logits=(0.5, -1, 2, 0.25, -3, 1.5), nc=2,
             magic=b"FPREFLG1", fmt=2, member=None):
    body = magic + struct.pack("<IIIII", 0x01020304, fmt, len(identity), len(q), nc) + struct.pack("<d", 0.75)
    body += identity + struct.pack("<%dI" % len(q), *q) + struct.pack("<%dQ" % len(c), *c)
    body += bytes(member if member is not None else [i % 3 for i in range(len(q))])
    body += struct.pack("<%df" % len(logits), *logits)
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)
put("refcache", "valid", refentry())
put("refcache", "valid-more-queries", refentry(q=(3, 10, 17, 4), c=(1, 2, 3, 9), logits=(0.5, -1, 2, 0.25, -3, 1.5, 7, 8)))
put("refcache", "miss-other-identity", refentry(identity=b"other"))
put("refcache", "broken-truncated", refentry()[:-7])
put("refcache", "broken-crc", refentry()[:-1] + b"\0")
put("refcache", "broken-magic", refentry(magic=b"FPREFLG2"))
put("refcache", "broken-format", refentry(fmt=1))
put("refcache", "broken-huge-counts",
    refentry()[:16] + struct.pack("<III", 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF) + refentry()[28:])

# --- hostile JSON (docs/security.md, "Hostile input"): duplicate keys, NUL escapes,
# leading zeros, raw control characters, seeds at 2^53, a size bomb --------------------
cfg = ('{"seed": 1, "dataset": {"name": "csv"}, "model": {"name": "logreg"}, '
       '"federation": {"clients": 2, "rounds": 1}, "defense": {"name": "none"}%s}')
put("config", "hostile-duplicate", (cfg % ', "seed": 2').encode())
put("config", "hostile-nul-escape", (cfg % '').replace('"none"', '"none\\u0000x"').encode())
put("config", "hostile-leading-zero", (cfg % '').replace('"clients": 2', '"clients": 02').encode())
put("config", "hostile-raw-newline", (cfg % '').replace('"none"', '"no\nne"').encode())
put("config", "hostile-escape-name", (cfg % '').replace('"none"', '"\\u001b]0;pwned\\u0007x\\nfedpriv train: ok"').encode())
put("config", "hostile-seed-2p53", (cfg % '').replace('"seed": 1', '"seed": 9007199254740992').encode())
put("config", "hostile-steps-epochs", (cfg % '').replace('"rounds": 1', '"rounds": 1, "local_epochs": 1, "local_steps": 3').encode())
put("config", "hostile-threads", (cfg % ', "threads": 200').encode())
mat = ('\0{"seed": 1, "dataset": {"name": "csv"}, "model": {"name": "logreg"}, '
       '"federation": {"clients": 2, "rounds": 1}, "defenses": [%s]}')
put("matrix", "hostile-duplicate", (mat % '{"name": "laplace", "epsilon": 1, "epsilon": [1, 2], "clip": 1}').encode())
put("matrix", "hostile-bomb", (mat % ", ".join('{"name": "laplace", "clip": %d, "epsilon": [%s]}' % (k + 1, ", ".join(str(i + 1) for i in range(40))) for k in range(40))).encode())
put("matrix", "hostile-label", ('\1\0{"cells": [{"id": "a", "label": "\\u001b]0;x\\u0007\\nok", "status": "done", "spec_hash": "h"}]}').encode())
put("baseline", "hostile-duplicate", b'\0{"bounds": [{"defense": "none", "metric": "model_accuracy", "at_least": 0.5, "at_least": 2}]}')
put("baseline", "hostile-label", b'\0{"bounds": [{"label": "\\u001b[2J\\u001b]0;owned\\u0007\\nall bounds hold", "defense": "*", "metric": "model_accuracy", "at_least": 2}]}')
put("mnist_json", "hostile-duplicate", ('{"data": [], "data": %s}' % one).encode())
put("mnist_json", "hostile-leading-zero", ('{"data": %s}' % one.replace("0.5", "00.5", 1)).encode())

# --- npy: [use byte][.npy file] (fuzz/fuzz_npy.c) ----------------------------------------
def npy(descr, shape, data, fortran="False", extra=""):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), %s}" % (descr, fortran, dims, extra)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data
put("npy", "valid-u1-images", b"\0" + npy("|u1", (3, 4, 5), bytes(range(60))))
put("npy", "valid-f4-nhwc", b"\0" + npy("<f4", (2, 5, 5, 1), struct.pack("<50f", *[i / 64 for i in range(50)])))
put("npy", "valid-f8-table", b"\0" + npy("<f8", (4, 2), struct.pack("<8d", *range(8))))
put("npy", "valid-i8-labels", b"\1" + npy("<i8", (4,), struct.pack("<4q", 0, 2, 1, 2)))
put("npy", "valid-partition-text", b"\2client\n0\n1\n1\n0\n")
put("npy", "broken-count", b"\0" + npy("|u1", (3, 4, 5), bytes(59)))
put("npy", "broken-fortran", b"\0" + npy("<f4", (2, 2), bytes(16), fortran="True"))
put("npy", "broken-big-endian", b"\0" + npy(">f4", (2, 2), bytes(16)))
put("npy", "broken-huge-shape", b"\0" + npy("<f8", (1 << 40, 1 << 40), bytes(8)))
put("npy", "broken-extra-key", b"\0" + npy("|u1", (1,), b"\0", extra="'x': 1, "))
put("npy", "broken-negative-label", b"\1" + npy("<i8", (4,), struct.pack("<4q", 0, -2, 1, 2)))
