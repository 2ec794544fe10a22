#!/usr/bin/env bash
# make soak: a fresh tallyd under a long, mixed load (tests/load/soak.lua:
# small JSON, KServe JSON, raw bytes and KServe binary, in turn on every
# connection) from wrk at high concurrency, with a short timeout, so that
# any request that waits too long, any socket error and any status but
# 200 shows. Settings: SOAK_SECONDS (600), SOAK_CONNECTIONS (256),
# SOAK_TIMEOUT (1s), SOAK_THREADS (2), TALLYD (build/bin/tallyd),
# TALLYD_ARGS (extra flags). Passes when there is no error of any kind.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
TALLYD=${TALLYD:-$ROOT/build/bin/tallyd}
SECS=${SOAK_SECONDS:-600}
CONN=${SOAK_CONNECTIONS:-256}
TIMEOUT=${SOAK_TIMEOUT:-1s}
THREADS=${SOAK_THREADS:-2}

if ! command -v wrk >/dev/null 2>&1; then
  echo "soak: installing wrk"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

# shellcheck source=../lib.sh
. tests/lib.sh
scratch_dir tally-soak
TP=$(free_port)

python3 - "$tmp" <<'PY'
import json, sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(3)
open(d + "/small.json", "w").write(json.dumps(
    {"dtype": "float32", "shape": [16], "data": rng.random(16).astype(np.float32).tolist()}))
open(d + "/kserve.json", "w").write(json.dumps(
    {"inputs": [{"name": "x", "shape": [1, 1024], "datatype": "FP32",
                 "data": rng.random(1024).astype(np.float32).tolist()}],
     "parameters": {"axis": 1}}))
rng.random(4096, dtype=np.float32).tofile(d + "/raw.bin")
m = rng.random(65536, dtype=np.float32)
header = json.dumps({"inputs": [{"name": "x", "shape": [1, 65536], "datatype": "FP32",
                                 "parameters": {"binary_data_size": m.nbytes}}],
                     "parameters": {"axis": 1},
                     "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
open(d + "/kserve.bin", "wb").write(header + m.tobytes())
open(d + "/kserve_bin.hlen", "w").write(str(len(header)))
PY

# shellcheck disable=SC2086
start_tallyd tallyd "$TP" --access-log=false ${TALLYD_ARGS:-}
wait_ready "http://127.0.0.1:$TP" tallyd

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "wrk:     -t$THREADS -c$CONN -d${SECS}s --timeout $TIMEOUT, four request kinds in turn"
out=$(LOAD_DIR=$tmp wrk -t"$THREADS" -c"$CONN" -d"${SECS}s" --timeout "$TIMEOUT" \
  -s tests/load/soak.lua "http://127.0.0.1:$TP")
echo "$out" | grep -v '^RESULT'
line=$(echo "$out" | grep '^RESULT' | sed 's/^RESULT //')
echo "soak: $line"
curl -s "http://127.0.0.1:$TP/metrics" | grep -E '^tally_(requests_total|cancelled_total|open_connections)' || true
python3 - "$line" <<'PY'
import sys
f = dict(kv.split("=") for kv in sys.argv[1].split())
bad = sum(int(f[k]) for k in ("connect", "read", "write", "status", "timeout"))
print("soak: %s requests, %d errors of any kind; slowest %s ms" % (f["requests"], bad, f["max_ms"]))
sys.exit(1 if bad else 0)
PY
