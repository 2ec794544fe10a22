#!/bin/sh
# Installs what tally needs on Debian 12 (bookworm). Safe to run again: it
# installs only what is missing. Debian's packages go into the system
# (apt-get, as root or through sudo); Python packages only ever into a
# virtual environment of the project's own, made with Debian's python3-venv
# (Debian's python3 refuses pip outside one: PEP 668).
#
#   sh deploy/install-deps.sh            what building and running tallyd
#                                        needs (`make run`, `make deps`): a
#                                        C compiler and make (and g++ for the
#                                        one C++ shim over fast_float and
#                                        {fmt}), the OpenCL ICD loader and
#                                        headers, PoCL (OpenCL on the CPU),
#                                        xxd, and the daemon's and the
#                                        client's libraries (nghttp2,
#                                        protobuf-c and OpenSSL for gRPC).
#                                        No Python: Swagger UI's files come
#                                        from Debian's python3-flasgger
#                                        (tools/swagger_ui.sh)
#   sh deploy/install-deps.sh --test     and what the tests and benchmarks
#                                        need: python3 and python3-venv,
#                                        and in the virtual environment
#                                        (--venv DIR, default build/venv)
#                                        pytest and pytest-xdist, numpy,
#                                        tritonclient, grpcio-tools, dask,
#                                        the validators, OpenTelemetry's
#                                        messages, schemathesis (the API
#                                        description against the server),
#                                        grpcio's health stub (the gRPC
#                                        health service's test);
#                                        libb64 for perf_analyzer,
#                                        wrk for the soak, and h2load
#                                        (nghttp2-client) for bench-node
#   sh deploy/install-deps.sh --bench    and matplotlib, for make
#                                        bench-report's pictures
#   sh deploy/install-deps.sh --browser  and the browser tests' chromium,
#                                        chromium-driver and selenium
#                                        (`make test` asks for all three)
#   ... --check                          installs nothing: says what of
#                                        the above is missing, and exits 1
#                                        when anything is
set -eu
CHECK=0

PACKAGES="make gcc libc6-dev pkg-config xxd ca-certificates \
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
  libmicrohttpd-dev libjansson-dev libuv1-dev libcurl4-openssl-dev zlib1g-dev \
  g++ libfast-float-dev libfmt-dev libdeflate-dev openssl curl \
  libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev libhiredis-dev"
# module:pip-name pairs, for the virtual environment
PYTHON_PACKAGES=""
VENV=build/venv
TEST_PACKAGES="python3 python3-venv libb64-0d wrk nghttp2-client redis-server nginx-light"
# pytest below 9.2: with 9.2, pytest-xdist 3.8's --dist loadgroup (make
# test-integration's) silently ignores xdist_group marks (pytest-xdist
# issue 1386), and test_dask's cluster started on all four workers (about
# 100 s of the plain leg on two cores)
TEST_PYTHON="setuptools:setuptools wheel:wheel numpy:numpy pytest:pytest<9.2 xdist:pytest-xdist yaml:pyyaml \
  tritonclient.http:tritonclient[http] tritonclient.grpc:tritonclient[grpc] \
  grpc_tools:grpcio-tools openapi_spec_validator:openapi-spec-validator \
  kubernetes_validate:kubernetes-validate distributed:dask[array,distributed] \
  opentelemetry.proto:opentelemetry-proto schemathesis:schemathesis==4.32.5 \
  grpc_health:grpcio-health-checking==1.81.1"

while [ $# -gt 0 ]; do
  arg=$1
  shift
  case "$arg" in
    --venv)
      VENV=${1:?--venv needs a directory}
      shift
      ;;
    --test)
      PACKAGES="$PACKAGES $TEST_PACKAGES"
      PYTHON_PACKAGES="$PYTHON_PACKAGES $TEST_PYTHON"
      ;;
    --bench)
      PYTHON_PACKAGES="$PYTHON_PACKAGES matplotlib:matplotlib"
      ;;
    --browser)
      PACKAGES="$PACKAGES chromium chromium-driver"
      PYTHON_PACKAGES="$PYTHON_PACKAGES selenium:selenium"
      ;;
    --check)
      CHECK=1
      ;;
    *)
      echo "install-deps: unknown option $arg (--test, --bench, --browser, --venv DIR, --check)" >&2
      exit 2
      ;;
  esac
done

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
    || missing="$missing $p"
done
# the Python packages the virtual environment lacks (all of them when
# there is none yet), and those whose pinned version (== or <) it does not
# have: a pin holds in an environment made before it, too
python_missing() {
  need=""
  for pair in $PYTHON_PACKAGES; do
    [ -x "$VENV/bin/python3" ] && "$VENV/bin/python3" -c "import ${pair%%:*}" 2>/dev/null \
      && pinned_ok "${pair#*:}" || need="$need ${pair#*:}"
  done
}
# pinned_ok SPEC: true unless SPEC pins a version the environment lacks
pinned_ok() {
  case "$1" in *[=\<]*) ;; *) return 0 ;; esac
  "$VENV/bin/python3" - "$1" <<'PY' 2>/dev/null
import importlib.metadata, sys
from pip._vendor.packaging.requirements import Requirement
r = Requirement(sys.argv[1])
sys.exit(0 if r.specifier.contains(importlib.metadata.version(r.name), prereleases=True) else 1)
PY
}

if [ "$CHECK" = 1 ]; then
  python_missing
  [ -z "$missing$need" ] && exit 0
  [ -n "$missing" ] && echo "install-deps: missing Debian packages:$missing"
  [ -n "$need" ] && echo "install-deps: missing in $VENV:$need"
  exit 1
fi
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing$missing"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# The project's virtual environment, from Debian's python3 (whatever else
# is first on PATH), with the Python packages the tests import.
if [ -n "$PYTHON_PACKAGES" ]; then
  if [ ! -x "$VENV/bin/python3" ]; then
    echo "install-deps: making the virtual environment $VENV (Debian's python3-venv)"
    /usr/bin/python3 -m venv "$VENV"
  fi
  python_missing
  if [ -n "$need" ]; then
    echo "install-deps: pip installing$need into $VENV"
    # --no-compile: no .pyc for every file of every package (a third of
    # the install's time, 69 s against 50 s on two cores); Python writes
    # them for the modules a test imports, on its first import
    # shellcheck disable=SC2086
    "$VENV/bin/python3" -m pip install -q --no-compile --disable-pip-version-check $need
  fi
fi
