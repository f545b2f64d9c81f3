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
exec node --disable-warning=ExperimentalWarning packages/server/src/main.ts "$@"
