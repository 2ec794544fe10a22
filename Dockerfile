# tally: the tallyd cumulative-sum service and the tally CLI, on PoCL.
#
#   podman build --network host --format docker -t tally:0.1.0 .    (or docker build)
#   podman run --rm --network host --read-only --tmpfs /tmp --cap-drop ALL \
#     --security-opt no-new-privileges tally:0.1.0
#
# Two stages: `build` compiles with the -dev packages, runs the unit and
# codec tests (unless --build-arg TESTS=0), and compiles every OpenCL
# kernel into a PoCL cache; the
# runtime stage holds only runtime libraries, the OpenCL ICD loader, PoCL,
# tallyd, the CLI and that cache. A third, `slim`, has no PoCL (below).
# docs/deployment.md explains the sizes, the GPU route and the settings.

# A registry's Debian, or one made locally (deploy/podman.sh does that).
ARG BASE=debian:bookworm-slim
# The libraries tallyd and the CLI load, for both runtime images (each
# stage that uses it names it again, bare, to see it).
ARG RUNTIME_LIBS="ocl-icd-libopencl1 libmicrohttpd12 libjansson4 libuv1 libcurl4 zlib1g libdeflate0 libstdc++6 libnghttp2-14 libprotobuf-c1 libhiredis0.14 libssl3"

FROM ${BASE} AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends make gcc libc6-dev pkg-config xxd \
      ocl-icd-opencl-dev opencl-headers pocl-opencl-icd \
      libmicrohttpd-dev libjansson-dev libuv1-dev libcurl4-openssl-dev zlib1g-dev \
      g++ libfast-float-dev libfmt-dev libdeflate-dev \
      libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev libhiredis-dev ccache \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Swagger UI for /docs: the two files Debian's python3-flasgger ships,
