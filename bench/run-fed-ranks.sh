#!/usr/bin/env bash
# One federation across 1 and 2 MPI ranks (RANKS="1 2 4" for more): bench/fed-ranks.json
# (Fashion-MNIST, 10,000 clients of 6 samples, q = 0.01: 100 clients a round, 20 rounds,
# MLP 784-64-10, client-side Gaussian noise; one thread per rank), run as `mpirun -n R
# fedpriv train` with R = 1 and 2, alternately, REPS times each (default 2). Prints per R
# the median of:
#   train s      the rounds' training time from the result (sampling, every client's
#                upload, the exchange between ranks, aggregation; evaluation excluded)
#   e2e s        the wall time of the whole mpirun command (data loading and MPI start-up in)
#   CPU s        user + system CPU of the job (every rank)
#   RSS MB       the peak resident memory of each rank (GNU time's %M, the largest over the
#                job's ranks; only where /usr/bin/time is installed)
# and the ratio of the training rates R / 1, with the load average before each run: on a
# machine shared with other work the wall-clock ratio measures the CPU share the ranks got.
# Every run must end with the same final test accuracy (the result is bit-identical).
# Environment: FEDPRIV (the binary, default ./fedpriv), MPIRUN (default mpirun), CONFIG,
# RANKS, REPS, OUT (default build/bench/fed-ranks); tools/pack-mpi.sh sets them for a
# machine without Open MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
fedpriv="${FEDPRIV:-./fedpriv}" mpirun="${MPIRUN:-mpirun}" config="${CONFIG:-bench/fed-ranks.json}"
[ -n "${FEDPRIV:-}" ] || [ -x ./fedpriv ] || make fedpriv
if ! command -v "$mpirun" >/dev/null || ! "$fedpriv" --version | grep -q " with MPI"; then
  echo "bench/run-fed-ranks.sh: skipped: needs mpirun and fedpriv built with MPI (make deps; make)" >&2
  exit 0
fi
root=""
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
out="${OUT:-build/bench}/fed-ranks"
mkdir -p "$out"
: > "$out/runs.txt"
reps="${REPS:-2}"
echo "== one federation across 1 and 2 MPI ranks ($(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))" >&2
for rep in $(seq "$reps"); do
  for r in ${RANKS:-1 2}; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    TIMEFORMAT='%R %U %S' # wall, and the CPU of every process of the job (children included)
    rm -f "$out"/rss.*
    # Each rank under GNU time, writing its peak RSS (KB) to rss.<rank>.
    wrap=()
    [ -x /usr/bin/time ] && wrap=(sh -c 'exec /usr/bin/time -f %M -o "$0.${OMPI_COMM_WORLD_RANK:-0}" "$@"' "$out/rss")
    { time "$mpirun" $root --oversubscribe --bind-to none -n "$r" "${wrap[@]}" "$fedpriv" train --config "$config" \
      --out "$out/r$r.json" 2> "$out/log-$r.txt"; } 2> "$out/time" ||
      { echo "ranks $r failed:" >&2; tail -5 "$out/log-$r.txt" >&2; exit 1; }
    rss=$(cat "$out"/rss.* 2>/dev/null | sort -n | tail -1)
    rss=$(( ${rss:-0} / 1024 ))
    train=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(x["train_seconds"] for x in d["rounds"]), d["final"]["test_accuracy"])' "$out/r$r.json")
    echo "$r $rep $train $(cat "$out/time") $load $rss" >> "$out/runs.txt"
    echo "   ranks $r, run $rep: $train (train s, accuracy); $(cat "$out/time") (wall, user, sys s); load $load; peak RSS per rank $rss MB" >&2
  done
done
python3 - "$out/runs.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
res, acc = {}, set()
for r, rep, train, a, wall, user, sys_, load, rss in rows:
    d = res.setdefault(int(r), {"train": [], "e2e": [], "cpu": [], "load": [], "rss": []})
    d["rss"].append(float(rss))
    d["train"].append(float(train)); d["e2e"].append(float(wall))
    d["cpu"].append(float(user) + float(sys_)); d["load"].append(float(load))
    acc.add(a)
m = {r: {k: statistics.median(v) for k, v in d.items()} for r, d in res.items()}
for r in sorted(m):
    print(f"ranks {r}: train {m[r]['train']:7.2f} s   e2e {m[r]['e2e']:7.2f} s   CPU {m[r]['cpu']:7.2f} s   "
          f"RSS/rank {m[r]['rss']:5.0f} MB   load before {', '.join(f'{x:.1f}' for x in res[r]['load'])}")
for r in sorted(m):
    if r > 1 and 1 in m:
        print(f"ratio {r}/1: {m[1]['train'] / m[r]['train']:.2f}x training rate{' (target >= 1.6x)' if r == 2 else ''}, "
              f"e2e {m[1]['e2e'] / m[r]['e2e']:.2f}x, CPU {m[r]['cpu'] / m[1]['cpu']:.2f}x")
print("final test accuracy: " + ", ".join(sorted(acc)) + (" (every run the same)" if len(acc) == 1 else " (RUNS DIFFER)"))
sys.exit(0 if len(acc) == 1 else 1)
PY
