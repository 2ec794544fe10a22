#!/bin/sh
# Checks an installed tally (make install PREFIX=$1) as a user meets it:
# pkg-config finds libtally, the example compiles and links from the
# installed header and library alone (shared, and static libtally with
# the system's libcurl), the shared
# library has its soname and exports the public API only, and the
# installed programs run. Called by `make test-install`.
set -eu
prefix=$1
CC=${CC:-cc}
fail() { echo "install-check: $*" >&2; exit 1; }

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs tally) || fail "pkg-config does not find tally"
case "$flags" in
  *"-I$prefix/include"*"-L$prefix/lib"*"-ltally"*) ;;
  *) fail "pkg-config --cflags --libs tally gave: $flags" ;;
esac
[ "$(pkg-config --modversion tally)" = "$VERSION" ] \
  || fail "pkg-config says version $(pkg-config --modversion tally), the header $VERSION"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Wextra -Werror -o "$tmp/shared" client/examples/cumsum.c \
  $(pkg-config --cflags --libs tally) || fail "the example does not build against the shared library"
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Wextra -Werror -o "$tmp/static" client/examples/cumsum.c \
  $(pkg-config --cflags tally) "$prefix/lib/libtally.a" $(pkg-config --libs libcurl) -lm -pthread \
  || fail "the example does not build against the static library"

so="$prefix/lib/libtally.so.$VERSION"
soname=$(readelf -d "$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libtally.so.${VERSION%%.*}" ] || fail "soname is '$soname'"
[ "$(readlink "$prefix/lib/libtally.so")" = "$soname" ] || fail "libtally.so does not point at the soname"
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v -e '^_init$' -e '^_fini$' -e '^_edata$' -e '^_end$' -e '^__bss_start$' | sort)
stray=$(echo "$exported" | grep -v '^tally_' || true)
[ -z "$stray" ] || fail "libtally exports more than its API: $stray"
declared=$(grep -v '#define' "$prefix/include/tally.h" | grep -o 'TALLY_API [a-z_ *]*(' | sed 's/.*[ *]\(tally_[a-z_0-9]*\)(/\1/' | sort)
[ "$exported" = "$declared" ] || fail "exported symbols differ from tally.h's:
$(echo "$exported" > "$tmp/e"; echo "$declared" > "$tmp/d"; diff "$tmp/d" "$tmp/e")"

# The installed example, with nothing listening on its port, fails cleanly.
for kind in shared static; do
  set +e
  out=$(LD_LIBRARY_PATH="$prefix/lib" "$tmp/$kind" http://127.0.0.1:9 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq 1 ] || fail "$kind example exited $rc: $out"
  case "$out" in
    *"could not connect"*) ;;
    *) fail "$kind example said: $out" ;;
  esac
done
"$prefix/bin/tally" --version | grep -q "$VERSION" || fail "tally --version"
"$prefix/bin/tallyd" --version | grep -q "$VERSION" || fail "tallyd --version"
echo "install-check: pkg-config, shared and static builds, soname, $(echo "$exported" | wc -l) exported symbols: ok"
