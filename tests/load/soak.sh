#!/usr/bin/env bash
# make soak: a fresh tallyd under a long, mixed load from wrk at high
# concurrency (tests/load/soak.lua: valid requests of several sizes and
# formats, and invalid ones that must each get their own 4xx), while its
# resident memory and open file descriptors are sampled every
# SOAK_SAMPLE seconds.
#
# Passes when every answer had the status its request expects, no
# connection failed and no request took longer than SOAK_TIMEOUT, tallyd
# is alive at the end and drains to exit 0 on SIGTERM, and after the
# warm-up (the first tenth of the run, at least 15 s) RSS and descriptors
# each stay within 10% of their level at its end.
#
# Settings: SOAK_SECONDS (600), SOAK_CONNECTIONS (256), SOAK_TIMEOUT (2s),
# SOAK_THREADS (2), SOAK_SAMPLE (5), SOAK_CSV (a file for the samples),
# TALLYD (build/bin/tallyd), TALLYD_ARGS (extra flags).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
TALLYD=${TALLYD:-$ROOT/build/bin/tallyd}
SECS=${SOAK_SECONDS:-600}
CONN=${SOAK_CONNECTIONS:-256}
TIMEOUT=${SOAK_TIMEOUT:-2s}
THREADS=${SOAK_THREADS:-2}
SAMPLE=${SOAK_SAMPLE:-5}

if ! command -v wrk >/dev/null 2>&1; then
  echo "soak: installing wrk"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

# shellcheck source=../lib.sh
. tests/lib.sh
scratch_dir tally-soak

python3 - "$tmp" <<'PY'
import gzip, io, json, sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(3)
small = json.dumps({"dtype": "float32", "shape": [16],
                    "data": rng.random(16).astype(np.float32).tolist()}).encode()
open(d + "/small.json", "wb").write(small)
open(d + "/small.json.gz", "wb").write(gzip.compress(small))
open(d + "/kserve.json", "w").write(json.dumps(
    {"inputs": [{"name": "x", "shape": [1, 1024], "datatype": "FP32",
                 "data": rng.random(1024).astype(np.float32).tolist()}],
     "parameters": {"axis": 1}}))
rng.random(4096, dtype=np.float32).tofile(d + "/raw.bin")
b = io.BytesIO()
np.save(b, rng.random((128, 128)))
open(d + "/x.npy", "wb").write(b.getvalue())
broken = bytearray(b.getvalue()[:256])
broken[20:30] = b"'shape': ("       # a header that no longer parses
open(d + "/broken.npy", "wb").write(bytes(broken))
open(d + "/large.bin", "wb").write(bytes(2000000))
m = rng.random(65536, dtype=np.float32)
header = json.dumps({"inputs": [{"name": "x", "shape": [1, 65536], "datatype": "FP32",
                                 "parameters": {"binary_data_size": m.nbytes}}],
                     "parameters": {"axis": 1},
                     "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
open(d + "/kserve.bin", "wb").write(header + m.tobytes())
open(d + "/kserve_bin.hlen", "w").write(str(len(header)))
PY

# shellcheck disable=SC2086
start_tallyd tallyd 0 --access-log=off --max-body-bytes 1MiB ${TALLYD_ARGS:-}
TPID=${pids[-1]}
TP=$(bound_port tallyd)
wait_ready "http://127.0.0.1:$TP" tallyd

# RSS (kB) and descriptors of tallyd, every SAMPLE seconds
CSV=${SOAK_CSV:-$tmp/samples.csv}
echo "seconds,rss_kb,fds" > "$CSV"
(
  t0=$(date +%s)
  while kill -0 "$TPID" 2>/dev/null; do
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$TPID/status" 2>/dev/null || echo 0)
    fds=$(ls "/proc/$TPID/fd" 2>/dev/null | wc -l)
    echo "$(( $(date +%s) - t0 )),$rss,$fds" >> "$CSV"
    sleep "$SAMPLE"
  done
) &
pids+=($!)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "wrk:     -t$THREADS -c$CONN -d${SECS}s --timeout $TIMEOUT, 20 request kinds in turn"
out=$(LOAD_DIR=$tmp wrk -t"$THREADS" -c"$CONN" -d"${SECS}s" --timeout "$TIMEOUT" \
  -s tests/load/soak.lua "http://127.0.0.1:$TP")
echo "$out" | grep -v '^RESULT'
line=$(echo "$out" | grep '^RESULT' | sed 's/^RESULT //')
echo "soak: $line"
curl -s "http://127.0.0.1:$TP/metrics" \
  | grep -E '^tally_(requests_total|cancelled_total|open_connections|connections_)' || true

alive=1
kill -0 "$TPID" 2>/dev/null || alive=0
code=0
if [ "$alive" = 1 ]; then
  kill -TERM "$TPID"
  wait "$TPID" || code=$?
fi
python3 - "$line" "$CSV" "$SECS" "$alive" "$code" <<'PY'
import csv, sys
line, path, secs, alive, code = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
f = dict(kv.split("=") for kv in line.split())
errors = sum(int(f[k]) for k in ("connect", "read", "write", "timeout"))
unexpected = int(f["unexpected"])
print("soak: %s requests of %s kinds, %d with an unexpected status, %d socket errors "
      "or timeouts; slowest %s ms" % (f["requests"], f["kinds"], unexpected, errors,
                                       f["max_ms"]))
rows = [(int(r["seconds"]), int(r["rss_kb"]), int(r["fds"])) for r in csv.DictReader(open(path))]
warm = max(15, secs // 10)
after = [r for r in rows if r[0] >= warm]
ok = unexpected == 0 and errors == 0 and alive == "1" and code == 0
if not after:
    print("soak: no sample after the warm-up")
    ok = False
else:
    base = after[0]
    print("soak: RSS and open descriptors, sampled (baseline at %d s, the end of the warm-up):"
          % base[0])
    print("  %8s %10s %8s %6s" % ("seconds", "RSS MiB", "vs base", "fds"))
    step = max(1, len(rows) // 40)
    for r in rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else []):
        print("  %8d %10.1f %+7.1f%% %6d" % (r[0], r[1] / 1024, 100.0 * (r[1] / base[1] - 1), r[2]))
    rss = [r[1] / base[1] for r in after]
    fds = [r[2] / base[2] for r in after]
    print("soak: after warm-up RSS %.1f-%.1f MiB (%+.1f%% to %+.1f%%), descriptors %d-%d "
          "(%+.1f%% to %+.1f%%)" % (min(r[1] for r in after) / 1024, max(r[1] for r in after) / 1024,
                                     100 * (min(rss) - 1), 100 * (max(rss) - 1),
                                     min(r[2] for r in after), max(r[2] for r in after),
                                     100 * (min(fds) - 1), 100 * (max(fds) - 1)))
    if max(rss) > 1.10 or min(rss) < 0.90 or max(fds) > 1.10 or min(fds) < 0.90:
        print("soak: RSS or descriptors moved more than 10% from the baseline")
        ok = False
if alive != "1":
    print("soak: tallyd died during the run")
elif code != 0:
    print("soak: tallyd exited %d after SIGTERM" % code)
print("soak: %s" % ("passed" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
