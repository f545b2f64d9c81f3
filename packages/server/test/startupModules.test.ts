/**
 * What a started process holds that it may never use (D93): the modules the server's and the
 * guardian's graphs load at start leave out the WebAuthn verifier (loaded by the first passkey
 * ceremony) and what `@effect/platform-node`'s index would pull in (its Redis client and cluster
 * modules); no source mounts effect's Scalar layer, which holds its 6 MB script from start; and
 * the reference page, built from that script's file when first asked for, carries the script
 * effect ships and is kept only once built; a read of it that fails is answered 503 in D1's
 * envelope and tried again, not a defect.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { OpenApi } from "effect/http-api"
import { PublicApi } from "@pps/api/Api"
import { modulesLoadedBy } from "../../../scripts/modulesLoadedBy.ts"
import { cachedPage, layer, pageOf, scalarModulePath, ScriptUnreadable, scriptOfModule } from "../src/http/ApiReference.ts"
import { apiReferencePath, envelopeMiddleware, makeRouteTable } from "../src/http/Envelope.ts"
import { InvariantViolation } from "../src/platform/Invariant.ts"

const here = path.dirname(fileURLToPath(import.meta.url))
const packagesDir = path.resolve(here, "../..")

/** Modules no start-up graph may hold: what each looks like in a resolved URL. */
const leftOut = [
  ["the WebAuthn verifier", "/@simplewebauthn/server/"],
  ["@effect/platform-node's index", "/@effect/platform-node/dist/index.js"],
  ["the Redis client", "/@redis/"]
] as const

const sourceFiles = (dir: string): ReadonlyArray<string> =>
  fs.readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((name) => /\.tsx?$/.test(name)).map((name) => path.join(dir, name))

