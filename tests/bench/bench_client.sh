#!/usr/bin/env bash
# make bench-client: what splitting a tensor costs, measured with the CLI.
#
# Starts two tallyd daemons on free loopback ports and times `tally bench`
# (one request in flight, BENCH_COUNT requests each) on 64 MiB tensors:
# in one request, and split by the client into chunks sent to one server
# or spread over both. Prints the median request time and its ratio to the
# single request for each. On a machine with few cores the two servers and
# the client share them, so a second server cannot add speed here; the
# table shows the cost of the splitting itself.
#
# Settings: BENCH_COUNT (8), TALLYD, TALLY_CLI (build/bin/...).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
TALLYD=${TALLYD:-$ROOT/build/bin/tallyd}
CLI=${TALLY_CLI:-$ROOT/build/bin/tally}
COUNT=${BENCH_COUNT:-8}

# shellcheck source=../lib.sh
. tests/lib.sh
scratch_dir tally-bench-client
urls=()
for i in 1 2; do
  port=$(free_port)
  start_tallyd "tallyd$i" "$port"
  urls+=("http://127.0.0.1:$port")
done
wait_ready "${urls[0]}" tallyd1
wait_ready "${urls[1]}" tallyd2

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "tally bench --count $COUNT --concurrency 1, after one warm-up request"
echo

# p50 latency in ms of one configuration
p50() {
  "$CLI" bench --quiet --count 1 --concurrency 1 "$@" >/dev/null
  "$CLI" bench --quiet --count "$COUNT" --concurrency 1 "$@" \
    | sed -n 's/.*latency ms  p50 \([0-9.]*\).*/\1/p'
}

printf '%-44s %-22s %9s %7s\n' "tensor" "how" "p50 ms" "ratio"
run() {
  local label=$1 shape=$2 dtype=$3 axis=$4
  local base
  base=$(p50 --url "${urls[0]}" --chunk-bytes 0 --shape "$shape" --dtype "$dtype" --axis "$axis")
  printf '%-44s %-22s %9s %7s\n' "$label" "one request" "$base" "1.00"
  for cfg in "16777216 1" "16777216 2" "4194304 2"; do
    set -- $cfg
    local chunk=$1 n=$2 args=(--url "${urls[0]}")
    [ "$n" = 2 ] && args+=(--url "${urls[1]}")
    local t
    t=$(p50 "${args[@]}" --chunk-bytes "$chunk" --shape "$shape" --dtype "$dtype" --axis "$axis")
    printf '%-44s %-22s %9s %7s\n' "" "$((chunk >> 20)) MiB chunks, $n server$([ "$n" = 2 ] && echo s)" "$t" \
      "$(python3 -c "print('%.2f' % ($t / $base))")"
  done
}
run "float32 [16777216] axis 0 (carried)" 16777216 float32 0
run "float32 [4096,4096] axis 0 (column bands)" 4096,4096 float32 0
run "float32 [4096,4096] axis 1 (row slabs)" 4096,4096 float32 1
run "float16 [33554432] axis 0 (carried, as f32)" 33554432 float16 0
