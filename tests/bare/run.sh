#!/usr/bin/env bash
# make test-bare: the README's first command as a newcomer meets it, on a
# bare Debian 12. A container of the minimal bookworm root filesystem that
# deploy/podman.sh makes for the image (debootstrap --variant=minbase: no
# compiler, no Python, no curl) gets `make` and nothing else, and a copy of
# this tree as a clone would have it (the files git tracks, and the new
# ones it does not ignore); then `make run` must install what it needs,
# build, start tallyd, and answer a first request, the docs page included.
#
# Shared with the container test: podman's setup and the base image. Kept
# between runs on one machine, as CI keeps caches: the .deb files apt
# downloads (TALLY_APT_CACHE, /var/cache/tally-ci/apt-bare), so a second
# run downloads nothing; and, copied in, the kernels the tests compiled
# (build/pocl-cache), so tallyd's first start need not compile them again
# (a fresh machine's first start does: about a minute on two cores).
#
# Each step's time is printed; the README says what a user waits for.
#
#   bash tests/bare/run.sh               make run and a first request (CI)
#   bash tests/bare/run.sh --make-test   the README's second command there
#                                        too: make test, whole, less the
#                                        two tests that need podman on the
#                                        host (the container test and this),
#                                        from an empty kernel cache, as a
#                                        new machine has (apt's and pip's
#                                        downloads come from their caches)
set -euo pipefail
if [ "${1:-}" = --make-test ]; then
  MAKE_TEST=1
else
  MAKE_TEST=0
fi
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
. deploy/podman.sh
APT_CACHE=${TALLY_APT_CACHE:-/var/cache/tally-ci/apt-bare}
LIMIT=${TALLY_BARE_SECONDS:-1500} # first run: apt downloads a few hundred MB
start=$SECONDS

say() { echo "bare: $*"; }
die() { echo "bare: FAILED: $*" >&2; exit 1; }

