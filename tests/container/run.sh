#!/usr/bin/env bash
# make test-container: the Dockerfile built and run for real, with podman.
#
#  1. installs podman when missing and makes a local Debian base image when
#     no registry answers (deploy/podman.sh);
#  2. builds the image (which runs the unit and codec tests and bakes the
#     kernel cache in its build stage; TALLY_IMAGE_TESTS=0 leaves the tests
#     out, as `make test` does after its own test-c);
#  3. runs it with host networking on a free port, --read-only, every
#     capability dropped, no new privileges; waits until it is ready by its
#     own account (running, its own health check passes, and the port's
#     listener is in its PID namespace, so no other server's answers are
#     taken for its; a port taken before it bound it is retried); checks: it runs as the
#     image's non-root user, its root filesystem refuses writes, cumsums
#     over curl (JSON and .npy) and through the CLI (inside the container
#     and from the host) are right, the landing page and /docs (with the
#     image's Swagger UI) answer, the image's HEALTHCHECK passes, the
#     device joins the pool (the baked kernel cache was used); then again
#     with an empty kernel cache, as on a CPU the image was not built for:
#     ready while the kernels build, answers right, exit 0 on SIGTERM;
#  4. starts a request that takes seconds, sends SIGTERM, and checks that
#     the request is answered and the container exits 0; then builds the
#     slim image (--target slim: no PoCL) and checks it as the full one,
#     from the host's side (it has no shell), and its size (120 MB at most);
#  5. plays deploy/k8s (rendered by kustomize) with `podman kube play` and
#     sends a cumsum through it;
#  6. validates deploy/compose.yaml with docker-compose (Debian's; its
#     Prometheus and Grafana images need a registry, so it is not started).
# Containers and pods are removed by id at the end, also on failure.
# podman's complaints that it cannot schedule health checks without systemd
# go to a log file: the HEALTHCHECK is run by hand instead.
#
# Settings: CONTAINER_WORK (/tmp/tally-containers: podman's storage and
# configuration), TALLY_IMAGE (localhost/tally:test), TALLY_CLI (the host's
# build/bin/tally), TALLY_IMAGE_TESTS (1: the build stage runs the unit and
# codec tests; 0: it does not).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
# shellcheck source=../../deploy/podman.sh
. deploy/podman.sh
IMAGE=${TALLY_IMAGE:-localhost/tally:test}
IMAGE_TESTS=${TALLY_IMAGE_TESTS:-1}
CLI=${TALLY_CLI:-$ROOT/build/bin/tally}
start=$SECONDS
if [ -f /run/.containerenv ]; then
  say "skipped: this is a podman container already (podman runs on the host)"
  exit 0
fi

containers=()
kube_file=""
tmp=$(mktemp -d /tmp/tally-container-test.XXXXXX)
cleanup() {
  for id in "${containers[@]}"; do podman rm -f -t 0 "$id" >/dev/null 2>&1 || true; done
  [ -n "$kube_file" ] && podman kube down "$kube_file" >/dev/null 2>&1 || true
  rm -rf "$tmp" deploy/.compose-check.yaml
}
trap cleanup EXIT

# ---------------------------------------------------------------- 1, 2
podman_ready
say "building $IMAGE"
t0=$SECONDS
podman_build "$IMAGE" "$tmp/build.log" --build-arg TESTS="$IMAGE_TESTS" \
  || { tail -40 "$tmp/build.log"; die "podman build"; }
# The build stage's tests ran now, or their step came from podman's cache:
# a layer is cached only when its RUN succeeded on the same inputs, as on a
# second `make test` with no source change.
if [ "$IMAGE_TESTS" = 1 ]; then
  tests_cached=$(awk '/STEP .*make test-units/ { getline; print ($0 ~ /Using cache/) }' "$tmp/build.log")
  grep -q "of .* cases failed" "$tmp/build.log" || [ "$tests_cached" = 1 ] \
    || die "the build stage ran no tests"
else
  say "the build stage's unit and codec tests left out (TALLY_IMAGE_TESTS=0)"
fi
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
say "built in $((SECONDS - t0)) s; image size $((size / 1000000)) MB"
labels=$(podman image inspect --format '{{json .Labels}}' "$IMAGE")
for l in org.opencontainers.image.source org.opencontainers.image.version \
         org.opencontainers.image.description org.opencontainers.image.revision; do
  echo "$labels" | grep -q "\"$l\":\"[^\"]" || die "label $l is missing or empty: $labels"
