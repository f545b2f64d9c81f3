/**
 * The dashboard's built files (`packages/dashboard/dist`), read once at start and served
 * compressed when the browser takes it: the build writes a Brotli (`.br`) and a gzip (`.gz`)
 * copy beside each text file (`packages/dashboard/vite.config.ts`), so nothing is compressed
 * per request. The copy is chosen by `Accept-Encoding` (Brotli first, it is smaller), and every
 * answer of a file that has copies says `Vary: Accept-Encoding`, so a cache keeps them apart.
 *
 * @since 0.9.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { HttpServerResponse } from "effect/http"

/** The encodings the build writes, best first, with the suffix of their copy. */
const encodings = [
  { name: "br", suffix: ".br" },
  { name: "gzip", suffix: ".gz" }
] as const

type Encoding = (typeof encodings)[number]["name"]

/**
 * One file of the page: its bytes, its media type, and its compressed copies.
 *
 * @since 0.9.0
 * @category models
 */
export interface PageFile {
  readonly bytes: Uint8Array
  readonly type: string
  readonly encoded: ReadonlyMap<Encoding, Uint8Array>
}

const types: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".wasm": "application/wasm"
}

/**
 * Every file of `packages/dashboard/dist` by its path under it, each with the copies the build
 * compressed; an empty map when the page was not built. The copies are not files of their own.
 *
 * @since 0.9.0
 * @category constructors
 */
export const readBuiltPage = (): ReadonlyMap<string, PageFile> => {
  const root = fileURLToPath(new URL("../../../dashboard/dist/", import.meta.url))
  const files = new Map<string, PageFile>()
  if (!fs.existsSync(root)) return files
  const isCopy = (name: string) => encodings.some((encoding) => name.endsWith(encoding.suffix))
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || isCopy(entry.name)) continue
    const full = path.join(entry.parentPath, entry.name)
    const encoded = new Map<Encoding, Uint8Array>()
    for (const encoding of encodings) {
      if (fs.existsSync(full + encoding.suffix)) encoded.set(encoding.name, fs.readFileSync(full + encoding.suffix))
    }
    files.set(path.relative(root, full).split(path.sep).join("/"), {
      bytes: fs.readFileSync(full),
      type: types[path.extname(entry.name)] ?? "application/octet-stream",
      encoded
    })
  }
  return files
}

/**
 * The encodings an `Accept-Encoding` header accepts (RFC 9110 12.5.3): listed with a weight
 * above 0, or covered by `*`; `identity` needs no copy.
 *
 * @since 0.9.0
 * @category parsing
 */
export const acceptedEncodings = (header: string | undefined): ReadonlySet<string> => {
  const weights = new Map<string, number>()
  for (const part of (header ?? "").split(",")) {
    const [listed = "", ...parameters] = part.toLowerCase().split(";")
    const name = listed.trim()
    if (name === "") continue
    const q = parameters.map((p) => p.trim()).find((p) => p.startsWith("q="))
    const weight = q === undefined ? 1 : Number(q.slice(2))
    weights.set(name, Number.isFinite(weight) ? weight : 0)
  }
  const wildcard = weights.get("*")
  return new Set(encodings.map((e) => e.name).filter((name) => (weights.get(name) ?? wildcard ?? 0) > 0))
}

/**
 * The answer for one file: its best copy the browser accepts (with `Content-Encoding`), or its
 * bytes as built; `Vary: Accept-Encoding` whenever the file has copies.
 *
 * @since 0.9.0
 * @category constructors
 */
export const fileResponse = (file: PageFile, acceptEncoding: string | undefined, cacheControl: string) => {
  const accepted = acceptedEncodings(acceptEncoding)
  const chosen = encodings
    .filter((encoding) => accepted.has(encoding.name))
    .flatMap((encoding) => {
      const bytes = file.encoded.get(encoding.name)
      return bytes === undefined ? [] : [{ name: encoding.name, bytes }]
    })[0]
  const vary: Record<string, string> = file.encoded.size === 0 ? {} : { vary: "Accept-Encoding" }
  return HttpServerResponse.uint8Array(chosen?.bytes ?? file.bytes, {
    contentType: file.type,
    headers: { "cache-control": cacheControl, ...vary, ...(chosen === undefined ? {} : { "content-encoding": chosen.name }) }
  })
}
