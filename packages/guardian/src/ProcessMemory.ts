/**
 * How a service process on Node is started so that its resident memory stays near what it uses
 * (D67): the server and its embedded guardian get these from `npm start` (scripts/start.sh, which
 * repeats the values: a shell script cannot import them), the guardian's child process from the
 * server (`EmbeddedGuardian`), and the benchmarks' and tests' servers from their harness.
 *
 * Why, measured on the 2-vCPU VM (docs/benchmarks.md, "Resident memory"):
 * - `--max-semi-space-size=8` (MB): V8 grew each process's young generation to 2 x 64 MB on this
 *   24 GB machine and kept ~80-110 MB of it resident with nothing to do. Objects that survive
 *   are few (a request's garbage dies young), so a scavenge costs by what survives, not by the
 *   size: smaller semi-spaces scavenge more often, each as quick.
 * - `--heap-growing-percent=25` (D94): after each major collection V8 lets the old generation grow
 *   by a quarter of what survived before it collects again, instead of a factor it picks itself
 *   (up to 4x on a host this size). Under load the server promotes much short-lived garbage (a
 *   request's objects outlive two scavenges while it waits on the database or the guardian), and
 *   V8's own factor let its old generation reach ~300 MB for ~100 MB alive. Unlike a bound on the
 *   heap (`--max-old-space-size`) it cannot stop a process whose live heap grows: the limit follows
 *   what is alive. In alternating runs the 256-client peak of the server and its guardian fell from
 *   732-902 to 640-699 MB, at +4 % CPU a transfer at 256 clients and +10 % at 1,024
 *   (docs/benchmarks/notes/2026-12-01-old-generation-growth.md).
 * - `MALLOC_ARENA_MAX=2`: glibc gives each thread that allocates its own 64 MB arena; V8's
 *   compiler threads (PGlite's WebAssembly is tiered up to TurboFan in the background, ~600 MB of
 *   zone memory at its peak) each left one behind, 20-35 MB resident apiece.
 *
 * Tried and left out: `MALLOC_MMAP_THRESHOLD_=32768` returned that compiler's freed memory too
 * (another ~60 MB a process at idle, ~120 under load) but maps and unmaps every allocation of
 * 32 KB or more, Node's 64 KB socket read buffers among them: the 256-client rate fell
 * (docs/benchmarks/notes/2026-11-29-resident-memory.md).
 *
 * - `--expose-gc`: gives the process `gc`, which `collectGarbage` calls once the embedded database
 *   is open, so that what opening left unreferenced (an in-memory database's initdb instance; a
 *   directory's is initialised in a child process, D91) is not left resident until V8 collects it
 *   of its own accord (below). Nothing else calls it.
 *
 * None of them changes what the program does; a variable the operator set keeps its value. The
 * process itself also gives its C heap's free pages back (`trimHeap`, D92), which no flag does.
 *
 * @since 0.12.0
 */
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

/**
 * Node's command-line flags for a service process (before the script's path).
 *
 * @since 0.12.0
 * @category constants
 */
export const nodeFlags: ReadonlyArray<string> = ["--max-semi-space-size=8", "--heap-growing-percent=25", "--expose-gc"]

/**
 * The WebAssembly compiler's flags among `execArgv` (a process's own, `process.execArgv`), for a
 * Node process it starts: the server's guardian child, a test's server or command line. The child
 * then compiles PGlite's and mcl-wasm's WebAssembly as its parent does. `npm start` passes neither,
 * so the service keeps V8's tiering up to TurboFan (D67: its statements cost 25-40 % more CPU
 * without it). A test runner's processes run with both (D95), and the processes they start live
 * as briefly as they do: on TurboFan each spent seconds of CPU recompiling code it would not run
 * long enough to gain from (the SDK's command-line tests: 37-38 s of CPU against 28-29,
 * alternating). Only these two flags are passed on: nothing else of a server's command line
 * reaches the one process that can decrypt.
 *
 * @since 0.16.0
 * @category constructors
 */
export const webAssemblyFlags = (execArgv: ReadonlyArray<string>): ReadonlyArray<string> =>
  execArgv.filter((flag) => passedOnWebAssemblyFlags.includes(flag))

