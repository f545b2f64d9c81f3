#!/bin/sh
# npm start: builds the dashboard page (a few seconds, into packages/dashboard/dist, which
# is not committed), then runs the server, which serves it at /dashboard. A failed page
# build does not stop the API: /dashboard then answers 503 and says why. PPS_SKIP_DASHBOARD_BUILD=1
# skips the build and serves the page as last built (a restart; the stop test, which must not
# rebuild the page under the dashboard's own tests).
#
# `exec`: the server becomes this process (and npm's `exec sh ...` makes this one npm's child),
# so SIGTERM or Ctrl-C to `npm start`'s process group reaches the server itself, npm waits for
# its orderly stop and exits with its code (0).
set -u
log="${TMPDIR:-/tmp}/pps-dashboard-build.log"
if [ "${PPS_SKIP_DASHBOARD_BUILD:-}" != "1" ] && ! pnpm --silent --filter @pps/dashboard build > "$log" 2>&1; then
  echo "start: the dashboard page did not build (see $log); the API starts without it" >&2
fi
# Memory (D67; the same values as packages/guardian/src/ProcessMemory.ts, which the server hands
# to its guardian child): a young generation of 2 x 8 MB instead of V8's 2 x 64 MB on a large
# machine, an old generation let grow by a quarter past what survived its last collection (D94)
# instead of up to 4x, at most two glibc arenas (the WebAssembly compiler's threads each left one behind), and
# `gc` for one collection once the embedded database is open (what opening left unreferenced).
# A value already in the environment is kept.
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
exec node --max-semi-space-size=8 --heap-growing-percent=25 --expose-gc --disable-warning=ExperimentalWarning packages/server/src/main.ts "$@"
