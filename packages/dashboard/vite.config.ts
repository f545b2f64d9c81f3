// The page is served by the api server under /dashboard (same origin as /v1), so
// every asset URL starts there. No inline script is emitted: the server's CSP has
// `script-src 'self'` (plus 'wasm-unsafe-eval' for the crypto backend's WebAssembly).
import react from "@vitejs/plugin-react"
import { defineConfig } from "vite"

export default defineConfig({
  base: "/dashboard/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2023",
    // One small app: no chunk-size noise in the test output.
    chunkSizeWarningLimit: 4096,
    modulePreload: { polyfill: false }
  }
})
