#!/bin/sh
# Builds build/mallocTrim.node from mallocTrim.c (D92): at `pnpm install` (this package's `install`
# script), and by scripts/toolchain.sh when build/ is missing (a checkout installed before the
# addon existed). It never fails: without a C compiler (`CC`, else `cc`), glibc's malloc.h or the
# running Node's headers (`<node prefix>/include/node`, which the pinned toolchain's Node and
# Debian's nodejs both ship) it writes why to build/not-built.txt and to stderr, and the service
# runs without it: src/ProcessMemory.ts then trims nothing, and the embedded processes hold more
# memory. Run it again to retry.
set -u
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
out="$here/build/mallocTrim.node"
reason="$here/build/not-built.txt"
mkdir -p "$here/build"
rm -f "$reason"
not_built() {
  rm -f "$out"
  printf '%s\n' "$1" > "$reason"
  echo "native: mallocTrim.node not built, so glibc's heap will not be trimmed (D92): $1" >&2
  exit 0
}
node_bin=$(node -p "process.execPath" 2>/dev/null) || node_bin=""
[ -n "$node_bin" ] || not_built "no node on PATH"
headers="$(dirname "$(dirname "$node_bin")")/include/node"
[ -f "$headers/node_api.h" ] || not_built "no Node headers at $headers"
partial="$out.$$"
if ${CC:-cc} -O2 -shared -fPIC -Wall -I"$headers" "$here/mallocTrim.c" -o "$partial" 2> "$partial.log"; then
  mv "$partial" "$out"
  rm -f "$partial.log"
else
  log=$(cat "$partial.log")
  rm -f "$partial" "$partial.log"
  not_built "${CC:-cc} failed: $log"
fi
