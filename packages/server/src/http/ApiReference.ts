/**
 * The API reference page (`GET /v1/docs`): Scalar's standalone script inline, from the copy
 * effect ships (no CDN: the page works offline), and the OpenAPI document of the public API.
 *
 * Why not effect's `HttpApiScalar.layer`: it imports that 6 MB script when the server starts,
 * which keeps it in the heap twice for the life of the process (the module's source text and
 * the string it exports), and memoizes the page's text on its first request as a third copy.
 * Here the script is read from that module's file when the page is first asked for, and only the
 * page's encoded bytes are kept (D93). The page itself is written as effect writes it. A read that
 * fails (too many open files, an I/O error) is an operating error: answered 503
 * `service_unavailable` and tried again on the next request.
 *
 * @since 0.9.0
 */
import { readFile } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import { Data, Duration, Effect, Exit, Layer, Schema } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { type HttpApi, type HttpApiGroup, OpenApi } from "effect/http-api"
import { errorBody } from "@pps/api/Errors"
import * as Invariant from "../platform/Invariant.ts"

/**
 * The module in which effect ships Scalar's script, beside `effect/http-api`'s entry (its package
 * exports none of its internals, so it is found from there): one export, `javascript`, a JSON
 * string literal. test/startupModules.test.ts checks both against the installed version.
 *
 * @since 0.9.0
 * @category constants
 */
export const scalarModulePath = fileURLToPath(new URL("./internal/httpApiScalar.js", import.meta.resolve("effect/http-api")))

const exportPrefix = "export const javascript="

const ScriptLiteral = Schema.fromJsonString(Schema.String)

/**
 * The script out of that module's text, without evaluating it: the text between the export and
 * its closing `";`, decoded as the JSON string it is.
 *
 * @since 0.9.0
 * @category parsing
 */
export const scriptOfModule = (source: string) => {
  const start = source.indexOf(exportPrefix)
  const end = source.lastIndexOf("\";")
  return Schema.decodeUnknownEffect(ScriptLiteral)(start < 0 || end < start ? "" : source.slice(start + exportPrefix.length, end + 1))
}

/** JSON inside a `<script>`: no `</script>` can end it early, and no line separator breaks it. */
const scriptJson = (value: unknown) =>
  JSON.stringify(value).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029")

const escapeHtml = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;")

/**
 * The page's HTML, as `HttpApiScalar` writes it: the spec and Scalar's configuration as JSON in
 * the call that renders it.
 *
 * @since 0.9.0
 * @category rendering
 */
export const pageOf = (spec: OpenApi.OpenAPISpec, script: string) => {
  const description = !spec.info.description
    ? ""
    : `<meta name="description" content="${escapeHtml(spec.info.description)}"/>
    <meta name="og:description" content="${escapeHtml(spec.info.description)}"/>`
  return `<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>${escapeHtml(spec.info.title)}</title>
    ${description}
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <div id="api-reference-container"></div>
    <script>${script}</script>
    <script>
      window.Scalar.createApiReference(document.getElementById('api-reference-container'), {
        ...${scriptJson({ _integration: "html" })},
        content: ${scriptJson(spec)}
      })
    </script>
  </body>
</html>`
}

/**
 * Reading the script's module failed: an operating error of the file system at request time
 * (EMFILE, EIO, a file replaced under a running server), not a broken rule of ours. `code` is
 * the read's errno code, for the log.
 *
 * @since 0.16.0
 * @category errors
 */
export class ScriptUnreadable extends Data.TaggedError("ScriptUnreadable")<{
  readonly modulePath: string
  readonly code: string
}> {}

const errnoCode = (error: unknown): string =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : "unknown"

const encoder = new TextEncoder()

const buildPage = <Id extends string, Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<Id, Groups>, modulePath: string) =>
  Effect.tryPromise({
    try: () => readFile(modulePath, "utf8"),
    catch: (error) => new ScriptUnreadable({ modulePath, code: errnoCode(error) })
  }).pipe(
    // What was read is the module of the effect version installed (test/startupModules.test.ts
    // checks its shape): text of another shape means that check and this code disagree.
    Effect.flatMap((source) => Invariant.orDie("effect's httpApiScalar module exports Scalar's script as one JSON string literal")(scriptOfModule(source))),
    Effect.map((script) => encoder.encode(pageOf(OpenApi.fromApi(api), script)))
  )

/** A built page is kept for good; a failed build is not kept, so the next request tries again. */
const keepBuiltPage = (exit: Exit.Exit<Uint8Array, ScriptUnreadable>) => Exit.isSuccess(exit) ? Duration.infinity : Duration.zero

/**
 * The page's bytes, built from the script in `modulePath` by the first run that succeeds and kept
 * from then on (tests point it at a file of their own).
 *
 * @since 0.9.0
 * @category constructors
 */
export const cachedPage = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  modulePath: string = scalarModulePath
) => Effect.cachedWithTTL(buildPage(api, modulePath), keepBuiltPage)

/**
 * D1's 503 for a script that could not be read (the envelope adds the request id and
 * `Retry-After`); the path and errno code go to the log, not to the client.
 */
const answerUnreadable = (error: ScriptUnreadable) =>
  Effect.logWarning("the API reference's script could not be read").pipe(
    Effect.annotateLogs({ module_path: error.modulePath, code: error.code }),
    Effect.as(HttpServerResponse.jsonUnsafe(
      errorBody("service_unavailable", "The API reference is temporarily unavailable; retry after the number of seconds in Retry-After."),
      { status: 503 }
    ))
  )

/**
 * The route: the page is built on its first request and its bytes kept for the next ones; a
 * request that meets a failed read is answered 503 (tests point `modulePath` at a file of their own).
 *
 * @since 0.9.0
 * @category layers
 */
export const layer = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  path: HttpRouter.PathInput,
  modulePath: string = scalarModulePath
) =>
  Layer.unwrap(Effect.map(cachedPage(api, modulePath), (page) =>
    HttpRouter.add(
      "GET",
      path,
      page.pipe(
        Effect.map((bytes) => HttpServerResponse.uint8Array(bytes, { contentType: "text/html; charset=utf-8" })),
        Effect.catchTag("ScriptUnreadable", answerUnreadable)
      )
    )))
