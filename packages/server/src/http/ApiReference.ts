/**
 * The API reference page (`GET /v1/docs`): Scalar's standalone script inline, from the copy
 * effect ships (no CDN: the page works offline), and the OpenAPI document of the public API.
 *
 * Why not effect's `HttpApiScalar.layer`: it imports that 6 MB script when the server starts,
 * which keeps it in the heap twice for the life of the process (the module's source text and
 * the string it exports), and memoizes the page's text on its first request as a third copy.
 * Here the script is read from that module's file when the page is first asked for, and only the
 * page's encoded bytes are kept (D93). The page itself is written as effect writes it.
 *
 * @since 0.9.0
 */
import { readFile } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import { Duration, Effect, Exit, Layer, Schema } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { type HttpApi, type HttpApiGroup, OpenApi } from "effect/http-api"
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

const encoder = new TextEncoder()

const buildPage = <Id extends string, Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<Id, Groups>, modulePath: string) =>
  Effect.tryPromise(() => readFile(modulePath, "utf8")).pipe(
    Effect.flatMap(scriptOfModule),
    Invariant.orDie("effect's httpApiScalar module is installed and exports Scalar's script as one JSON string literal"),
    Effect.map((script) => encoder.encode(pageOf(OpenApi.fromApi(api), script)))
  )

/** A built page is kept for good; a failed build is not kept, so the next request tries again. */
const keepBuiltPage = (exit: Exit.Exit<Uint8Array>) => Exit.isSuccess(exit) ? Duration.infinity : Duration.zero

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
 * The route: the page is built on its first request and its bytes kept for the next ones.
 *
 * @since 0.9.0
 * @category layers
 */
export const layer = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  path: HttpRouter.PathInput
) =>
  Layer.unwrap(Effect.map(cachedPage(api), (page) =>
    HttpRouter.add(
      "GET",
      path,
      Effect.map(page, (bytes) => HttpServerResponse.uint8Array(bytes, { contentType: "text/html; charset=utf-8" }))
    )))
