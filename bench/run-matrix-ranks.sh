#!/usr/bin/env bash
# Matrix cells per second with 1 and 2 MPI ranks (RANKS="1 2 4" for more): bench/matrix-ranks.json (12 cells:
# Fashion-MNIST 6000/1000, MLP 784-64-10, 4 clients x 300 samples, 8 rounds, basic-mia;
# one thread per rank), run as `mpirun -n R fedpriv matrix` with R = 1 and 2, alternately,
# REPS times each (default 2). Prints per R the median of:
#   cells/s   12 / the matrix's own wall time (rank 0's "N cells: ...; T s": from the
#             start of the hand-out to the last cell; loading data and MPI start-up excluded)
#   e2e cells/s  12 / the wall time of the whole mpirun command
#   CPU s/cell   user + system CPU of the job (every rank) per cell: the work itself, so
#                equal for R = 1 and 2 when handing cells out costs nothing
# and the ratio R=2 / R=1, with the load average before each run: on a machine shared
# with other work the wall-clock ratio measures the CPU share the ranks got, and only an
# idle machine shows the speed-up the ranks alone give. --bind-to none: Open MPI binds
# each of 2 ranks to one core by default, which on a shared machine pins a rank behind
# whatever else runs on its core (and on any machine confines a rank's threads to one
# core; docs/cluster.md).
# Environment: FEDPRIV (the binary, default ./fedpriv), MPIRUN (default mpirun), MATRIX,
# RANKS, REPS, OUT (default build/bench/matrix-ranks); tools/pack-mpi.sh sets them for a
# machine without Open MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
fedpriv="${FEDPRIV:-./fedpriv}" mpirun="${MPIRUN:-mpirun}" matrix="${MATRIX:-bench/matrix-ranks.json}"
[ -n "${FEDPRIV:-}" ] || [ -x ./fedpriv ] || make fedpriv
if ! command -v "$mpirun" >/dev/null || ! "$fedpriv" --version | grep -q " with MPI"; then
  echo "bench/run-matrix-ranks.sh: skipped: needs mpirun and fedpriv built with MPI (make deps; make)" >&2
  exit 0
fi
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
out="${OUT:-build/bench}/matrix-ranks"
mkdir -p "$out"
: > "$out/runs.txt"
reps="${REPS:-2}"
echo "== matrix cells per second, 1 and 2 MPI ranks ($(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))" >&2
for rep in $(seq "$reps"); do
  for r in ${RANKS:-1 2}; do
    rm -rf "$out/r$r"
    load=$(cut -d' ' -f1 /proc/loadavg)
    TIMEFORMAT='%R %U %S' # wall, and the CPU of every process of the job (children included)
    { time "$mpirun" $root --oversubscribe --bind-to none -n "$r" "$fedpriv" matrix "$matrix" --out "$out/r$r" \
      2> "$out/log-$r.txt"; } 2> "$out/time"
    secs=$(sed -n 's/^matrix: \([0-9]*\) cells: .*; \([0-9.]*\) s\. Results.*/\1 \2/p' "$out/log-$r.txt")
    [ -n "$secs" ] || { echo "ranks $r failed:" >&2; tail -5 "$out/log-$r.txt" >&2; exit 1; }
    echo "$r $rep $secs $(cat "$out/time") $load" >> "$out/runs.txt"
    echo "   ranks $r, run $rep: $secs (cells, matrix s); $(cat "$out/time") (wall, user, sys s); load $load" >&2
  done
done
python3 - "$out/runs.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
res = {}
for r, rep, cells, ms, wall, user, sys_, load in rows:
    d = res.setdefault(int(r), {"cps": [], "e2e": [], "cpu": [], "load": []})
    cells = int(cells)
    d["cps"].append(cells / float(ms)); d["e2e"].append(cells / float(wall))
    d["cpu"].append((float(user) + float(sys_)) / cells); d["load"].append(float(load))
m = {r: {k: statistics.median(v) for k, v in d.items()} for r, d in res.items()}
for r in sorted(m):
    print(f"ranks {r}: {m[r]['cps']:6.3f} cells/s   e2e {m[r]['e2e']:6.3f} cells/s   "
          f"CPU {m[r]['cpu']:5.2f} s/cell   load before {', '.join(f'{x:.1f}' for x in res[r]['load'])}")
for r in sorted(m):
    if r > 1 and 1 in m:
        print(f"ratio {r}/1: {m[r]['cps'] / m[1]['cps']:.2f}x cells/s{' (target >= 1.7x)' if r == 2 else ''}, "
              f"e2e {m[r]['e2e'] / m[1]['e2e']:.2f}x, CPU per cell {m[r]['cpu'] / m[1]['cpu']:.2f}x")
PY
