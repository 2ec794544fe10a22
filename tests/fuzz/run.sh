#!/usr/bin/env bash
# tests/fuzz/run.sh NAME...: runs each libFuzzer target that `make fuzz`
# built for FUZZ_SECONDS seconds (30), or for FUZZ_RUNS executions when
# that is set (the long runs of BENCHMARKS.md), FUZZ_JOBS at a time (2: one
# a core on the machines this runs on), and fails when any finds a crash,
# a leak, a timeout or a failed property; once one has failed, no further
# target is started.
#
# Each target reads its seeds from tests/fuzz/NAME/ and keeps what it finds
# in BUILD/corpus/NAME/ (BUILD: build-fuzz), so later runs start from
# there; tests/fuzz/NAME.options adds flags (one line, such as
# -max_len=65536) and tests/fuzz/NAME.dict is its dictionary. A failing
# input lands in BUILD/crash/, and the command to replay it is printed.
# Targets that run at once share nothing: each has its own corpus, log,
# PoCL cache and crash prefix.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-fuzz}
SECS=${FUZZ_SECONDS:-30}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=suppressions=$(pwd)/tests/lsan.supp:print_suppressions=0
mkdir -p "$B/crash"
JOBS=${FUZZ_JOBS:-2}

# fuzz_one NAME: one target's run; its summary line, or its failure
fuzz_one() {
  local name=$1 corpus=$B/corpus/$1 log=$B/$1.log flags extra t0 rc runs cov ft files crash
  mkdir -p "$corpus"
  if [ -n "${FUZZ_RUNS:-}" ]; then
    flags=(-runs="$FUZZ_RUNS")
  else
    flags=(-max_total_time="$SECS")
  fi
  flags+=(-timeout=20 -rss_limit_mb=6144 -print_final_stats=1
          -artifact_prefix="$B/crash/$name-")
  [ -f "tests/fuzz/$name.options" ] && read -r -a extra < "tests/fuzz/$name.options" \
    && flags+=("${extra[@]}")
  [ -f "tests/fuzz/$name.dict" ] && flags+=(-dict="tests/fuzz/$name.dict")
  t0=$(date +%s)
  set +e
  POCL_CACHE_DIR=$(pwd)/$B/pocl-$name "$B/bin/$name" "${flags[@]}" "$corpus" \
    "tests/fuzz/$name" > "$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$corpus" -type f | wc -l)
  echo "fuzz: $name: ${runs:-?} runs in $(( $(date +%s) - t0 )) s, cov ${cov:-?}," \
    "ft ${ft:-?}, corpus $files"
  if [ "$rc" -ne 0 ]; then
    tail -60 "$log"
    crash=$(ls -t "$B/crash/$name-"* 2>/dev/null | head -1 || true)
    echo "fuzz: $name FAILED (exit $rc)${crash:+; replay: $B/bin/$name $crash}"
    return 1
  fi
}

# Each target's output is printed whole when it ends, so that two running
# at once do not interleave their lines.
failed=0
running=0
for name in "$@"; do
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  [ "$failed" = 0 ] || break
  ( rc=0; out=$(fuzz_one "$name") || rc=$?; echo "$out"; exit "$rc" ) &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
