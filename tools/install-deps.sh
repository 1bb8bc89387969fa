#!/usr/bin/env bash
# Installs Debian packages. With --missing, only those not yet installed (cheap when
# everything is there). Runs apt-get as root, or through sudo when available.
set -euo pipefail
only_missing=0
if [ "${1:-}" = "--missing" ]; then only_missing=1; shift; fi
want=()
for p in "$@"; do
  if [ $only_missing = 1 ] && dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    continue
  fi
  want+=("$p")
done
[ ${#want[@]} -eq 0 ] && exit 0
echo "installing: ${want[*]}" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
