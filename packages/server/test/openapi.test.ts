/**
 * The OpenAPI document is complete enough for tools: `redocly lint` with its recommended
 * rules finds no error (every operation has a summary, servers are named), and a client
 * generated from it with openapi-typescript type-checks a flow written with natural types
 * (numbers for `limit`/`offset`, the Idempotency-Key header), while the same flow with
 * `limit: "5"` does not.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { afterAll } from "vitest"
import { Effect } from "effect"
import { OpenApi } from "effect/http-api"
import { PublicApi } from "@pps/api/Api"
import { summaries } from "@pps/api/OpenApiDocument"

const packageRoot = path.resolve(import.meta.dirname, "..")
const bin = (name: string) => path.join(packageRoot, "node_modules", ".bin", name)
const require = createRequire(import.meta.url)

const run = (command: string, args: ReadonlyArray<string>, cwd: string) =>
  Effect.promise(() =>
    new Promise<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resolve) => {
      execFile(command, [...args], { cwd, timeout: 120_000, env: { ...process.env, NO_COLOR: "1", REDOCLY_TELEMETRY: "off" } }, (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr })
      })
    })
  )

describe("the OpenAPI document", () => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-openapi-"))
  const document = OpenApi.fromApi(PublicApi)
  const file = path.join(directory, "openapi.json")
  fs.writeFileSync(file, JSON.stringify(document))
  afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

  it("every operation has a summary, POSTs take Idempotency-Key, answers carry X-Request-Id", () => {
    const operations = Object.values(document.paths).flatMap((item) => Object.entries(item as Record<string, { operationId: string; summary?: string; parameters?: Array<{ name: string; in: string }>; responses: Record<string, { headers?: Record<string, unknown> }> }>))
    assert.isAbove(operations.length, 20)
    for (const [method, operation] of operations) {
      assert.strictEqual(operation.summary, summaries[operation.operationId], operation.operationId)
      if (method === "post") assert.isTrue(operation.parameters?.some((p) => p.in === "header" && p.name === "Idempotency-Key"), operation.operationId)
      for (const [status, response] of Object.entries(operation.responses)) {
        assert.isDefined(response.headers?.["X-Request-Id"], `${operation.operationId} ${status}`)
      }
    }
  })

  it.effect("redocly lint with the recommended rules: no error", () =>
    Effect.gen(function*() {
      const linted = yield* run(bin("redocly"), ["lint", file, "--format=json"], directory)
      const report = JSON.parse(linted.stdout) as { totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string }> }
      assert.strictEqual(report.totals.errors, 0, JSON.stringify(report.problems.slice(0, 5)))
    }), 120_000)

  it.effect("a generated client type-checks a natural flow, and not limit: \"5\"", () =>
    Effect.gen(function*() {
      const generated = yield* run(bin("openapi-typescript"), [file, "-o", path.join(directory, "schema.d.ts")], directory)
      assert.strictEqual(generated.code, 0, generated.stderr)
      const fetchTypes = path.dirname(require.resolve("openapi-fetch/package.json"))
      const flow = (limit: string) => `
import createClient from "openapi-fetch"
import type { paths } from "./schema"
const client = createClient<paths>({ baseUrl: "http://127.0.0.1:8080" })
export const flow = async () => {
  const page = await client.GET("/v1/transfers", { params: { query: { limit: ${limit}, offset: 0, status: "confirmed" } } })
  const first: string | undefined = page.data?.data[0]?.transfer_id
  const created = await client.POST("/v1/transfers", {
    params: { header: { "Idempotency-Key": "order-42" } },
    body: { to: "@bob", amount: "12.5", memo: "lunch" }
  })
  const policy = await client.GET("/v1/agents/{account_id}/spend-policy", { params: { path: { account_id: "acct_1" } } })
  return [first, created.response.status, policy.response.status]
}
`
      const check = (name: string, limit: string) =>
        Effect.gen(function*() {
          fs.writeFileSync(path.join(directory, `${name}.ts`), flow(limit))
          fs.writeFileSync(path.join(directory, `tsconfig.${name}.json`), JSON.stringify({
            compilerOptions: {
              strict: true,
              noEmit: true,
              target: "ES2022",
              module: "ESNext",
              moduleResolution: "Bundler",
              skipLibCheck: true,
              types: [],
              paths: { "openapi-fetch": [path.join(fetchTypes, "dist", "index.d.mts")] }
            },
            files: [`${name}.ts`, "schema.d.ts"]
          }))
          return yield* run(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", `tsconfig.${name}.json`], directory)
        })
      const natural = yield* check("natural", "5")
      assert.strictEqual(natural.code, 0, natural.stdout)
      const stringly = yield* check("stringly", "\"5\"")
      assert.notStrictEqual(stringly.code, 0, "limit: \"5\" must not type-check")
      // The one error is on the line of the query (line 6), where limit is a string.
      assert.match(stringly.stdout, /^stringly\.ts\(6,\d+\): error TS2322/)
    }), 120_000)
})
