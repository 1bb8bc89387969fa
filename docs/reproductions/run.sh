#!/usr/bin/env bash
# Regenerates a reproduction: runs every config of docs/reproductions/configs/NAME/, then
# writes the document's tables and figures from the results.
#
#   bash docs/reproductions/run.sh spm             # or: dp-fedasgp, avp
#   JOBS=2 bash docs/reproductions/run.sh spm      # two cells at once
#   MPIRUN="mpirun -n 4" bash docs/reproductions/run.sh spm   # across MPI ranks
#
# Run from the repository root after `make fedpriv`. Results go to $OUT (default
# build/repro/NAME/). A config with a "defenses" list is a `fedpriv matrix` (every
# method and seed of one setting): it runs under the matrix runner into $OUT/CONFIG/, so
# JOBS, SHARD (K/N or slurm) and MPIRUN apply, and a rerun resumes where it stopped.
# Any other config is one `fedpriv train` run, one JSON per config written atomically; a
# config whose result exists is skipped. Then summarize.py reads the results, writes
# docs/reproductions/results/NAME.json (the committed figures, for matrix
# reproductions) and prints the tables, or rewrites the document's generated section.
# Environment: JOBS (1), THREADS (per cell, 1 under JOBS > 1, else 2), SHARD, MPIRUN,
# OUT, FEDPRIV_BIN (./fedpriv), FEDPRIV_DATA_DIR as for `fedpriv train`.
set -u
name=${1:?usage: run.sh spm|dp-fedasgp|avp}
here=$(cd "$(dirname "$0")" && pwd)
cfgdir="$here/configs/$name"
[ -d "$cfgdir" ] || { echo "run.sh: no configs in $cfgdir" >&2; exit 2; }
bin=${FEDPRIV_BIN:-./fedpriv}
[ -x "$bin" ] || { echo "run.sh: $bin is not executable (make fedpriv, or set FEDPRIV_BIN)" >&2; exit 2; }
out=${OUT:-build/repro/$name}
jobs=${JOBS:-1}
if [ "$jobs" -gt 1 ]; then threads=${THREADS:-1}; else threads=${THREADS:-2}; fi
mkdir -p "$out"
start=$(date +%s)
failed=0
for cfg in "$cfgdir"/*.json; do
    base=$(basename "$cfg" .json)
    if grep -q '"defenses"' "$cfg"; then
        # exit 1: a cell failed (the matrix's --status says which); the others stand
        # shellcheck disable=SC2086
        ${MPIRUN:-} "$bin" matrix "$cfg" --out "$out/$base" --jobs "$jobs" --threads "$threads" \
            ${SHARD:+--shard "$SHARD"} 2>>"$out/$base.log"
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "run.sh: $base: matrix exited $rc, see $out/$base.log and: $bin matrix --status $out/$base" >&2
            failed=1
        fi
        continue
    fi
    [ -s "$out/$base.json" ] && continue
    echo "== $base" >&2
    t0=$(date +%s)
    # CPU seconds (user + system) of the run beside its result: the figure to size by on
    # a machine shared with other jobs, where wall time says little.
    TIMEFORMAT='%U %S'
    { time { "$bin" train --config "$cfg" --out "$out/$base.json" --threads "$threads" 2>"$out/$base.log"; echo $? >"$out/$base.rc"; } ; } \
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
[ -n "${SHARD:-}" ] && { echo "run.sh: shard $SHARD done; run once more without SHARD to write the tables" >&2; exit $failed; }
python3 "$here/summarize.py" "$name" "$out" "$here/figures" || exit $?
exit $failed
