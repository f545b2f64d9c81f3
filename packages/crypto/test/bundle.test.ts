// Goal: the package bundles for browsers with no Node-only import, so the dashboard and
// the SDK can use the same code; the bundle includes mcl-wasm's embedded WebAssembly.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { build } from "esbuild"
import { expect, it } from "vitest"
import type * as Crypto from "../src/index.ts"

it("bundles src/index.ts for the browser without node: or Node built-in imports", async () => {
  const result = await build({
    entryPoints: [new URL("../src/index.ts", import.meta.url).pathname],
    bundle: true,
    platform: "browser",
    format: "esm",
    write: false,
    metafile: true,
    logLevel: "silent"
  })
  expect(result.errors).toEqual([])
  const inputs = Object.keys(result.metafile.inputs)
  expect(inputs.some((path) => path.includes("mcl-wasm"))).toBe(true)
  const nodeImports = Object.values(result.metafile.inputs).flatMap((input) =>
    input.imports.filter((entry) => entry.path.startsWith("node:") || entry.external === true)
  )
  expect(nodeImports).toEqual([])
  const code = result.outputFiles[0]?.text ?? ""
  expect(code).not.toMatch(/require\(["'](fs|path|crypto|node:[a-z]+)["']\)/)

  // The bundled code itself works, including the CommonJS interop of mcl-wasm: load it as
  // a plain ES module (globals only: WebAssembly, crypto.getRandomValues) and use it.
  const dir = mkdtempSync(join(tmpdir(), "pps-crypto-bundle-"))
  const file = join(dir, "bundle.mjs")
  writeFileSync(file, code)
  const bundled = await (import(pathToFileURL(file).href) as Promise<typeof Crypto>).finally(() =>
    rmSync(dir, { recursive: true, force: true })
  )
  expect(await bundled.Backend.init()).toBe("mcl")
  const keyPair = bundled.EncryptionKey.generate()
  const { ciphertext } = bundled.ElGamal.encrypt(42n, [keyPair.publicKey])
  expect(bundled.ElGamal.matches(keyPair.secretKey, ciphertext.commitment, ciphertext.handles[0] ?? bundled.Point.identity, 42n)).toBe(true)
}, 60_000)
