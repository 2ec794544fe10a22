#!/bin/sh
# Starts redis-server with tally's settings, and REDIS_PASSWORD (when set)
# as the default user's password; extra arguments go to redis-server.
set -eu
if [ -n "${REDIS_PASSWORD:-}" ]; then
  exec redis-server /etc/redis/tally.conf --requirepass "$REDIS_PASSWORD" "$@"
fi
exec redis-server /etc/redis/tally.conf "$@"