tmp=$(mktemp -d /tmp/tally-bare-test.XXXXXX)
id=""
cleanup() {
  [ -n "$id" ] && podman rm -f -t 0 "$id" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
if [ -f /run/.containerenv ]; then
  say "skipped: this is a podman container already (podman runs on the host)"
  exit 0
fi

podman_ready
mkdir -p "$APT_CACHE" "$tmp/pocl"

# the tree as a clone has it: no build/, nothing git ignores
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | tar -c --null -T - -f "$tmp/tree.tar"
[ -d build/pocl-cache ] && cp -r build/pocl-cache/. "$tmp/pocl/"

# Inside: make, then the README's command. tallyd binds port 0 and says
# which port it got; the kernel cache is the copy above.
id=$(podman run -d --network host "${ULIMITS[@]}" \
  -v "$tmp/tree.tar:/tree.tar:ro" -v "$APT_CACHE:/var/cache/apt/archives" \
  -v "$tmp/pocl:/pocl" -e POCL_CACHE_DIR=/pocl -e DEBIAN_FRONTEND=noninteractive \
  "$BASE_IMAGE" sh -c '
    set -e
    t0=$(date +%s)
    apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null
    echo "bare: make installed in $(( $(date +%s) - t0 )) s"
    for tool in make python3 cc curl; do
      command -v $tool >/dev/null && echo "bare: the machine has $tool" || echo "bare: the machine has no $tool"
    done
    mkdir /src && tar -C /src -xf /tree.tar && cd /src
    echo "bare: make run at $(date +%s)"
    exec make run LISTEN=127.0.0.1:0 ARGS="--grpc-listen 127.0.0.1:0"')
say "container ${id:0:12} from $BASE_IMAGE: make, then make run"

logs() { podman logs "$id" 2>&1 || true; }
port=""
while [ -z "$port" ]; do
  [ "$(podman inspect --format '{{.State.Running}}' "$id" 2>/dev/null)" = true ] || {
    logs | tail -40; die "the container stopped before tallyd listened"; }
  [ $((SECONDS - start)) -lt "$LIMIT" ] || { logs | tail -40; die "tallyd did not listen in $LIMIT s"; }
  port=$(grep -o '"msg":"tallyd [^ ]* listening on [^ ]* (port [0-9]*' <<<"$(logs)" \
    | grep -o '[0-9]*$' || true)
  [ -n "$port" ] || sleep 1
done
text=$(logs)
t_make=$(grep -o 'bare: make run at [0-9]*' <<<"$text" | grep -o '[0-9]*$')
say "$(grep '^bare: make installed' <<<"$text" | sed 's/^bare: //')"
grep '^bare: the machine has' <<<"$text" | sed 's/^bare: /  before: /'
grep -q '^bare: the machine has no python3' <<<"$text" \
  || die "the base image already has python3: not a bare machine"
say "tallyd listens on port $port, $(( $(date +%s) - t_make )) s after make run began"
grep -q '^run: starting tallyd on http://127.0.0.1:0' <<<"$text" \
  || die "make run did not say where it starts tallyd"

# the first requests, as the README shows them
wait_http "http://127.0.0.1:$port/v2/health/ready" 300 || { logs | tail -20; die "not ready"; }
say "ready $(( $(date +%s) - t_make )) s after make run began"
answer=$(curl -s "http://127.0.0.1:$port/v1/cumsum" -H 'Content-Type: application/json' \
  -d '{"dtype":"float32","shape":[3,4],"data":[[2,1,3,5],[3,8,7,3],[9,6,2,4]],"axis":1}')
[ "$answer" = '{"dtype":"float32","shape":[3,4],"data":[2,3,6,11,3,11,18,21,9,15,17,21]}' ] \
  || die "the README's first request: $answer"
for path in / /docs /docs/swagger-ui-bundle.js /docs/swagger-ui.css /openapi.json; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$path")
  [ "$code" = 200 ] || die "GET $path: $code"
done
say "the README's request answered; the landing page, /docs and Swagger UI's files served"

# make run installed no Python, and put nothing into the system's
podman exec "$id" sh -c 'command -v python3 || true' >"$tmp/python"
if [ -s "$tmp/python" ]; then
  say "python3 came as a dependency of a Debian package ($(cat "$tmp/python")); make run used none"
else
  say "make run needed no Python"
fi
podman exec "$id" sh -c 'test -e /usr/lib/python3/dist-packages/swagger_ui_bundle \
  || test -e /usr/local/lib/python3*/dist-packages/swagger_ui_bundle' \
  && die "make run pip-installed into the system's Python"
if [ $MAKE_TEST = 1 ]; then
  # the second command, in a container of its own once the first's is
  # gone (apt's cache takes one at a time)
  podman rm -f -t 0 "$id" >/dev/null 2>&1; id=""
  t0=$SECONDS
  mkdir -p "$APT_CACHE.pip"
  # this machine's way to PyPI, as its apt sources are the base image's:
  # its certificate authorities (a proxy's may be among them) and its index
  ca=()
  [ -f /etc/ssl/certs/ca-certificates.crt ] && ca=(-v /etc/ssl/certs/ca-certificates.crt:/etc/host-ca.crt:ro
                                                   -e PIP_CERT=/etc/host-ca.crt)
  [ -n "${PIP_INDEX_URL:-}" ] && ca+=(-e PIP_INDEX_URL="$PIP_INDEX_URL")
  podman run --rm --network host "${ULIMITS[@]}" "${ca[@]}" -v "$tmp/tree.tar:/tree.tar:ro" \
    -v "$APT_CACHE:/var/cache/apt/archives" -v "$APT_CACHE.pip:/root/.cache/pip" \
    -e DEBIAN_FRONTEND=noninteractive \
    "$BASE_IMAGE" sh -c '
      set -e
      apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null
      mkdir /src && tar -C /src -xf /tree.tar && cd /src
      make test' > "$tmp/make-test.log" 2>&1 || {
    tail -60 "$tmp/make-test.log"; die "make test on a bare Debian 12"; }
  grep -E "passed|failed|skipped|test-container|bare: skipped" "$tmp/make-test.log" | tail -20
  say "make test passed on a bare Debian 12 in $((SECONDS - t0)) s"
fi
say "passed in $((SECONDS - start)) s"
