import * as ProcessMemory from "../packages/guardian/src/ProcessMemory.ts"

/**
 * What a test's child process inherits from the machine: `PATH` (to find its tools), Node's
 * compile cache directory when the toolchain set one (`NODE_COMPILE_CACHE`, scripts/toolchain.sh),
 * and the run's initialised PGlite cluster (`EMBEDDED_DATABASE_TEMPLATE`, scripts/pgliteTemplate.ts)
 * so a server or guardian it starts copies it instead of initialising its own database.
 * Nothing else, so no `PPS_*`, `ADMIN_*` or `GUARDIAN_*` variable of the machine leaks into a test.
 *
 * Why the cache: CI's slowest test files start Node processes on the TypeScript sources over and
 * over (the `pps` and admin commands, servers restarted), and compiling that module graph is about
 * a third of each start (1.32 → 0.93 s a `pps --help`, alternating runs on the 2-core machine).
 */
export const childEnvironment = (): Record<string, string> => {
  const cache = process.env["NODE_COMPILE_CACHE"]
  const template = process.env["EMBEDDED_DATABASE_TEMPLATE"]
  return {
    PATH: process.env["PATH"] ?? "",
    ...(cache === undefined ? {} : { NODE_COMPILE_CACHE: cache }),
    ...(template === undefined ? {} : { EMBEDDED_DATABASE_TEMPLATE: template })
  }
}

/**
 * Node's flags for a test's child process, before its script: the test process's WebAssembly
 * compiler flags (`ProcessMemory.webAssemblyFlags`, D95), so a server, guardian or command line
 * a test starts compiles PGlite's and mcl-wasm's WebAssembly as briefly as the test does, and
 * Node's warning about its experimental features off.
 */
export const childNodeFlags = (): ReadonlyArray<string> => [
  ...ProcessMemory.webAssemblyFlags(process.execArgv),
  "--disable-warning=ExperimentalWarning"
]
