#!/bin/sh
# node_bundle.sh - what `make bench-node` needs on a machine that has none
# of the project's packages and reaches no network (a lent GPU node): the
# load generators (wrk, h2load) and every shared library that tallyd, the
# tests, bench_engine and those tools load, except the C and C++ runtimes,
# which the node has in a newer version (an older libstdc++ or libc put
# first on the path would break its OpenCL driver). Written to OUT
# (default build/node): bin/ and lib/. tests/bench/bench_node.py puts them
# on PATH and LD_LIBRARY_PATH when it finds them.
#
#   sh tools/node_bundle.sh [OUT] PROGRAM...
set -eu
OUT=${1:?usage: node_bundle.sh OUT PROGRAM...}
shift
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
for tool in wrk h2load; do
  path=$(command -v "$tool") || { echo "node_bundle: $tool is not installed" >&2; exit 1; }
  cp "$path" "$OUT/bin/"
  set -- "$@" "$path"
done
# the runtimes the node brings itself, and the loader
keep='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libstdc\+\+|libgcc_s|libresolv)'
for prog in "$@"; do
  ldd "$prog" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if echo "$name" | grep -Eq "$keep"; then
    continue
  fi
  cp -L "$path" "$OUT/lib/$name"
done
echo "node_bundle: $(ls "$OUT/bin" | wc -l) tools and $(ls "$OUT/lib" | wc -l) libraries in $OUT ($(du -sh "$OUT" | cut -f1))"
