#!/usr/bin/env bash
# Regenerates a reproduction: runs every config of docs/reproductions/configs/NAME/ with
# `fedpriv train`, then prints the document's tables and writes its figures.
#
#   bash docs/reproductions/run.sh dp-fedasgp      # or: avp
#
# Run from the repository root after `make fedpriv`. Results go to $OUT (default
# build/repro/NAME/), one JSON per config, written atomically; a config whose result
# already exists is skipped, so an interrupted run resumes where it stopped. Set
# FEDPRIV_BIN to use another binary; FEDPRIV_DATA_DIR as for `fedpriv train`.
set -u
name=${1:?usage: run.sh dp-fedasgp|avp}
here=$(cd "$(dirname "$0")" && pwd)
cfgdir="$here/configs/$name"
[ -d "$cfgdir" ] || { echo "run.sh: no configs in $cfgdir" >&2; exit 2; }
bin=${FEDPRIV_BIN:-./fedpriv}
out=${OUT:-build/repro/$name}
mkdir -p "$out"
start=$(date +%s)
for cfg in "$cfgdir"/*.json; do
    base=$(basename "$cfg" .json)
    [ -s "$out/$base.json" ] && continue
    echo "== $base" >&2
    t0=$(date +%s)
    # CPU seconds (user + system) of the run beside its result: the figure to size by on
    # a machine shared with other jobs, where wall time says little.
    TIMEFORMAT='%U %S'
    { time { "$bin" train --config "$cfg" --out "$out/$base.json" 2>"$out/$base.log"; echo $? >"$out/$base.rc"; } ; } \
        2>"$out/$base.cpu"
    rc=$(cat "$out/$base.rc")
    # exit 1 = diverged: the result JSON says so and the tables show it
    if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
        echo "run.sh: $base failed (exit $rc), see $out/$base.log" >&2
        exit $rc
    fi
    echo "   $(( $(date +%s) - t0 )) s" >&2
done
echo "all runs: $(( $(date +%s) - start )) s (this invocation)" >&2
python3 "$here/summarize.py" "$name" "$out" "$here/figures"
