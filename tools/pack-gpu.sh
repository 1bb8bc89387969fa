#!/usr/bin/env bash
# Prepares .gpu/ for a GPU machine that has the CUDA toolkit, cuBLAS/cuDNN (e.g. through
# PyTorch's wheels) and PyTorch, but not this project's Debian libraries: the CUDA build
# of fedpriv and its test runner, the shared libraries they load from Debian (packed),
# the Fashion-MNIST test images for the DLG benchmark, and the initial weights that the
# Inverting Gradients benchmark gives PyTorch (bench/ig_weights, the job's seed). bench/gpu.sh uses them when
# present; on a machine with everything installed it builds instead.
set -euo pipefail
cd "$(dirname "$0")/.."
make -j"$(nproc)" CUDA=1 MPI=0 fedpriv build/release/fedpriv-tests
rm -rf .gpu && mkdir -p .gpu/libs .gpu/fashion-mnist
cp build/release/fedpriv build/release/fedpriv-tests .gpu/
bash bench/link.sh bench/dpsgd_step.c .gpu/dpsgd_step
mkdir -p build/bench && bash bench/link.sh bench/ig_weights.c build/bench/ig_weights
for m in lenet cnn-mnist; do build/bench/ig_weights $m default 1 .gpu/ig-$m.bin >/dev/null; done
# Every resolved library except the C runtime and the CUDA libraries (taken from the GPU machine).
for bin in .gpu/fedpriv .gpu/fedpriv-tests .gpu/dpsgd_step; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcud[a-z_]*|libcublas[A-Za-z]*)\.so' |
  while read -r lib; do cp -L "$lib" .gpu/libs/; done
tar -C .gpu -cJf .gpu/libs.tar.xz libs && rm -rf .gpu/libs
fm=/usr/share/datasets/fashion-mnist
cp "$fm"/t10k-images-idx3-ubyte.gz "$fm"/t10k-labels-idx1-ubyte.gz .gpu/fashion-mnist/
# The DLG benchmark reads only test images; the train split is the test files again.
cp "$fm"/t10k-images-idx3-ubyte.gz .gpu/fashion-mnist/train-images-idx3-ubyte.gz
cp "$fm"/t10k-labels-idx1-ubyte.gz .gpu/fashion-mnist/train-labels-idx1-ubyte.gz
ex=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$ex")"
grep -qx '/.gpu/' "$ex" 2>/dev/null || echo '/.gpu/' >> "$ex"
du -sh .gpu
