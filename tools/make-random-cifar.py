#!/usr/bin/env python3
"""Writes random data in the CIFAR-10 binary format (records of 1 label byte and 3072
pixel bytes): DIR/data_batch_1..5.bin and DIR/test_batch.bin. For benchmarks that
only need CIFAR-shaped data. Usage: make-random-cifar.py DIR TRAIN_N TEST_N [SEED]"""
import os, random, sys

out, n_train, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
os.makedirs(out, exist_ok=True)


def write(path, n):
    with open(path, "wb") as f:
        for _ in range(n):
            f.write(bytes([rng.randrange(10)]))
            f.write(rng.randbytes(3072))


per = n_train // 5
for b in range(5):
    write(os.path.join(out, f"data_batch_{b + 1}.bin"), per if b < 4 else n_train - 4 * per)
write(os.path.join(out, "test_batch.bin"), n_test)