const passedOnWebAssemblyFlags: ReadonlyArray<string> = ["--liftoff-only", "--no-wasm-code-gc"]

/**
 * glibc's malloc settings, read from the environment when the process starts (so they must be in
 * the environment it is spawned with; no other C library reads them, and none is harmed by them).
 *
 * @since 0.12.0
 * @category constants
 */
export const mallocEnvironment: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: "2"
}

/**
 * `mallocEnvironment`, each value the one `environment` already has when it has one.
 *
 * @since 0.12.0
 * @category constructors
 */
export const withMallocEnvironment = (environment: Readonly<Record<string, string | undefined>>): Record<string, string> => {
  const result: Record<string, string> = {}
  for (const [name, value] of Object.entries(mallocEnvironment)) result[name] = environment[name] ?? value
  return result
}

/**
 * Runs a full garbage collection now when the process has `gc` (started with `--expose-gc`, as
 * `nodeFlags` start it); otherwise does nothing.
 *
 * Why: PGlite's first start of a database runs initdb in a second, throwaway PostgreSQL instance
 * (its own WebAssembly memory, heavily written), and PGlite copies what it made into the real one.
 * Unreferenced once the database is open, it stayed resident until V8's next major collection,
 * which a quiet process may not run for minutes: the bench's idle reading found the guardian at
 * 610 MB instead of ~400 in one run of two. One collection after the database opens (~0.1-0.8 s
 * on the loaded 2-vCPU VM, once a start) gives it back at once
 * (docs/benchmarks/notes/2026-11-29-resident-memory-2.md). A database in a directory is now
 * initialised in a child process instead (D91, `EmbeddedDatabase.initialiseApart`); the
 * collection still gives back an in-memory database's instance, and whatever else opening left.
 *
 * @since 0.12.0
 * @category utils
 */
export const collectGarbage = (): void => {
  globalThis.gc?.()
}

/** The native trim, built at install by `native/build.sh` (D92). */
const trimAddonPath = fileURLToPath(new URL("../native/build/mallocTrim.node", import.meta.url))

/** `malloc_trim(0)`, once loaded; null where it is not available (not built, or not loadable). */
let nativeTrim: (() => boolean) | null | undefined

const loadNativeTrim = (): (() => boolean) | null => {
  if (!fs.existsSync(trimAddonPath)) return null
  const addon: { exports: { readonly trim?: unknown } } = { exports: {} }
  try {
    process.dlopen(addon, trimAddonPath)
  } catch {
    // Built for another C library or architecture (a copied directory): as if it were not built.
    return null
  }
  const trim = addon.exports.trim
  return typeof trim === "function" ? (): boolean => trim() === true : null
}

/** The trim, loaded on first use; a failed load is remembered as null. */
const loadedTrim = (): (() => boolean) | null => {
  if (nativeTrim === undefined) nativeTrim = loadNativeTrim()
  return nativeTrim
}

/**
 * Whether `trimHeap` can give memory back on this machine: glibc's `malloc_trim`, through the
 * addon `pnpm install` builds (`native/build.sh`: a C compiler and Node's headers were there).
 *
 * @since 0.16.0
 * @category utils
 */
export const canTrimHeap = (): boolean => loadedTrim() !== null

/**
 * Gives the C heap's free pages back to the operating system (glibc's `malloc_trim(0)`) and
 * answers whether any were; without the addon (`canTrimHeap`), does nothing and answers false.
 *
 * Why (D92): V8 compiles PGlite's WebAssembly in glibc's heap, and glibc returns freed memory to
 * the operating system only from the top of a heap. What the compiles freed below live
 * allocations stayed resident for the process's life: `malloc_trim(0)` in each idle embedded
 * process took the server from 314 to 241 MB and the guardian from 314 to 210 (2026-12-01). A
 * call took ~0.1 ms in a small process; a page it gives back costs a page fault when it is used
 * again.
 *
 * @since 0.16.0
 * @category utils
 */
export const trimHeap = (): boolean => loadedTrim()?.() ?? false