done
[ "$(podman image inspect --format '{{.Config.User}}' "$IMAGE")" = "10001:10001" ] \
  || die "the image does not run as 10001:10001"
grep -q "tally" <<<"$(podman image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE")" \
  || die "no HEALTHCHECK in the image (built without --format docker?)"

# ---------------------------------------------------------------- 3
# Whether a container's log has a line matching a pattern (grep -E, with
# grep's options before it). The log is read whole first: under pipefail,
# `podman logs | grep -q` fails whenever grep has stopped reading before
# podman has stopped writing (its own warnings come last, on the merged
# stderr), so a line that was there read as missing.
log_has() { # log_has ID [grep options] PATTERN
  local id=$1 text
  shift
  text=$(podman logs "$id" 2>&1) || true
  grep -q "$@" <<<"$text"
}
# log_waits ID TRIES PATTERN: until the log has PATTERN, TRIES times 0.2 s
# at most (conmon may hand podman logs the lines a moment late).
log_waits() {
  local id=$1 tries=$2
  for _ in $(seq 1 "$tries"); do
    log_has "$id" "$3" && return 0
    sleep 0.2
  done
  log_has "$id" "$3"
}

# json_cumsum WHAT: a small JSON cumsum from $URL, checked exactly.
json_cumsum() {
  local out
  out=$(curl -sf "$URL/v1/cumsum" -H 'Content-Type: application/json' \
    -d '{"dtype":"int32","shape":[2,3],"data":[1,2,3,4,5,6],"axis":1}')
  [ "$out" = '{"dtype":"int32","shape":[2,3],"data":[1,3,6,4,9,15]}' ] || die "$1 JSON cumsum: $out"
}