# unpacked from the package (none of its Python is needed), with Debian's
# copyright file for them, as `make deps` takes them (tools/swagger_ui.sh);
# tallyd finds them in share/tally/docs. Before the sources are copied, so
# that a change to them leaves this layer (an apt-get update and a
# download) in podman's cache.
COPY tools/swagger_ui.sh tools/
RUN apt-get update && sh tools/swagger_ui.sh fetch /tmp/flasgger \
 && sh tools/swagger_ui.sh copy /tmp/flasgger /out/usr/local/share/tally/docs \
 && test -f /out/usr/local/share/tally/docs/swagger-ui-bundle.js \
 && rm -rf /tmp/flasgger /var/lib/apt/lists/*
COPY Makefile ./
COPY proto/ proto/
COPY kernels/ kernels/
COPY common/ common/
COPY server/ server/
COPY client/ client/
COPY tests/ tests/
# Two build caches outlive the image, as CI keeps its own (.ci/run):
# ccache's objects, and PoCL's compiled kernels, which --warm-cache fills
# below. Each is keyed by exactly what made it (the preprocessed source and
# flags; the kernel source, its options, the CPU and PoCL's version), so a
# stale entry is never used, and a change to the tree rebuilds only what it
# touches: with them warm, a rebuild after a one-line change spends seconds
# where it spent minutes. Without them (docker build without BuildKit's
# cache, a fresh machine), everything is built afresh, as before.
# TESTS=0 leaves the unit and codec tests out: `make test` passes it, since
# its test-c has just run them, and more, on the same tree.
ARG TESTS=1
RUN --mount=type=cache,target=/var/cache/ccache,sharing=locked \
    export CCACHE_DIR=/var/cache/ccache PATH=/usr/lib/ccache:$PATH \
 && make -j"$(nproc)" build/bin/tallyd build/bin/tally \
 && if [ "$TESTS" = 1 ]; then \
      make -j"$(nproc)" build/bin/test_units build/bin/test_core build/bin/test_format \
      && make test-units test-core test-format; \
    else echo "build: no tests here (TESTS=$TESTS)"; fi \
 && make install PREFIX=/usr/local DESTDIR=/out >/dev/null
# The kernels, compiled once here rather than at every container start.
# PoCL keys its cache by the CPU: on another CPU model tallyd compiles them
# again at its first start (about a minute on two cores). They are built
# in the cache mount, in a folder named by the kernels' source, and that
# folder is copied whole: a rebuild after a change that left kernels/
# alone compiles nothing. A tree with other kernels starts a new folder,
# and folders unused for a week are removed.
RUN --mount=type=cache,target=/var/cache/pocl,sharing=locked \
    key=$(cat kernels/*.cl | sha256sum | cut -c1-16) \
 && find /var/cache/pocl -mindepth 1 -maxdepth 1 -type d ! -name "$key" -mtime +7 \
      -exec rm -rf {} + \
 && mkdir -p "/var/cache/pocl/$key" && touch "/var/cache/pocl/$key" \
 && POCL_CACHE_DIR="/var/cache/pocl/$key" /out/usr/local/bin/tallyd --warm-cache --access-log=off \
 && cp -a "/var/cache/pocl/$key" /out/pocl-cache \
 && rm -f /out/pocl-cache/tempfile_* \
 && chmod -R a+rX /out/pocl-cache

# The slim image (`podman build --target slim`): the same tallyd and CLI
# without PoCL, and so without clang and LLVM, which make the full image
# large. It has the OpenCL ICD loader and NVIDIA's ICD entry: on a GPU
# node the NVIDIA container toolkit mounts the GPU's OpenCL driver and
# tallyd uses it; on a CPU node OpenCL finds no device and tallyd serves
# from the host backend at once, and says so in its log. Only the files
# the two programs load (the libraries ldd names, the ICD loader, the
# dynamic linker) go onto an empty base: no shell, no package manager.
FROM ${BASE} AS slim-files
ARG DEBIAN_FRONTEND=noninteractive
ARG RUNTIME_LIBS
RUN apt-get update \
 && apt-get install -y --no-install-recommends ${RUNTIME_LIBS} \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/usr/local/bin/tallyd /out/usr/local/bin/tally /usr/local/bin/
COPY --from=build /out/usr/local/share/tally/docs /slim/usr/local/share/tally/docs
RUN set -e; mkdir -p /slim/usr/local/bin /slim/etc/OpenCL/vendors /slim/tmp; \
    cp /usr/local/bin/tallyd /usr/local/bin/tally /slim/usr/local/bin/; \
    for f in $(ldd /usr/local/bin/tallyd /usr/local/bin/tally \
               | grep -o '/[^ ]*\.so[^ ]*' | sort -u); do \
      cp -L --parents "$f" /slim/; \
    done; \
    echo libnvidia-opencl.so.1 > /slim/etc/OpenCL/vendors/nvidia.icd; \
    chmod 1777 /slim/tmp; \
    test -f /slim/lib64/ld-linux-x86-64.so.2

FROM scratch AS slim
ARG VERSION=0.1.0
ARG SOURCE_URL=
ARG REVISION=
COPY --from=slim-files /slim/ /
ENV PATH=/usr/local/bin \
    TALLY_LISTEN=0.0.0.0:8080 \
    TALLY_GRPC_LISTEN=0.0.0.0:8001 \
    TALLY_URL=http://127.0.0.1:8080 \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL org.opencontainers.image.title="tally-slim" \
      org.opencontainers.image.description="tallyd: the cumulative sum (prefix scan) of tensors over HTTP and gRPC (KServe v2); the GPU's OpenCL driver, or the host's cores" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.revision="${REVISION}"
USER 10001:10001
EXPOSE 8080 8001
STOPSIGNAL SIGTERM
# no kernels to compile on a CPU node: ready in well under a second
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["tally", "health", "--quiet"]
ENTRYPOINT ["/usr/local/bin/tallyd"]

# The full image, the default target: PoCL as well, for CPU nodes'
# OpenCL.
FROM ${BASE}
ARG DEBIAN_FRONTEND=noninteractive
ARG RUNTIME_LIBS
RUN apt-get update \
 && apt-get install -y --no-install-recommends ${RUNTIME_LIBS} pocl-opencl-icd \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \
 && mkdir -p /etc/OpenCL/vendors \
 && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd \
 && groupadd --gid 10001 tally \
 && useradd --uid 10001 --gid tally --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tally
COPY --from=build /out/usr/local/bin/tallyd /out/usr/local/bin/tally /usr/local/bin/
COPY --from=build /out/pocl-cache /usr/local/share/tally/pocl-cache
COPY --from=build /out/usr/local/share/tally/docs /usr/local/share/tally/docs
COPY --chmod=755 deploy/docker-entrypoint.sh /usr/local/bin/tally-entrypoint

# Listen on every interface inside the container (HTTP and gRPC); the kernel cache lives in
# /tmp (a tmpfs or emptyDir), so the root filesystem can be read-only.
# TALLY_URL is what `tally` (and the health check) talks to: change it
# along with TALLY_LISTEN's port. NVIDIA's container toolkit mounts its
# OpenCL driver when asked for the compute capability.
ENV TALLY_LISTEN=0.0.0.0:8080 \
    TALLY_GRPC_LISTEN=0.0.0.0:8001 \
    TALLY_URL=http://127.0.0.1:8080 \
    POCL_CACHE_DIR=/tmp/pocl-cache \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# Labels: set at build time (tests/container/run.sh passes the git
# remote, or the checkout's path, and the commit). Declared here, after
# the RUN steps: a RUN step after an ARG is built again whenever the ARG's
# value changes, and the commit changes at every build.
ARG VERSION=0.1.0
ARG SOURCE_URL=
ARG REVISION=
LABEL org.opencontainers.image.title="tally" \
      org.opencontainers.image.description="tallyd: the cumulative sum (prefix scan) of tensors over HTTP (JSON, .npy, raw, KServe v2) on OpenCL" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.revision="${REVISION}"

USER 10001:10001
# 8080: HTTP (REST, KServe v2); 8001: gRPC (KServe v2 / Triton's
# GRPCInferenceService)
EXPOSE 8080 8001
STOPSIGNAL SIGTERM
# Ready within a second, even on a CPU model the baked kernel cache was
# not built for: the host backend answers while PoCL builds the kernels in
# the background (docs/design.md, the device pool).
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD ["tally", "health", "--quiet"]
ENTRYPOINT ["/usr/local/bin/tally-entrypoint"]
