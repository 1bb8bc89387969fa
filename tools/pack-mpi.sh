#!/usr/bin/env bash
# Prepares .mpi-pack/ for a machine without Open MPI or this project's Debian libraries
# (e.g. a lent benchmark machine): the CPU build of fedpriv with MPI, the shared
# libraries it and Open MPI load (packed), Open MPI's launcher, plugins and help files in
# a relocatable tree, the first 6000/1000 Fashion-MNIST images (what bench/matrix-ranks.json
# reads), and env.sh, which points Open MPI (OPAL_PREFIX) and PMIx at the tree.
# On the machine:  source .mpi-pack/env.sh; bench/run-matrix-ranks.sh (RANKS, MATRIX set
# by env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
make -s CUDA=0 MPI=1 fedpriv >/dev/null
bin="$(make -s --no-print-directory CUDA=0 MPI=1 print-build)/fedpriv"
rm -rf .mpi-pack && mkdir -p .mpi-pack/libs .mpi-pack/root .mpi-pack/fashion-mnist
cp "$bin" .mpi-pack/fedpriv
ompi=/usr/lib/x86_64-linux-gnu/openmpi
pmix=/usr/lib/x86_64-linux-gnu/pmix2
orterun=$(readlink -f "$(command -v orterun)")
# Open MPI's tree under root/usr (OPAL_PREFIX re-bases every path under /usr), PMIx's beside.
mkdir -p .mpi-pack/root/usr/bin .mpi-pack/root/usr/share
cp "$orterun" .mpi-pack/root/usr/bin/orterun
cp "$(command -v orted)" .mpi-pack/root/usr/bin/orted
for d in "$ompi/lib/openmpi3" "$pmix/lib/pmix" "$pmix/share" /usr/share/openmpi; do
  mkdir -p ".mpi-pack/root$(dirname "$d")"
  cp -a "$d" ".mpi-pack/root$d"
done
# Every resolved library except the C runtime.
for f in .mpi-pack/fedpriv "$orterun" "$(command -v orted)" "$ompi"/lib/openmpi3/*.so "$pmix"/lib/pmix/*.so; do
  ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" .mpi-pack/libs/; done
tar -C .mpi-pack -cJf .mpi-pack/libs.tar.xz libs && rm -rf .mpi-pack/libs
tar -C .mpi-pack -cJf .mpi-pack/root.tar.xz root && rm -rf .mpi-pack/root
# The first 6000 training and 1000 test images: the data bench/matrix-ranks.json takes.
/usr/bin/python3 - /usr/share/datasets/fashion-mnist .mpi-pack/fashion-mnist <<'PY'
import gzip, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for split, n in (("train", 6000), ("t10k", 1000)):
    for kind, head in (("images-idx3", 16), ("labels-idx1", 8)):
        name = f"{split}-{kind}-ubyte.gz"
        raw = gzip.open(f"{src}/{name}").read()
        hdr = bytearray(raw[:head]); struct.pack_into(">I", hdr, 4, n)
        per = 784 if kind.startswith("images") else 1
        gzip.open(f"{dst}/{name}", "wb").write(bytes(hdr) + raw[head:head + n * per])
PY
cat > .mpi-pack/env.sh <<'SH'
# Source from the repository root on the machine: unpacks once, then sets the paths.
p="$PWD/.mpi-pack"
[ -d /tmp/fedpriv-mpi/libs ] || { mkdir -p /tmp/fedpriv-mpi && tar -C /tmp/fedpriv-mpi -xJf "$p/libs.tar.xz" && tar -C /tmp/fedpriv-mpi -xJf "$p/root.tar.xz"; }
r=/tmp/fedpriv-mpi/root
export LD_LIBRARY_PATH="/tmp/fedpriv-mpi/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$r/usr" PMIX_INSTALL_PREFIX="$r/usr/lib/x86_64-linux-gnu/pmix2"
export PMIX_MCA_mca_base_component_path="$r/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
export OMPI_MCA_mca_base_component_path="$r/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
# Debian's /etc/openmpi/openmpi-mca-params.conf, which is not in the tree.
export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_mtl='^ofi' OMPI_MCA_btl='^uct,openib,ofi' \
       OMPI_MCA_pml='^ucx' OMPI_MCA_osc='^ucx,pt2pt'
export MPIRUN="$r/usr/bin/orterun" FEDPRIV="$p/fedpriv"
for f in bench/matrix-ranks*.json; do # the packed data in place of the Debian package's
  sed "s#\"name\": \"fashion-mnist\",#\"name\": \"fashion-mnist\", \"path\": \"$p/fashion-mnist\",#" \
    "$f" > "/tmp/fedpriv-mpi/$(basename "$f")"
done
export MATRIX=/tmp/fedpriv-mpi/matrix-ranks.json
SH
du -sh .mpi-pack