run_tally() { # run_tally PORT GRPC_PORT [podman run options...]: prints the id
  local port=$1 gport=$2
  shift 2
  podman run -d --network host --read-only --tmpfs /tmp --cap-drop ALL \
    --security-opt no-new-privileges "${ULIMITS[@]}" \
    -e TALLY_LISTEN="127.0.0.1:$port" -e TALLY_URL="http://127.0.0.1:$port" \
    -e TALLY_GRPC_LISTEN="127.0.0.1:$gport" \
    "$@" "$IMAGE" 2>>"$tmp/podman.err"
}
# The container is ready by its own account: it is still running, the
# image's own health check (tally health, inside it) passes, and the socket
# listening on its port belongs to a process in the container's PID
# namespace. A port that answers by itself proves nothing: the host's
# network is shared, and on a busy machine another process may take the
# port between free_port and the container's bind, or a stale server may
# hold it. Returns 1 when the container exited; 2 on a timeout.
container_ready() { # container_ready ID PORT SECONDS
  local id=$1 port=$2 deadline=$(($SECONDS + $3)) pid lpid
  while [ $SECONDS -lt $deadline ]; do
    [ "$(podman inspect --format '{{.State.Running}}' "$id" 2>/dev/null)" = true ] || return 1
    if podman exec "$id" tally health --quiet --url "http://127.0.0.1:$port" >/dev/null 2>&1; then
      pid=$(podman inspect --format '{{.State.Pid}}' "$id")
      lpid=$(ss -Hltnp "sport = :$port" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
      [ -n "$lpid" ] && [ "$(readlink "/proc/$lpid/ns/pid")" = "$(readlink "/proc/$pid/ns/pid")" ] \
        && return 0
      # another server has the port: the container fails to bind and exits
      say "port $port answers from pid ${lpid:-unknown}, outside container ${id:0:12}"
    fi
    sleep 0.2
  done
  return 2
}
# start_tally [podman run options...]: a container on a free port (and a
# free gRPC port), ready; sets ID, PORT, GPORT and URL. A container that exits before it is ready because
# its port was taken meanwhile is retried on another port, twice.
start_tally() {
  local try rc
  for try in 1 2 3; do
    PORT=$(free_port)
    GPORT=$(free_port)
    URL=http://127.0.0.1:$PORT
    ID=$(run_tally "$PORT" "$GPORT" "$@")
    containers+=("$ID")
    rc=0
    container_ready "$ID" "$PORT" 300 || rc=$?
    [ $rc = 0 ] && return 0
    if [ $rc = 1 ] && log_has "$ID" -i 'address already in use'; then
      say "port $PORT was taken before the container bound it; trying another"
      continue
    fi
    podman logs "$ID" 2>&1 | tail -20
    [ $rc = 1 ] && die "container ${ID:0:12} exited before it was ready"
    die "container ${ID:0:12} not ready in 300 s"
  done
  die "three ports were taken before a container could bind them"
}
t0=$SECONDS
start_tally
id=$ID
say "container ${id:0:12} ready in $((SECONDS - t0)) s on $URL"
log_waits "$id" 50 'kernels build in the background' || die "no device line in the log"
if log_has "$id" 'could not seed'; then
  die "the baked kernel cache was not used"
fi
[ -n "$(podman exec "$id" ls /tmp/pocl-cache)" ] || die "no kernel cache in /tmp/pocl-cache"
# with the baked cache the device joins in a second or two (a cold build
# takes about a minute on two cores)
log_waits "$id" 600 'joined the pool' || die "the device did not join the pool"
say "$(podman logs "$id" 2>&1 | grep -o 'joined the pool: its kernels were built in [0-9.]* s')"

uid=$(podman exec "$id" id -u)
[ "$uid" = 10001 ] || die "runs as uid $uid"
if podman exec "$id" sh -c 'echo x > /usr/local/x' 2>/dev/null; then
  die "the root filesystem is writable"
fi
[ "$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$id")" = true ] || die "not --read-only"
caps=$(podman exec "$id" sh -c 'grep CapEff /proc/self/status' | awk '{print $2}')
[ "$caps" = 0000000000000000 ] || die "effective capabilities $caps"
say "uid 10001, read-only root, no capabilities"

# JSON and .npy over curl
json_cumsum "full"
python3 -c 'import numpy as np; np.save("'"$tmp"'/x.npy", np.arange(1000, dtype=np.float64).reshape(10, 100))'
curl -sf --data-binary "@$tmp/x.npy" -H 'Content-Type: application/x-npy' \
  "$URL/v1/cumsum?axis=0&exclusive=true" -o "$tmp/y.npy" || die "npy cumsum"
python3 - "$tmp" <<'EOF' || die ".npy result"
import sys
import numpy as np
d = sys.argv[1]
x, y = np.load(d + "/x.npy"), np.load(d + "/y.npy")
want = np.concatenate([np.zeros((1, 100)), np.cumsum(x, axis=0)[:-1]])
assert np.array_equal(y, want), (y, want)
EOF
# the landing page and the interactive docs, with the image's Swagger UI
for path in / /docs /docs/swagger-ui-bundle.js /docs/swagger-ui.css /openapi.json; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$URL$path")
  [ "$code" = 200 ] || die "GET $path: $code"
done
size=$(curl -sf -o /dev/null -w '%{size_download}' "$URL/docs/swagger-ui-bundle.js")
[ "$size" -gt 100000 ] || die "Swagger UI's script is $size bytes"
# the CLI inside the container, and the host's against it
podman exec -i "$id" tally cumsum --reverse - - < "$tmp/x.npy" > "$tmp/z.npy" || die "tally in the container"
python3 -c 'import numpy as np, sys; x = np.load(sys.argv[1]); z = np.load(sys.argv[2]); assert np.array_equal(z, np.flip(np.cumsum(np.flip(x, 0), 0), 0))' \
  "$tmp/x.npy" "$tmp/z.npy" || die "the container's CLI result"
if [ -x "$CLI" ]; then
  "$CLI" cumsum --url "$URL" --axis -1 "$tmp/x.npy" "$tmp/w.npy" || die "the host's CLI"
  python3 -c 'import numpy as np, sys; x = np.load(sys.argv[1]); assert np.array_equal(np.load(sys.argv[2]), np.cumsum(x, 1))' \
    "$tmp/x.npy" "$tmp/w.npy" || die "the host CLI's result"
  "$CLI" health --url "$URL" >/dev/null || die "tally health from the host"
fi
podman healthcheck run "$id" || die "the HEALTHCHECK failed"
# gRPC (KServe v2 / Triton's GRPCInferenceService) from the host
python3 - "127.0.0.1:$GPORT" <<'EOF' || die "gRPC cumsum"
import sys
import numpy as np
import tritonclient.grpc as grpcclient
c = grpcclient.InferenceServerClient(sys.argv[1])
x = np.arange(100_000, dtype=np.float64)
i = grpcclient.InferInput("x", [100_000], "FP64")
i.set_data_from_numpy(x)
y = c.infer("cumsum", [i], client_timeout=30).as_numpy("y")
assert np.array_equal(y, np.cumsum(x)), y
EOF
say "cumsums over JSON, .npy, gRPC, the CLI inside and outside; health check passes"

podman kill --signal SIGTERM "$id" >/dev/null 2>>"$tmp/podman.err"
code=$(podman wait "$id" 2>>"$tmp/podman.err")
[ "$code" = 0 ] || die "exit code $code after SIGTERM"
podman rm "$id" >/dev/null 2>>"$tmp/podman.err"

# An empty kernel cache, as on a node whose CPU the image was not built on:
# tallyd itself as the entrypoint, so the baked cache is not copied in.
# Ready as soon as it listens; the host backend answers while PoCL builds.
t0=$SECONDS
start_tally --entrypoint /usr/local/bin/tallyd
id=$ID
say "with an empty kernel cache: container ${id:0:12} ready in $((SECONDS - t0)) s"
log_waits "$id" 50 'kernels build in the background' || die "cold: no background build in the log"
json_cumsum "cold"
curl -sf --data-binary "@$tmp/x.npy" -H 'Content-Type: application/x-npy' \
  "$URL/v1/cumsum?axis=0&exclusive=true" -o "$tmp/yc.npy" || die "cold npy cumsum"
python3 -c 'import numpy as np, sys; x = np.load(sys.argv[1]); y = np.load(sys.argv[2]); assert np.array_equal(y, np.concatenate([np.zeros((1, 100)), np.cumsum(x, 0)[:-1]]))' \
  "$tmp/x.npy" "$tmp/yc.npy" || die "the cold start's .npy result"
state=$(curl -sf "$URL/metrics" | grep '^tally_device_state{.* 1$' | grep -o 'state="[a-z]*"')
say "cumsums right while the device is $state"
podman kill --signal SIGTERM "$id" >/dev/null 2>>"$tmp/podman.err"
code=$(podman wait "$id" 2>>"$tmp/podman.err")
[ "$code" = 0 ] || die "exit code $code after SIGTERM during the build"
podman rm "$id" >/dev/null 2>>"$tmp/podman.err"

# ---------------------------------------------------------------- 4
start_tally -e TALLY_FAULT_DELAY_MS=3000 -e TALLY_INLINE_MAX_ELEMENTS=0
id=$ID
curl -s -o "$tmp/slow.json" -w '%{http_code}' "$URL/v1/cumsum" -H 'Content-Type: application/json' \
  -d '{"dtype":"int64","shape":[4],"data":[1,2,3,4]}' > "$tmp/slow.code" &
slow=$!
for _ in $(seq 1 100); do # until the request is in flight
  grep -q '^tally_inflight_requests [2-9]' <<<"$(curl -s "$URL/metrics")" && break
  sleep 0.05
done
t0=$SECONDS
podman stop --time 30 "$id" >/dev/null 2>>"$tmp/podman.err" # STOPSIGNAL: SIGTERM
wait "$slow" || true
[ "$(cat "$tmp/slow.code")" = 200 ] || die "the in-flight request got $(cat "$tmp/slow.code")"
grep -q '"data":\[1,3,6,10\]' "$tmp/slow.json" || die "the in-flight answer: $(cat "$tmp/slow.json")"
code=$(podman inspect --format '{{.State.ExitCode}}' "$id")
[ "$code" = 0 ] || die "exit code $code after draining"
log_has "$id" '"stopped"\|stopped' || die "no drain in the log"
say "SIGTERM with a request in flight: answered, exit 0 after $((SECONDS - t0)) s"
podman rm "$id" >/dev/null 2>>"$tmp/podman.err"

# ---------------------------------------------------------------- 4b
# The slim image (--target slim): no PoCL, no shell; on this CPU-only
# machine OpenCL finds no device and tallyd serves from the host backend.
# It is checked from the host's side, through /proc and podman: the same
# user, read-only root and capabilities as the full image, answers, the
# health check, a drain, and its size.
SLIM=${TALLY_SLIM_IMAGE:-localhost/tally:test-slim}
say "building $SLIM (--target slim)"
t0=$SECONDS
podman_build "$SLIM" "$tmp/build-slim.log" --target slim --build-arg TESTS="$IMAGE_TESTS" \
  || { tail -40 "$tmp/build-slim.log"; die "podman build --target slim"; }
size=$(podman image inspect --format '{{.Size}}' "$SLIM")
say "built in $((SECONDS - t0)) s; slim image size $((size / 1000000)) MB"
[ "$size" -le 120000000 ] || die "the slim image is $((size / 1000000)) MB, over 120 MB"
[ "$(podman image inspect --format '{{.Config.User}}' "$SLIM")" = "10001:10001" ] \
  || die "the slim image does not run as 10001:10001"
full_image=$IMAGE
IMAGE=$SLIM
t0=$SECONDS
start_tally
IMAGE=$full_image
id=$ID
say "slim container ${id:0:12} ready in $((SECONDS - t0)) s on $URL"
log_waits "$id" 50 'using the host backend' \
  || { podman logs "$id" 2>&1 | tail; die "the slim image's log does not say it uses the host backend"; }
pid=$(podman inspect --format '{{.State.Pid}}' "$id")
[ "$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")" = 10001 ] || die "slim: not uid 10001"
[ "$(awk '/^CapEff:/ {print $2}' "/proc/$pid/status")" = 0000000000000000 ] \
  || die "slim: effective capabilities"
awk '$5 == "/" {print $6}' "/proc/$pid/mountinfo" | grep -q '^ro' || die "slim: the root is writable"
json_cumsum "slim"
curl -sf --data-binary "@$tmp/x.npy" -H 'Content-Type: application/x-npy' \
  "$URL/v1/cumsum?axis=1&reverse=true" -o "$tmp/ys.npy" || die "slim npy cumsum"
python3 -c 'import numpy as np, sys; x = np.load(sys.argv[1]); assert np.array_equal(np.load(sys.argv[2]), np.flip(np.cumsum(np.flip(x, 1), 1), 1))' \
  "$tmp/x.npy" "$tmp/ys.npy" || die "the slim image's .npy result"
python3 - "127.0.0.1:$GPORT" <<'PYEOF' || die "slim gRPC cumsum"
import sys
import numpy as np
import tritonclient.grpc as grpcclient
c = grpcclient.InferenceServerClient(sys.argv[1])
x = np.arange(50_000, dtype=np.int64)
i = grpcclient.InferInput("x", [50_000], "INT64")
i.set_data_from_numpy(x)
assert np.array_equal(c.infer("cumsum", [i], client_timeout=30).as_numpy("y"), np.cumsum(x))
PYEOF
podman healthcheck run "$id" || die "the slim image's HEALTHCHECK failed"
podman kill --signal SIGTERM "$id" >/dev/null 2>>"$tmp/podman.err"
code=$(podman wait "$id" 2>>"$tmp/podman.err")
[ "$code" = 0 ] || die "slim: exit code $code after SIGTERM"
podman rm "$id" >/dev/null 2>>"$tmp/podman.err"
say "slim: uid 10001, read-only root, no capabilities, host backend, cumsums right, exit 0"

# ---------------------------------------------------------------- 5
if command -v kubectl >/dev/null 2>&1; then
  PORT=$(free_port)
  kube_file=$tmp/kube.yaml
  # the Deployment and its ConfigMap, with this image and a free port;
  # kube play has no use for the Service, HPA and PDB
  kubectl kustomize deploy/k8s | python3 tests/container/kube_for_podman.py \
    "$IMAGE" "$PORT" "$(free_port)" > "$kube_file"
  podman kube play --network host "$kube_file" > "$tmp/kube.log" 2>&1 \
    || { cat "$tmp/kube.log"; die "podman kube play"; }
  wait_http "http://127.0.0.1:$PORT/v2/health/ready" 300 || { cat "$tmp/kube.log"; die "the kube pod is not ready"; }
  out=$(curl -sf "http://127.0.0.1:$PORT/v1/cumsum" -H 'Content-Type: application/json' \
    -d '{"dtype":"float32","shape":[3],"data":[0.5,0.25,0.25]}')
  [ "$out" = '{"dtype":"float32","shape":[3],"data":[0.5,0.75,1]}' ] || die "kube cumsum: $out"
  podman kube down "$kube_file" >/dev/null
  kube_file=""
  say "deploy/k8s played with podman kube play and answered"
else
  say "kubectl is not installed: skipping podman kube play of deploy/k8s"
fi

# ---------------------------------------------------------------- 6
if ! command -v docker-compose >/dev/null 2>&1; then
  say "installing docker-compose"
  apt_locked install -y -qq --no-install-recommends docker-compose >/dev/null
fi
docker-compose -f deploy/compose.yaml config -q || die "docker-compose rejects deploy/compose.yaml"
sed 's/read_only: true/read_only: true\n    raed_only: true/' deploy/compose.yaml > deploy/.compose-check.yaml
if docker-compose -f deploy/.compose-check.yaml config -q 2>/dev/null; then
  rm -f deploy/.compose-check.yaml
  die "docker-compose accepts a misspelt key: the check checks nothing"
fi
rm -f deploy/.compose-check.yaml
say "deploy/compose.yaml is valid compose"
say "passed in $((SECONDS - start)) s"
