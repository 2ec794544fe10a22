#!/usr/bin/env bash
# make load: tallyd under wrk, next to the machine's HTTP ceiling.
#
# Starts a fresh tallyd and an nginx (Debian's, installed if missing) on
# free loopback ports and runs, with the same wrk settings against both
# where it makes sense:
#   1. small JSON: 16 float32 values per request, vs nginx returning a
#      fixed body of the same size (the ceiling); prints the ratio
#   2. KServe binary: 1M float32 per request
#   3. large .npy: a 64 MiB float32 array per request (p99 at most 2x p50)
#   4. one 64 MiB .npy round trip with curl, vs curl moving the same bytes
#      up to and down from nginx; prints the ratio
#   5. 1 and 2 again over HTTPS (a second tallyd with --tls-cert and a
#      throwaway self-signed certificate, TLS 1.3): requests/s beside
#      plain HTTP
#   6. the access log's cost: small JSON, and a flood of bad requests (all
#      400), against the first tallyd (the default, --access-log=errors)
#      and a third with --access-log=all; requests/s, and the log's bytes
#      per second as written to a file
#   7. tracing's cost: small JSON against tallyds that send spans (OTLP,
#      to nginx standing in for a collector) at ratio 1 and 0.01, beside
#      the first tallyd (tracing off), each run twice in turns; requests/s
#      and the ratios (goals: >= 0.95 at ratio 1, >= 0.99 at 0.01)
# Settings: LOAD_SECONDS (10), LOAD_CONNECTIONS (32), LOAD_THREADS (2),
# TALLYD (build/bin/tallyd), TALLYD_ARGS (extra flags).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
TALLYD=${TALLYD:-$ROOT/build/bin/tallyd}
SECONDS_=${LOAD_SECONDS:-10}
CONN=${LOAD_CONNECTIONS:-32}
THREADS=${LOAD_THREADS:-2}

