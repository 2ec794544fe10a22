#!/bin/sh
# Swagger UI's two files (swagger-ui-bundle.js, swagger-ui.css), which
# tallyd serves at /docs, and their licence, from Debian's python3-flasgger
# package: none of its Python is used, so building and running tallyd
# needs no Python at all. The image's build (Dockerfile) and `make` take
# them the same way.
#
#   sh tools/swagger_ui.sh fetch DIR       unpack the package into DIR,
#                                          downloading it (apt-get download)
#                                          unless it is installed or DIR
#                                          has it already
#   sh tools/swagger_ui.sh copy DIR DEST   copy the files into DEST (where
#                                          tallyd looks, beside its bin/),
#                                          from the installed package or
#                                          DIR; without either, say so and
#                                          succeed: /docs then answers 404
#                                          saying how to get them
set -eu

STATIC=usr/lib/python3/dist-packages/flasgger/ui3/static
COPYRIGHT=usr/share/doc/python3-flasgger/copyright
FILES="swagger-ui-bundle.js swagger-ui.css"

# The root the package's files are under: / when it is installed, else
# DIR when it was unpacked there; empty when neither.
root_of() {
  if [ -f "/$STATIC/swagger-ui-bundle.js" ]; then
    echo /
  elif [ -f "$1/$STATIC/swagger-ui-bundle.js" ]; then
    echo "$1"
  fi
}

case "${1:-}" in
  fetch)
    dir=$2
    [ -n "$(root_of "$dir")" ] && exit 0
    mkdir -p "$dir"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # apt-get download needs the package lists (install-deps.sh has
    # updated them) and writes into the current directory
    get() { (cd "$tmp" && apt-get download -qq python3-flasgger >/dev/null 2>&1); }
    if ! get && ! { [ "$(id -u)" -eq 0 ] && apt-get update -qq >/dev/null 2>&1 && get; }; then
      echo "swagger-ui: cannot download python3-flasgger (as root, apt-get update first); /docs will answer 404" >&2
      exit 0
    fi
    dpkg-deb -x "$tmp"/python3-flasgger_*.deb "$dir"
    echo "swagger-ui: $(basename "$tmp"/python3-flasgger_*.deb) unpacked into $dir"
    ;;
  copy)
    dir=$2 dest=$3
    root=$(root_of "$dir")
    if [ -z "$root" ]; then
      echo "docs-assets: Swagger UI is not here (make deps fetches it from Debian's python3-flasgger); /docs will answer 404"
      exit 0
    fi
    mkdir -p "$dest"
    for f in $FILES; do
      cmp -s "$root/$STATIC/$f" "$dest/$f" || cp "$root/$STATIC/$f" "$dest/$f"
    done
    cmp -s "$root/$COPYRIGHT" "$dest/LICENSE" || cp "$root/$COPYRIGHT" "$dest/LICENSE"
    echo "docs-assets: Swagger UI from python3-flasgger ($root), in $dest"
    ;;
  *)
    echo "usage: sh tools/swagger_ui.sh fetch DIR | copy DIR DEST" >&2
    exit 2
    ;;
esac
