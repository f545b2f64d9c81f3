#!/bin/sh
# The whole test suite (every package's vitest project), then one plain summary
# line "Tests: N passed, N failed, N skipped" that CI reads.
set -u
results="${TMPDIR:-/tmp}/pps-vitest-$$.json"
# Two test files at a time, across every project (the flag applies to all of them; a root config's
# `maxWorkers` does not reach projects loaded from their own files). Most files spend their time
# waiting on anvil's blocks, child processes and timers rather than on the CPU: on the 2-core
# machine the suite took 17.7 min one file at a time, 10.0 min two at a time and 8.9 min three at
# a time (2026-11-26); two keeps the slowest tests further from their timeouts than three.
# scripts/slowestFiles.ts lists the slowest files at the end, with their setup and import time.
pnpm exec vitest run --maxWorkers=2 --reporter=default --reporter=./scripts/slowestFiles.ts --reporter=json --outputFile.json="$results" "$@"
status=$?
if [ -f "$results" ]; then
  node -e '
    const r = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
    const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
    console.log(`Tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped`);
  ' "$results"
  rm -f "$results"
fi
exit $status
