#!/bin/sh
# Installs what tally needs to build, test and run on Debian 12 (bookworm):
# a C compiler and make (and g++ for the one C++ shim over fast_float and
# {fmt}), the OpenCL ICD loader and headers, PoCL (an OpenCL
# implementation for the CPU), xxd, and the libraries of the daemon and the
# client (with nghttp2, protobuf-c and OpenSSL for gRPC, and libb64,
# which perf_analyzer from PyPI needs). Python packages for the
# integration tests and benchmarks come from PyPI, and so does Swagger UI
# (swagger-ui-bundle), whose files `make` copies for tallyd's /docs. Safe to run again: it
# installs only what is missing.
#
#   sh deploy/install-deps.sh            what make run needs
#   sh deploy/install-deps.sh --browser  and a browser for make test:
#                                        chromium, chromium-driver, selenium
set -eu

PACKAGES="make gcc libc6-dev pkg-config xxd ca-certificates \
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo \
  libmicrohttpd-dev libjansson-dev libuv1-dev libcurl4-openssl-dev zlib1g-dev \
  g++ libfast-float-dev libfmt-dev libdeflate-dev openssl curl \
  libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev libb64-0d"
# module:pip-name pairs for the integration tests and benchmarks
PYTHON_PACKAGES="numpy:numpy pytest:pytest yaml:pyyaml \
  tritonclient.http:tritonclient[http] tritonclient.grpc:tritonclient[grpc] \
  grpc_tools:grpcio-tools openapi_spec_validator:openapi-spec-validator \
  kubernetes_validate:kubernetes-validate distributed:dask[array,distributed] \
  swagger_ui_bundle:swagger-ui-bundle opentelemetry.proto:opentelemetry-proto"

if [ "${1:-}" = "--browser" ]; then
  PACKAGES="$PACKAGES chromium chromium-driver"
  PYTHON_PACKAGES="$PYTHON_PACKAGES selenium:selenium"
fi

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" \
    || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing$missing"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

PY=${PYTHON:-python3}
if command -v "$PY" >/dev/null 2>&1; then
  need=""
  for pair in $PYTHON_PACKAGES; do
    "$PY" -c "import ${pair%%:*}" 2>/dev/null || need="$need ${pair#*:}"
  done
  if [ -n "$need" ]; then
    echo "install-deps: pip installing$need"
    # shellcheck disable=SC2086
    PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install -q --disable-pip-version-check $need
  fi
fi
