#!/usr/bin/env bash
# Runs the libFuzzer targets, two at a time at the lowest CPU priority, each for
# SECONDS (default 600), and prints each target's final coverage and speed.
#
#   bash fuzz/run.sh [SECONDS] [TARGET ...]     (targets default to every fuzz/fuzz_*.c)
#
# New inputs go to build/fuzz/work/TARGET (the committed seeds in fuzz/corpus/TARGET
# are read, never written); crashes, leaks, timeouts and OOMs to
# build/fuzz/artifacts/TARGET/; the full log to build/fuzz/logs/TARGET.log. A finding
# is copied to fuzz/corpus/TARGET/regress-* once fixed (see docs/security.md).
# A target with a dictionary fuzz/dict/TARGET.dict runs with it; the JSON targets get
# fuzz/dict/json.dict (tokens, duplicate keys, escapes, control characters) in front.
set -u
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in fuzz/fuzz_*.c; do t=${f#fuzz/fuzz_}; targets+=("${t%.c}"); done
fi
mkdir -p build/fuzz/logs build/fuzz/dict
run_one() {
    t=$1 secs=$2
    make --no-print-directory -s "build/fuzz/fuzz_$t" >/dev/null || { echo "$t: build failed"; return 1; }
    mkdir -p "build/fuzz/work/$t" "build/fuzz/artifacts/$t"
    dict=()
    if [ -f "fuzz/dict/$t.dict" ]; then
        case $t in
            config|matrix|baseline|mnist_json) cat fuzz/dict/json.dict "fuzz/dict/$t.dict" >"build/fuzz/dict/$t.dict" ;;
            *) cp "fuzz/dict/$t.dict" "build/fuzz/dict/$t.dict" ;;
        esac
        dict=(-dict="build/fuzz/dict/$t.dict")
    fi
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
        nice -n 19 "build/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="build/fuzz/artifacts/$t/" ${dict[@]+"${dict[@]}"} \
        "build/fuzz/work/$t" "fuzz/corpus/$t" >"build/fuzz/logs/$t.log" 2>&1
    rc=$?
    done_line=$(grep -E '^#[0-9]+.*(DONE|cov:)' "build/fuzz/logs/$t.log" | tail -1)
    execs=$(grep -E '^stat::number_of_executed_units' "build/fuzz/logs/$t.log" | awk '{print $2}')
    speed=$(grep -E '^stat::average_exec_per_sec' "build/fuzz/logs/$t.log" | awk '{print $2}')
    echo "$t: exit $rc, ${secs}s, executions ${execs:-?}, exec/s ${speed:-?}, last: $done_line"
}
export -f run_one
printf '%s\n' "${targets[@]}" | xargs -P 2 -I{} bash -c "run_one {} $secs"
