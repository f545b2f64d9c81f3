/**
 * Chooses the implementation of BN254 group arithmetic behind every function of this
 * package. Two exist: `"noble"` (@noble/curves, pure JavaScript, active from the first
 * import, nothing to load) and `"mcl"` (mcl-wasm, WebAssembly, about twelve times faster
 * per multiplication; it must be loaded asynchronously once). Both produce byte-identical
 * results, so the choice changes speed only; tests run the same vectors through both.
 *
 * Servers and the guardian call `await Backend.init()` once at start-up. Browsers may do
 * the same, or stay on noble where WebAssembly is unavailable.
 *
 * @since 0.1.0
 */
import { activate, current } from "./internal/backend.ts"
import { loadMclBackend } from "./internal/mclBackend.ts"
import { nobleBackend } from "./internal/nobleBackend.ts"

/**
 * The name of a backend.
 *
 * @since 0.1.0
 * @category models
 */
export type BackendName = "noble" | "mcl"

/**
 * Activates a backend: `"mcl"` (the default) loads mcl-wasm first; `"noble"` switches back
 * to the pure-JavaScript implementation. Resolves to the name of the active backend.
 * Rejects only if mcl-wasm cannot be loaded, in which case noble stays active.
 *
 * @since 0.1.0
 * @category constructors
 */
export const init = async (options?: { readonly backend?: BackendName }): Promise<BackendName> => {
  const wanted = options?.backend ?? "mcl"
  activate(wanted === "mcl" ? await loadMclBackend() : nobleBackend)
  return current().name
}

/**
 * The name of the backend in use now.
 *
 * @since 0.1.0
 * @category getters
 */
export const active = (): BackendName => current().name
