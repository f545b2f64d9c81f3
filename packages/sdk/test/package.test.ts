/**
 * The SDK as a user installs it: the packages are built (`pnpm run build`: tsc with
 * declaration emit into dist/), packed with `pnpm pack` (so `publishConfig` and `files`
 * decide what ships), and installed from the tarballs into a directory outside the
 * workspace, where nothing can reach the workspace's TypeScript sources. There a plain
 * Node ESM script imports the library, `pps --help` runs from the installed bin, and a
 * TypeScript consumer type-checks against the emitted `.d.ts` (library checks on, no Node
 * types, so a `.d.ts` that needs them or is broken fails here).
 */
import { execFile } from "node:child_process"
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const run = promisify(execFile)
const packages = resolve(import.meta.dirname, "../..")
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")

// The consumer: written as a user would, against the package names only. The
// `@ts-expect-error` lines fail the check if the emitted types degrade to `any`.
const consumer = `import { ApiClient, Errors, Pps, type PpsTypes } from "@pps/sdk"
import { Api } from "@pps/api"
import { Effect } from "effect"

const pps = new Pps({ apiKey: "hc_test_x", baseUrl: "http://127.0.0.1:9" })

export const firstConfirmed = async (): Promise<PpsTypes.Transfer["status"] | undefined> => {
  for await (const transfer of pps.transfers.list({ status: "confirmed", pageSize: 10 })) return transfer.status
  return undefined
}

export const ids = Effect.gen(function*() {
  const client = yield* ApiClient.ApiClient
  const page = yield* client.transfers.list({ query: { limit: 5 } })
  // @ts-expect-error limit is a number in the contract
  yield* client.transfers.list({ query: { limit: "5" } })
  return page.data.map((transfer) => transfer.transfer_id)
}).pipe(Effect.provide(ApiClient.layer({ apiKey: "hc_test_x" })))

export const refusedForBalance = (error: unknown): string | undefined =>
  error instanceof Errors.InsufficientBalance ? error.requestId : undefined

export const codeOf = (error: Errors.ApiError): Errors.Code | undefined => error.code
// @ts-expect-error a code is one of the contract's, not any string
export const notACode: Errors.Code = "no_such_code"

export const sent = async (): Promise<string> => {
  const created = await pps.transfers.create({ to: "@bob", amount: "1", confidential: false })
  return created.kind === "transfer" ? created.transfer.transfer_id : created.held.transaction_id
}

export const api: typeof Api.PublicApi = Api.PublicApi
// @ts-expect-error there is no such resource
pps.invoices.list()
`

const smoke = `import { ApiClient, Errors, Pps } from "@pps/sdk"
import { Api } from "@pps/api"
const pps = new Pps({ apiKey: "hc_test_x" })
console.log(JSON.stringify({
  pps: typeof pps.transfers.create,
  layer: typeof ApiClient.layer,
  api: Object.keys(Api.PublicApi.groups).sort(),
  codes: Errors.codes.length
}))
`

describe("the packaged SDK", () => {
  it("builds, packs, installs outside the workspace, imports from Node, type-checks a consumer, runs pps", async () => {
    await Promise.all(["api", "crypto", "sdk"].map((name) => rm(join(packages, name, "dist"), { recursive: true, force: true })))
    await run("pnpm", ["--dir", join(packages, "sdk"), "run", "build"])

    const work = await mkdtemp(join(tmpdir(), "pps-sdk-package-"))
    try {
      const tarballs = join(work, "tarballs")
      await Promise.all(
        ["api", "crypto", "sdk"].map((name) => run("pnpm", ["--dir", join(packages, name), "pack", "--pack-destination", tarballs]))
      )
      const packed = await readdir(tarballs)
      const tarball = (name: string) => `file:${join(tarballs, packed.find((file) => file.startsWith(`pps-${name}-`))!)}`

      const app = join(work, "app")
      await run("mkdir", ["-p", app])
      await writeFile(join(app, "package.json"), JSON.stringify({
        name: "consumer",
        private: true,
        type: "module",
        dependencies: { "@pps/sdk": tarball("sdk"), "@pps/api": tarball("api"), effect: "4.1.0" },
        // The packed sdk depends on @pps/api and @pps/crypto by version; they are not on a registry.
        pnpm: { overrides: { "@pps/api": tarball("api"), "@pps/crypto": tarball("crypto") } }
      }))
      await run("pnpm", ["install", "--prefer-offline", "--ignore-workspace"], { cwd: app })

      await writeFile(join(app, "smoke.mjs"), smoke)
      const imported = JSON.parse((await run(process.execPath, ["smoke.mjs"], { cwd: app })).stdout)
      expect(imported).toEqual({
        pps: "function",
        layer: "function",
        api: ["accounts", "agents", "events", "test", "transfers", "webhooks"],
        codes: expect.any(Number)
      })
      expect(imported.codes).toBeGreaterThan(30)

      const help = await run(join(app, "node_modules/.bin/pps"), ["--help"], { cwd: app })
      expect(help.stdout).toMatch(/^usage: pps <command>/)
      expect(help.stdout).toContain("listen")
      // The install has no MCP server (the SDK does not depend on it): `pps mcp` says what to install, before any request.
      expect(JSON.stringify(await readdir(join(app, "node_modules/@pps")))).not.toContain("mcp")
      const mcp = await run(join(app, "node_modules/.bin/pps"), ["mcp"], {
        cwd: app,
        env: { ...process.env, PPS_API_KEY: "hc_test_x", PPS_BASE_URL: "http://127.0.0.1:9" }
      }).then(() => ({ code: 0, stderr: "" }), (error: { code: number; stderr: string }) => error)
      expect(mcp).toMatchObject({ code: 1, stderr: "pps: the MCP server is the package @pps/mcp, not installed next to @pps/sdk: npm install @pps/mcp\n" })

      await writeFile(join(app, "consumer.ts"), consumer)
      await writeFile(join(app, "tsconfig.json"), JSON.stringify({
        compilerOptions: {
          target: "ES2023",
          lib: ["ES2023", "DOM"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: []
        },
        files: ["consumer.ts"]
      }))
      const checked = await run(process.execPath, [tsc, "-p", app], { cwd: app }).then(
        () => "",
        (error: { stdout: string }) => error.stdout
      )
      expect(checked).toBe("")
    } finally {
      await rm(work, { recursive: true, force: true })
    }
  }, 240_000)
})
