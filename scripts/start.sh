#!/bin/sh
# npm start: builds the dashboard page (a few seconds, into packages/dashboard/dist, which
# is not committed), then runs the server, which serves it at /dashboard. A failed page
# build does not stop the API: /dashboard then answers 503 and says why.
set -u
log="${TMPDIR:-/tmp}/pps-dashboard-build.log"
if ! pnpm --silent --filter @pps/dashboard build > "$log" 2>&1; then
  echo "start: the dashboard page did not build (see $log); the API starts without it" >&2
fi
exec node --disable-warning=ExperimentalWarning packages/server/src/main.ts "$@"