describe("modules loaded at start (D93)", () => {
  it("the server's and the guardian's graphs leave out what a process may never use", async () => {
    const loaded = await modulesLoadedBy([
      path.join(packagesDir, "server/src/Server.ts"),
      path.join(packagesDir, "guardian/src/GuardianLive.ts"),
      path.join(packagesDir, "guardian/src/GuardianServer.ts"),
      path.join(packagesDir, "guardian/src/GuardianClient.ts")
    ], path.join(packagesDir, "server"))
    // The graph was walked: the dashboard's passkey code and the guardian's service are in it.
    assert.isTrue(loaded.some((url) => url.endsWith("/server/src/dashboard/DashboardAuth.ts")))
    assert.isTrue(loaded.some((url) => url.endsWith("/guardian/src/GuardianLive.ts")))
    for (const [what, marker] of leftOut) {
      assert.deepStrictEqual(loaded.filter((url) => url.includes(marker)), [], `${what} is not loaded at start`)
    }
  }, 60_000)

  it("no source imports @effect/platform-node's index, nor mounts effect's Scalar layer", () => {
    // Read in the sources, since neither shows in a graph of imports: the entries' own imports
    // (main.ts runs when imported), and `HttpApiScalar.layer`, which loads the script only when
    // the layer is built.
    const forbidden = [/["']@effect\/platform-node["']/, /HttpApiScalar\.layer\(/]
    const offending = ["server/src", "guardian/src", "server/test", "guardian/test", "server/bench"]
      .flatMap((dir) => sourceFiles(path.join(packagesDir, dir)))
      .filter((file) => !file.endsWith("startupModules.test.ts"))
      .filter((file) => forbidden.some((pattern) => pattern.test(fs.readFileSync(file, "utf8"))))
    assert.deepStrictEqual(offending, [])
  })

  it.effect("the reference page carries the script effect ships, read from its module's file", () =>
    Effect.gen(function*() {
      const script = yield* scriptOfModule(fs.readFileSync(scalarModulePath, "utf8"))
      const shipped = yield* Effect.promise(() => import(pathToFileURL(scalarModulePath).href) as Promise<{ javascript: string }>)
      assert.isAbove(script.length, 1_000_000)
      assert.strictEqual(script, shipped.javascript)
      const page = pageOf(OpenApi.fromApi(PublicApi), script)
      assert.include(page, `<script>${script}</script>`)
      assert.include(page, "window.Scalar.createApiReference")
    }))

  it("writes the spec so that nothing in it can end its script or its tags early", () => {
    const hostile = "</script><script>alert(1)</script> \u2028\u2029 \"quoted\" 'single' <b>&amp;"
    const spec = OpenApi.fromApi(PublicApi)
    const page = pageOf({ ...spec, info: { ...spec.info, title: hostile, description: hostile } }, "/* script */")
    // One script of its own, one that renders: no third opened by the spec's text.
    assert.strictEqual(page.split("<script>").length - 1, 2)
    assert.strictEqual(page.split("</script>").length - 1, 2)
    assert.include(page, "<title>&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;")
    assert.include(page, 'content="&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; \u2028\u2029 &quot;quoted&quot; &#39;single&#39;')
    // The spec itself, with the hostile text, is still there for Scalar, as JSON.
    const json = page.slice(page.indexOf("content: ") + "content: ".length, page.lastIndexOf("\n      })"))
    assert.notInclude(json, "\u2028", "a line separator ends a script's line in older parsers: escaped")
    assert.notInclude(json, "\u2029")
    assert.deepStrictEqual(JSON.parse(json).info.title, hostile)
  })

  it.effect("keeps the page once built, and not a failed build: the next request tries again", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-api-reference-"))
      const modulePath = path.join(dir, "httpApiScalar.js")
      const page = yield* cachedPage(PublicApi, modulePath)
      // No file: a typed failure naming the read's errno code, not a defect.
      const missing = yield* Effect.flip(page)
      assert.instanceOf(missing, ScriptUnreadable)
      assert.deepStrictEqual([missing.modulePath, missing.code], [modulePath, "ENOENT"])
      fs.writeFileSync(modulePath, `export const javascript=${JSON.stringify("/* the script */")};\n`)
      const built = yield* page
      assert.include(new TextDecoder().decode(built), "<script>/* the script */</script>")
      fs.rmSync(dir, { recursive: true })
      assert.strictEqual(yield* page, built, "kept: the file is gone, the same bytes are served")
    }))

  it("a script that cannot be read answers 503 service_unavailable in D1's envelope with Retry-After; once readable, the page", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-api-reference-"))
    const modulePath = path.join(dir, "httpApiScalar.js")
    const app = Layer.mergeAll(
      layer(PublicApi, apiReferencePath, modulePath),
      HttpRouter.middleware(envelopeMiddleware(makeRouteTable([["GET", apiReferencePath]])), { global: true })
    )
    const { dispose, handler } = HttpRouter.toWebHandler(app, { disableLogger: true })
    const get = () => handler(new Request(`http://localhost${apiReferencePath}`))
    try {
      const unreadable = await get()
      assert.strictEqual(unreadable.status, 503)
      assert.isNotNull(unreadable.headers.get("retry-after"))
      const body = await unreadable.json() as { readonly error: { readonly code: string; readonly message: string; readonly request_id: string } }
      assert.strictEqual(body.error.code, "service_unavailable")
      assert.strictEqual(body.error.request_id, unreadable.headers.get("x-request-id"))
      assert.notInclude(body.error.message, dir, "the path stays in the log")
      fs.writeFileSync(modulePath, `export const javascript=${JSON.stringify("/* the script */")};\n`)
      const served = await get()
      assert.strictEqual(served.status, 200)
      assert.include(await served.text(), "<script>/* the script */</script>")
    } finally {
      await dispose()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it.effect("a module read whole but of another shape is a broken invariant: a defect, not the 503 of a failed read", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-api-reference-"))
      const modulePath = path.join(dir, "httpApiScalar.js")
      fs.writeFileSync(modulePath, "export const other=\"x\";\n")
      const exit = yield* Effect.exit(yield* cachedPage(PublicApi, modulePath))
      fs.rmSync(dir, { recursive: true })
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), "died")
      const defect = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
      assert.instanceOf(defect, InvariantViolation)
    }))

  it.effect("a module text of another shape is refused, not half-read", () =>
    Effect.gen(function*() {
      for (const text of ["", "export const other=\"x\";", "export const javascript=\"unterminated"]) {
        const result = yield* Effect.result(scriptOfModule(text))
        assert.isTrue(result._tag === "Failure", JSON.stringify(text))
      }
    }))
})
