// The page is served by the api server under /dashboard (same origin as /v1), so
// every asset URL starts there. No inline script is emitted: the server's CSP has
// `script-src 'self'` (plus 'wasm-unsafe-eval' for the crypto backend's WebAssembly).
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import react from "@vitejs/plugin-react"
import { defineConfig, type Plugin } from "vite"

/** Files worth compressing: text and WebAssembly (images are compressed already). */
const compressible = /\.(html|js|css|svg|json|wasm)$/

/**
 * Writes a Brotli (`.br`, best quality) and a gzip (`.gz`, level 9) copy beside each
 * compressible file of the build, once, so the server sends them by `Accept-Encoding`
 * without compressing per request (`packages/server/src/dashboard/BuiltPage.ts`).
 */
const precompress = (): Plugin => ({
  name: "pps-precompress",
  apply: "build",
  writeBundle(options) {
    const outDir = options.dir ?? "dist"
    for (const entry of fs.readdirSync(outDir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !compressible.test(entry.name)) continue
      const file = path.join(entry.parentPath, entry.name)
      const bytes = fs.readFileSync(file)
      fs.writeFileSync(`${file}.br`, zlib.brotliCompressSync(bytes, {
        params: { [zlib.constants.BROTLI_PARAM_QUALITY]: zlib.constants.BROTLI_MAX_QUALITY, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length }
      }))
      fs.writeFileSync(`${file}.gz`, zlib.gzipSync(bytes, { level: 9 }))
    }
  }
})

export default defineConfig({
  base: "/dashboard/",
  plugins: [react(), precompress()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2023",
    // The SDK and crypto chunk, loaded after sign-in only, is large (the WebAssembly is inlined).
    chunkSizeWarningLimit: 4096,
    modulePreload: { polyfill: false }
  }
})