for tool in wrk nginx curl python3; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
    echo "load: installing $tool"
    [ -n "${apt_updated:-}" ] || { apt-get update -qq; apt_updated=1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$( [ "$tool" = nginx ] && echo nginx-light || echo "$tool")" >/dev/null
  fi
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

# shellcheck source=../lib.sh
. tests/lib.sh
scratch_dir tally-load
chmod 755 "$tmp" # nginx's workers read the static file as another user
TP=$(free_port)
NP=$(free_port)

# ---------------------------------------------------------------- inputs
python3 - "$tmp" <<'EOF'
import json, sys
import numpy as np
d = sys.argv[1]
x = np.random.default_rng(1).random(16 << 20, dtype=np.float32)  # 64 MiB
np.save(d + "/big.npy", x)
m = np.random.default_rng(2).random(1 << 20, dtype=np.float32)   # 4 MiB
header = json.dumps({"inputs": [{"name": "x", "shape": [1 << 20], "datatype": "FP32",
                                 "parameters": {"binary_data_size": m.nbytes}}],
                     "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
open(d + "/kserve.bin", "wb").write(header + m.tobytes())
open(d + "/kserve.hlen", "w").write(str(len(header)))
EOF
mkdir -p "$tmp/www"
cp "$tmp/big.npy" "$tmp/www/big.npy"
chmod -R a+rX "$tmp"

# ---------------------------------------------------------------- servers
start_tallyd tallyd "$TP" ${TALLYD_ARGS:-}
TLSP=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem" \
  >/dev/null 2>&1
start_tallyd tallyd-tls "$TLSP" --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem" \
  ${TALLYD_ARGS:-}

SMALL_REPLY='{"dtype":"float32","shape":[16],"data":[0.5,1.5,3,5,7.5,10.5,14,18,22.5,27.5,33,39,45.5,52.5,60,68]}'
cat > "$tmp/nginx.conf" <<EOF
daemon off;
worker_processes auto;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx-body;
  proxy_temp_path $tmp/nginx-proxy;
  fastcgi_temp_path $tmp/nginx-fastcgi;
  uwsgi_temp_path $tmp/nginx-uwsgi;
  scgi_temp_path $tmp/nginx-scgi;
  server {
    listen 127.0.0.1:$NP;
    location = /small { default_type application/json; return 200 '$SMALL_REPLY'; }
    location = /sink { client_max_body_size 1g; client_body_buffer_size 128m; return 200; }
    location = /v1/traces { client_max_body_size 64m; client_body_buffer_size 8m; return 200; }
    location / { root $tmp/www; }
  }
}
EOF
"$NGINX" -c "$tmp/nginx.conf" &
pids+=($!)

for i in $(seq 1 3000); do
  if curl -sf "http://127.0.0.1:$TP/v2/health/ready" >/dev/null 2>&1 \
     && curl -sf "http://127.0.0.1:$NP/small" -o /dev/null 2>&1; then
    break
  fi
  sleep 0.1
done
curl -sf "http://127.0.0.1:$TP/v2/health/ready" >/dev/null || { cat "$tmp/tallyd.log"; exit 1; }
for i in $(seq 1 3000); do
  curl -sf --cacert "$tmp/cert.pem" "https://127.0.0.1:$TLSP/v2/health/ready" >/dev/null 2>&1 \
    && break
  sleep 0.1
done
curl -sf --cacert "$tmp/cert.pem" "https://127.0.0.1:$TLSP/v2/health/ready" >/dev/null \
  || { cat "$tmp/tallyd-tls.log"; exit 1; }
curl -sf "http://127.0.0.1:$NP/big.npy" -o /dev/null \
  || { echo "nginx cannot serve the test file:"; cat "$tmp/nginx-error.log"; exit 1; }

# ---------------------------------------------------------------- wrk
script() { cat "tests/load/$1" tests/load/report.lua > "$tmp/$1"; echo "$tmp/$1"; }
result() { grep '^RESULT' | sed 's/^RESULT //'; }
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "tallyd:  $(grep -o '"msg":"device ready[^"]*"' "$tmp/tallyd.log" | sed 's/"msg":"//; s/"$//')"
echo "wrk:     -t$THREADS -c$CONN -d${SECONDS_}s (large bodies: -t2 -c2)"
echo

small=$(wrk -t"$THREADS" -c"$CONN" -d"${SECONDS_}s" -s "$(script small_json.lua)" \
  "http://127.0.0.1:$TP" | result)
ceiling=$(LOAD_PATH=/small wrk -t"$THREADS" -c"$CONN" -d"${SECONDS_}s" \
  -s "$(script small_json.lua)" "http://127.0.0.1:$NP" | result)
kserve=$(LOAD_PATH=/v2/models/cumsum/infer LOAD_BODY=$tmp/kserve.bin \
  LOAD_HLEN=$(cat "$tmp/kserve.hlen") \
  wrk -t"$THREADS" -c8 -d"${SECONDS_}s" --timeout 30s -s "$(script file_body.lua)" \
  "http://127.0.0.1:$TP" | result)
# one wrk thread per connection: a thread that uploads one 64 MiB body
# while it downloads another answer's stalls both (p99 5x p50 with -t1)
large=$(LOAD_PATH='/v1/cumsum?axis=0' LOAD_BODY=$tmp/big.npy LOAD_TYPE=application/x-npy \
  wrk -t2 -c2 -d"${SECONDS_}s" --timeout 60s -s "$(script file_body.lua)" \
  "http://127.0.0.1:$TP" | result)

small_tls=$(wrk -t"$THREADS" -c"$CONN" -d"${SECONDS_}s" -s "$(script small_json.lua)" \
  "https://127.0.0.1:$TLSP" | result)
kserve_tls=$(LOAD_PATH=/v2/models/cumsum/infer LOAD_BODY=$tmp/kserve.bin \
  LOAD_HLEN=$(cat "$tmp/kserve.hlen") \
  wrk -t"$THREADS" -c8 -d"${SECONDS_}s" --timeout 30s -s "$(script file_body.lua)" \
  "https://127.0.0.1:$TLSP" | result)

printf '%-38s %10s %9s %9s %9s %7s\n' "load" "req/s" "p50 ms" "p90 ms" "p99 ms" "errors"
row() {
  printf '%-38s %10s %9s %9s %9s %7s\n' "$1" "$(field "$2" rps)" "$(field "$2" p50_ms)" \
    "$(field "$2" p90_ms)" "$(field "$2" p99_ms)" "$(field "$2" errors)"
}
row "tallyd: small JSON (16 float32)" "$small"
row "nginx: fixed small body (ceiling)" "$ceiling"
row "tallyd: KServe binary (1M float32)" "$kserve"
row "tallyd: .npy 64 MiB float32" "$large"
row "tallyd HTTPS: small JSON (16 float32)" "$small_tls"
row "tallyd HTTPS: KServe binary (1M f32)" "$kserve_tls"
echo
python3 - "$(field "$small" rps)" "$(field "$small_tls" rps)" "$(field "$kserve" rps)" \
  "$(field "$kserve_tls" rps)" <<'EOF'
import sys
s, st, k, kt = map(float, sys.argv[1:])
print("HTTPS vs plain HTTP: small JSON %.2f, KServe binary 1M %.2f" % (st / s, kt / k))
EOF
python3 - "$(field "$small" rps)" "$(field "$ceiling" rps)" <<'EOF'
import sys
t, n = float(sys.argv[1]), float(sys.argv[2])
print("small JSON vs ceiling: %.2f (goal >= 0.50)" % (t / n))
EOF
python3 - "$(field "$large" p50_ms)" "$(field "$large" p99_ms)" <<'EOF'
import sys
p50, p99 = float(sys.argv[1]), float(sys.argv[2])
print("64 MiB .npy tail: p99 %.1f ms = %.2f x p50 (goal <= 2)" % (p99, p99 / p50))
EOF

# ---------------------------------------------------------------- 64 MiB round trip
median_time() {
  local times=()
  for _ in 1 2 3 4 5; do times+=("$("$@")"); done
  printf '%s\n' "${times[@]}" | sort -g | sed -n 3p
}
t_tally=$(median_time curl -sf -o /dev/null -w '%{time_total}' --data-binary "@$tmp/big.npy" \
  -H 'Content-Type: application/x-npy' "http://127.0.0.1:$TP/v1/cumsum?axis=0")
t_up=$(median_time curl -sf -o /dev/null -w '%{time_total}' --data-binary "@$tmp/big.npy" \
  "http://127.0.0.1:$NP/sink")
t_down=$(median_time curl -sf -o /dev/null -w '%{time_total}' "http://127.0.0.1:$NP/big.npy")
python3 - "$t_tally" "$t_up" "$t_down" <<'EOF'
import sys
t, up, down = map(float, sys.argv[1:])
print("64 MiB .npy round trip: tallyd %.3f s; loopback up %.3f s + down %.3f s = %.3f s; "
      "ratio %.2f (goal <= 1.50)" % (t, up, down, up + down, t / (up + down)))
EOF

# ---------------------------------------------------------------- access log
# the first tallyd has the default --access-log=errors; a third one logs
# every request, to a file, as an operator's would be
AP=$(free_port)
start_tallyd tallyd-all "$AP" --access-log=all ${TALLYD_ARGS:-}
wait_ready "http://127.0.0.1:$AP" tallyd-all
log_rate() { # log_rate NAME COMMAND...: runs it; prints "RESULT..." and log_mb_s=
  local before after out
  before=$(stat -c %s "$tmp/$1.log")
  out=$("${@:2}" | result)
  after=$(stat -c %s "$tmp/$1.log")
  echo "$out log_mb_s=$(python3 -c "print('%.2f' % (($after - $before) / 1e6 / $(field "$out" seconds)))")"
}
small_err=$(log_rate tallyd wrk -t"$THREADS" -c"$CONN" -d"${SECONDS_}s" -s "$(script small_json.lua)" \
  "http://127.0.0.1:$TP")
small_all=$(log_rate tallyd-all wrk -t"$THREADS" -c"$CONN" -d"${SECONDS_}s" \
  -s "$(script small_json.lua)" "http://127.0.0.1:$AP")
bad_err=$(log_rate tallyd wrk -t"$THREADS" -c"$CONN" -d"${SECONDS_}s" -s "$(script bad_json.lua)" \
  "http://127.0.0.1:$TP")
bad_all=$(log_rate tallyd-all wrk -t"$THREADS" -c"$CONN" -d"${SECONDS_}s" \
  -s "$(script bad_json.lua)" "http://127.0.0.1:$AP")
echo
printf '%-44s %10s %9s %9s %12s\n' "access log" "req/s" "p50 ms" "p99 ms" "log MB/s"
arow() {
  printf '%-44s %10s %9s %9s %12s\n' "$1" "$(field "$2" rps)" "$(field "$2" p50_ms)" \
    "$(field "$2" p99_ms)" "$(field "$2" log_mb_s)"
}
arow "small JSON, --access-log=errors (default)" "$small_err"
arow "small JSON, --access-log=all" "$small_all"
arow "bad JSON (400), --access-log=errors" "$bad_err"
arow "bad JSON (400), --access-log=all" "$bad_all"
python3 - "$(field "$small_err" rps)" "$(field "$small_all" rps)" "$(field "$bad_err" rps)" \
  "$(field "$bad_all" rps)" <<'EOF2'
import sys
se, sa, be, ba = map(float, sys.argv[1:])
print("--access-log=all vs errors, requests/s: small JSON %.2f, bad JSON %.2f" % (sa / se, ba / be))
EOF2

# ---------------------------------------------------------------- tracing
T1P=$(free_port)
T2P=$(free_port)
start_tallyd tallyd-trace1 "$T1P" --otlp-endpoint "http://127.0.0.1:$NP" --trace-ratio 1 \
  ${TALLYD_ARGS:-}
start_tallyd tallyd-trace001 "$T2P" --otlp-endpoint "http://127.0.0.1:$NP" \
  --trace-ratio 0.01 ${TALLYD_ARGS:-}
wait_ready "http://127.0.0.1:$T1P" tallyd-trace1
wait_ready "http://127.0.0.1:$T2P" tallyd-trace001
small_at() { wrk -t"$THREADS" -c"$CONN" -d"${SECONDS_}s" -s "$(script small_json.lua)" \
  "http://127.0.0.1:$1" | result; }
off_a=$(small_at "$TP"); r1_a=$(small_at "$T1P"); r001_a=$(small_at "$T2P")
off_b=$(small_at "$TP"); r1_b=$(small_at "$T1P"); r001_b=$(small_at "$T2P")
exported=$(curl -sf "http://127.0.0.1:$T1P/metrics" | sed -n 's/^tally_trace_spans_total{result="exported"} //p')
dropped=$(curl -sf "http://127.0.0.1:$T1P/metrics" | sed -n 's/^tally_trace_dropped_requests_total //p')
echo
printf '%-44s %10s %9s %9s\n' "tracing (small JSON)" "req/s" "p50 ms" "p99 ms"
trow() {
  printf '%-44s %10s %9s %9s\n' "$1" "$(field "$2" rps)" "$(field "$2" p50_ms)" "$(field "$2" p99_ms)"
}
trow "off (run 1)" "$off_a"
trow "ratio 1 (run 1)" "$r1_a"
trow "ratio 0.01 (run 1)" "$r001_a"
trow "off (run 2)" "$off_b"
trow "ratio 1 (run 2)" "$r1_b"
trow "ratio 0.01 (run 2)" "$r001_b"
echo "ratio 1's tallyd: $exported spans exported, $dropped requests' spans dropped"
python3 - "$(field "$off_a" rps)" "$(field "$r1_a" rps)" "$(field "$r001_a" rps)" \
  "$(field "$off_b" rps)" "$(field "$r1_b" rps)" "$(field "$r001_b" rps)" <<'EOF3'
import sys
oa, ra, qa, ob, rb, qb = map(float, sys.argv[1:])
off = (oa + ob) / 2
print("tracing vs off, requests/s: ratio 1 %.3f (goal >= 0.95), ratio 0.01 %.3f (goal >= 0.99)"
      % ((ra + rb) / 2 / off, (qa + qb) / 2 / off))
EOF3
