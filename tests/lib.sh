# tests/lib.sh - what the benchmark scripts share (bash; source it after
# setting ROOT and TALLYD): a scratch directory removed on exit with every
# process started through it, free loopback ports, and tallyd daemons that
# each get their own PoCL cache, seeded from the one the tests warmed.

# scratch_dir PREFIX: sets $tmp and the exit trap that cleans up.
scratch_dir() {
  tmp=$(mktemp -d "/tmp/$1.XXXXXX")
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
        wait 2>/dev/null || true
        rm -rf "$tmp"' EXIT
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_tallyd NAME PORT [FLAGS...]: tallyd on 127.0.0.1:PORT, logging to
# $tmp/NAME.log, with the PoCL cache $tmp/NAME-pocl, and --warmup: a
# benchmark measures the devices, not the host backend answering while
# they build their kernels. PORT 0 lets tallyd
# choose, and bound_port NAME reads which: a port picked by free_port()
# and let go can be taken by another process before tallyd binds it.
start_tallyd() {
  local name=$1 port=$2
  shift 2
  mkdir -p "$tmp/$name-pocl"
  [ -d "$ROOT/build/pocl-cache" ] && cp -r "$ROOT/build/pocl-cache/." "$tmp/$name-pocl/"
  # gRPC off unless the caller asks for it: the default port would clash
  POCL_CACHE_DIR=$tmp/$name-pocl TALLY_GRPC_LISTEN=${TALLY_GRPC_LISTEN-} \
    "$TALLYD" --listen "127.0.0.1:$port" --warmup "$@" \
    > "$tmp/$name.log" 2>&1 &
  pids+=($!)
}

# bound_port NAME: the REST port tallyd NAME bound, read from its start
# line (waits for it, 300 s at most; shows the log and fails if it exits).
bound_port() {
  local p
  for _ in $(seq 1 3000); do
    p=$(sed -n 's/.*"msg":"tallyd [^ ]* listening on [^ ]* (port \([0-9]*\),.*/\1/p' \
      "$tmp/$1.log" 2>/dev/null | head -1)
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.1
  done
  cat "$tmp/$1.log" >&2
  return 1
}

# wait_ready URL NAME: until tallyd answers /v2/health/ready (the first
# start may compile kernels for a minute); shows its log if it never does.
wait_ready() {
  for _ in $(seq 1 3000); do
    curl -sf "$1/v2/health/ready" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$tmp/$2.log"
  return 1
}
