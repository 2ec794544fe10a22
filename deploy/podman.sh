#!/usr/bin/env bash
# deploy/podman.sh - building and running tally's image with podman on a
# Debian 12 machine that has no Docker engine and reaches no registry.
#
#   deploy/podman.sh build [TAG]   set up podman, build the image (default
#                                  tally:VERSION); `make image` runs this
#   eval "$(deploy/podman.sh env)" make this shell's podman use that setup
#   deploy/podman.sh setup         the setup alone
#
# Debian's podman builds and runs images here once it uses runc with
# cgroupfs, explicit ulimits and host networking, with a Debian base image
# made locally by debootstrap when none can be pulled. All of its state
# lives under $CONTAINER_WORK (/tmp/tally-containers), with a private
# containers.conf and storage.conf, so nothing in /etc changes. The test
# (tests/container/run.sh) sources this file for its functions.

CONTAINER_WORK=${CONTAINER_WORK:-/tmp/tally-containers}
BASE_IMAGE=docker.io/library/debian:bookworm-slim

say() { echo "container: $*"; }
die() { echo "container: FAILED: $*" >&2; exit 1; }

# Installs the podman stack when it is missing.
podman_install() {
  local pkgs="podman buildah runc conmon containernetworking-plugins fuse-overlayfs
              slirp4netns uidmap catatonit debootstrap"
  local missing=""
  for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  say "installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# podman_ready: the install, the configuration and the base image, one
# caller at a time. make test runs the container test and the bare-Debian
# test at once, and on a new machine both would run apt-get together (the
# second fails on apt's lock) and debootstrap into one folder. The lock is
# a file under $CONTAINER_WORK, held through flock (util-linux, in every
# Debian); apt_locked takes the same one for a later install.
podman_ready() {
  mkdir -p "$CONTAINER_WORK"
  exec 9>"$CONTAINER_WORK/setup.lock"
  flock 9
  podman_install
  podman_configure
  podman_base_image
  exec 9>&-
}

# apt_locked ARGS...: apt-get ARGS under podman_ready's lock.
apt_locked() {
  mkdir -p "$CONTAINER_WORK"
  (
    flock 9
    DEBIAN_FRONTEND=noninteractive apt-get "$@"
  ) 9>"$CONTAINER_WORK/setup.lock"
}

# Writes the private configuration and exports what points at it.
podman_configure() {
  mkdir -p "$CONTAINER_WORK"
  NOFILE=$(ulimit -Hn)
  [ "$NOFILE" = unlimited ] && NOFILE=1048576
  cat > "$CONTAINER_WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$NOFILE:$NOFILE", "nproc=4096:4096"]
netns = "host"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$CONTAINER_WORK/events.log"
EOF
  cat > "$CONTAINER_WORK/storage.conf" <<EOF
[storage]
driver = "overlay"
runroot = "$CONTAINER_WORK/run"
graphroot = "$CONTAINER_WORK/storage"
EOF
  export CONTAINERS_CONF=$CONTAINER_WORK/containers.conf
  export CONTAINERS_STORAGE_CONF=$CONTAINER_WORK/storage.conf
  ULIMITS=(--ulimit "nofile=$NOFILE:$NOFILE" --ulimit nproc=4096:4096)
}

# The URI of the first bookworm source that apt on this machine already
# uses (its downloaded index files); fails when there is none. The project
# names no package host of its own.
apt_bookworm_uri() {
  local uri
  uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null \
    | awk '$2 == "bookworm" { print $1; exit }')
  [ -n "$uri" ] && echo "$uri"
}

# Makes $BASE_IMAGE when it is neither present nor pullable: a minimal
# Debian 12 from the source apt already uses, or a clear stop when apt has
# none.
podman_base_image() {
  podman image exists "$BASE_IMAGE" && return 0
  if timeout 20 podman pull -q "$BASE_IMAGE" >/dev/null 2>&1; then
    say "pulled $BASE_IMAGE"
    return 0
  fi
  local mirror
  mirror=$(apt_bookworm_uri) \
    || die "no registry to pull $BASE_IMAGE from, and apt on this machine has no
  Debian 12 (bookworm) source for debootstrap to make it from. Add one to
  /etc/apt/sources.list(.d), run apt-get update, and try again; or load a
  Debian 12 image yourself: podman load -i FILE (or podman import), tagged
  $BASE_IMAGE."
  say "no registry: making $BASE_IMAGE with debootstrap from $mirror"
  local root=$CONTAINER_WORK/rootfs
  rm -rf "$root"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$CONTAINER_WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$CONTAINER_WORK/debootstrap.log"; die "debootstrap failed"; }
  rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/var/lib/apt/lists/* \
    "$root"/var/cache/apt/*.bin "$root"/etc/hostname
  : > "$root/etc/hostname"
  # this machine's clock and archive snapshot may disagree with Release
  # files' dates, as on the host
  grep -rh 'Check-Valid-Until\|Check-Date' /etc/apt/apt.conf.d/ 2>/dev/null \
    > "$root/etc/apt/apt.conf.d/99tally-dates" || true
  tar -C "$root" -c . | podman import -q - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
}

# podman_build TAG [LOG [podman build options...]]: the image from the
# Dockerfile at the repository root, labelled with the source and commit
# (--target slim: the slim image).
podman_build() {
  local tag=$1 log=${2:-/dev/stdout} root
  shift $(($# < 2 ? $# : 2))
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local source_url revision
  source_url=$(git -C "$root" remote get-url origin 2>/dev/null || echo "file://$root")
  revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
  podman build --network host --format docker --pull=never "${ULIMITS[@]}" \
    --build-arg SOURCE_URL="$source_url" --build-arg REVISION="$revision" \
    "$@" -t "$tag" "$root" > "$log" 2>&1
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL SECONDS: until URL answers 200.
wait_http() {
  local deadline=$((SECONDS + $2))
  while [ $SECONDS -lt $deadline ]; do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.2
  done
  return 1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    setup)
      podman_ready
      ;;
    env)
      podman_configure
      echo "export CONTAINERS_CONF=$CONTAINERS_CONF CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF"
      ;;
    build)
      podman_ready
      tag=${2:-tally:$(sed -n 's/^#define TALLY_VERSION "\(.*\)"/\1/p' \
        "$(dirname "$0")/../client/include/tally.h")}
      say "building $tag (a few minutes the first time)"
      podman_build "$tag" || die "podman build"
      say "built $tag; run it with:"
      echo "  eval \"\$(deploy/podman.sh env)\""
      echo "  podman run --rm --network host --read-only --tmpfs /tmp --cap-drop ALL \\"
      echo "    --security-opt no-new-privileges $tag"
      ;;
    *)
      echo "usage: deploy/podman.sh build [TAG] | env | setup" >&2
      exit 2
      ;;
  esac
fi
