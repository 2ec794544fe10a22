#!/bin/sh
# The container's entrypoint: seeds the writable kernel cache from the one
# baked into the image (when it is empty), then becomes tallyd, so that
# tallyd is PID 1 and gets SIGTERM directly. Arguments go to tallyd.
set -eu
seed=/usr/local/share/tally/pocl-cache
if [ -n "${POCL_CACHE_DIR:-}" ] && [ -d "$seed" ]; then
  if mkdir -p "$POCL_CACHE_DIR" 2>/dev/null && [ -z "$(ls -A "$POCL_CACHE_DIR")" ]; then
    cp -R "$seed/." "$POCL_CACHE_DIR/" \
      || echo "tally-entrypoint: could not seed $POCL_CACHE_DIR; kernels will be compiled" >&2
  fi
fi
exec /usr/local/bin/tallyd "$@"
