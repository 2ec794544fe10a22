#!/usr/bin/env bash
# tests/fuzz/run.sh NAME...: runs each libFuzzer target that `make fuzz`
# built for FUZZ_SECONDS seconds (30), or for FUZZ_RUNS executions when
# that is set (the long runs of BENCHMARKS.md), one after another, and
# stops at the first that finds a crash, a leak, a timeout or a failed
# property.
#
# Each target reads its seeds from tests/fuzz/NAME/ and keeps what it finds
# in BUILD/corpus/NAME/ (BUILD: build-fuzz), so later runs start from
# there; tests/fuzz/NAME.options adds flags (one line, such as
# -max_len=65536) and tests/fuzz/NAME.dict is its dictionary. A failing
# input lands in BUILD/crash/, and the command to replay it is printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-fuzz}
SECS=${FUZZ_SECONDS:-30}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=suppressions=$(pwd)/tests/lsan.supp:print_suppressions=0
mkdir -p "$B/crash"
for name in "$@"; do
  corpus=$B/corpus/$name
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
  log=$B/$name.log
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
    exit 1
  fi
done
