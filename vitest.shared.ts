/**
 * What every project's test processes share (each package's vitest.config.ts spreads it:
 * a project loaded from its own file does not inherit the root config's `test` options).
 *
 * `--no-wasm-code-gc`: Node 24's V8 (13.6) can free a dying WebAssembly-to-JS import wrapper
 * twice when a wrapper's tier-up races the collection of dead wasm code, and aborts the
 * process (SIGTRAP, `Check failed: jit_page_->allocations_.erase(addr) == 1` in
 * `UnregisterWasmAllocation`). Test files open and close many PGlite and mcl-wasm instances,
 * which leaves such wrappers behind: one guardian run in ten to twenty aborted so here.
 * Later V8 takes a cached wrapper only when it is not marked dying (`AddRefIfNotDying`); Node
 * 24.21.0, the toolchain's, is reported as still affected (second-hand: the reports and the
 * backport were not in our search index). Without code GC, dead wasm code stays mapped until the test
 * process ends, which short-lived test processes can afford. Remove with a Node release that has
 * the fix. The flag is a V8 one: NODE_OPTIONS and worker threads' execArgv refuse it, the
 * process's own arguments (vitest's default `forks` pool) take it.
 *
 * `--liftoff-only` (D95): a test process compiles PGlite's WebAssembly with V8's baseline
 * compiler only and never tiers it up to TurboFan. A test file that starts servers on PGlite lives
 * a minute or two; TurboFan's background compiles of the functions it finds hot cost it more CPU
 * than the faster code saves (two such server files: 56 s of CPU and 56 s of wall time against 39
 * and 47, alternating). The processes a test starts through `childNodeFlags`
 * (scripts/childEnvironment.ts) take both flags from it, and a server passes them on to its
 * guardian child. The service's own processes keep TurboFan: over a long life PGlite's
 * statements cost 25-40 % more CPU without it (D67).
 */
export const testProcess: { readonly execArgv: Array<string> } = {
  execArgv: ["--no-wasm-code-gc", "--liftoff-only"]
}
