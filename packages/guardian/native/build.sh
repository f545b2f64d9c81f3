#!/bin/sh
# Builds build/mallocTrim.node from mallocTrim.c (D92), run by `pnpm install` (this package's
# `install` script). It never fails the install: without a C compiler (`CC`, else `cc`), glibc's
# malloc.h or the running Node's headers (`<node prefix>/include/node`, which the pinned
# toolchain's Node and Debian's nodejs both ship), it says so and the service runs without it:
# src/ProcessMemory.ts then trims nothing, and the embedded processes hold more memory.
set -u
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
node_bin=$(node -p "process.execPath" 2>/dev/null) || node_bin=""
headers="$(dirname "$(dirname "$node_bin")")/include/node"
out="$here/build/mallocTrim.node"
if [ ! -f "$headers/node_api.h" ]; then
  echo "native: no Node headers at $headers; glibc's heap will not be trimmed (D92)" >&2
  exit 0
fi
mkdir -p "$here/build"
partial="$out.$$"
if ${CC:-cc} -O2 -shared -fPIC -Wall -I"$headers" "$here/mallocTrim.c" -o "$partial" 2> "$partial.log"; then
  mv "$partial" "$out"
  rm -f "$partial.log"
else
  echo "native: mallocTrim.node did not build; glibc's heap will not be trimmed (D92):" >&2
  cat "$partial.log" >&2
  rm -f "$partial" "$partial.log"
fi
exit 0
