/**
 * No 5xx from input (D2): a seeded fuzz over every operation of
 * the served OpenAPI document, over a real socket to a real server on PGlite.
 *
 * Each request picks an operation, a caller (test, live and agent keys of
 * verified accounts, an unverified account, no key, malformed keys) and a mix
 * of malformations: bad JSON, wrong types, huge and exotic numbers, unicode
 * (RTL, emoji, lone surrogates), NUL and control bytes, very long paths and
 * values, bad or duplicate headers, wrong content types, empty bodies. Every
 * answer must be below 500, carry `X-Request-Id`, put any error in D1's
 * envelope with that request id, and never contain the canary amounts or memo
 * the bodies carry.
 *
 * Replay a run with `PPS_FUZZ_SEED=<seed>` (printed at the start); change its
 * size with `PPS_FUZZ_REQUESTS`. Money-moving endpoints are exercised by callers
 * with no funds and no registered key, and the faucet's test-mode callers never
 * get a grantable amount, so the fuzz does not hammer the chain.
 *
 * A second test writes raw malformed HTTP on a socket (bad request line, a 20 kB
 * header, bad chunked encoding, conflicting Content-Length) and checks that
 * Node's parser refusals carry the envelope and a request id too.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { bearer, createAccount, expectEnvelope, postJson, send } from "./support/http.ts"
import { mulberry32 } from "./fault/prng.ts"
import { makeTestServer, TestServer, type TestServerShape } from "./support/TestServer.ts"

const requestsTotal = Number(process.env["PPS_FUZZ_REQUESTS"] ?? "20000")
/**
 * CI replays one fixed seed, so a red run is reproducible and never a coin toss; a developer's
 * run draws a new one each time (printed) to find what the fixed one does not.
 */
const seed = Number(
  process.env["PPS_FUZZ_SEED"] ?? (process.env["CI"] === "true" ? "20261122" : String(Math.floor(Math.random() * 2 ** 31)))
)
/** Modest: the machine is shared, and PGlite answers one query at a time anyway. */
const concurrency = Number(process.env["PPS_FUZZ_CONCURRENCY"] ?? "8")
/** A file to append each request to before it is sent: finds the one a hang started with. */
const tracePath = process.env["PPS_FUZZ_TRACE"]
/** No answer within this is a failure: the server hung on the request. */
const requestTimeoutMs = Number(process.env["PPS_FUZZ_REQUEST_TIMEOUT_MS"] ?? "10000")
/** A bound on the whole run, whatever the machine's speed. */
const runTimeMaxMs = 200_000

/** Values that must never come back: amounts in decimal and base units, and a memo. */
const canaryAmount = "123456.654321"
const canaryAmountLarge = "7654321.012345"
const canaryMemo = "memo-canary-7f3q9ZKx"
const canaries = [canaryAmount, "123456654321", canaryAmountLarge, "7654321012345", canaryMemo]

// ---------------------------------------------------------------------------------------------
// A small seeded PRNG (mulberry32): the same seed replays the same requests.
// ---------------------------------------------------------------------------------------------

const makeRandom = (initial: number) => {
  const { next } = mulberry32(initial)
  const int = (max: number) => Math.floor(next() * max)
  const pick = <A>(items: ReadonlyArray<A>): A => items[int(items.length)]!
  const chance = (p: number) => next() < p
  return { next, int, pick, chance }
}
type Random = ReturnType<typeof makeRandom>

// ---------------------------------------------------------------------------------------------
// Exotic values.
// ---------------------------------------------------------------------------------------------

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
/** encodeURIComponent refuses lone surrogates: send them as the UTF-8 bytes a surrogate would have. */
const encode = (text: string) => {
  try {
    return encodeURIComponent(text)
  } catch {
    return "%ED%A0%80"
  }
}

const fakeUlid = (random: Random) => Array.from({ length: 26 }, () => random.pick([...crockford])).join("")

const exoticStrings: ReadonlyArray<string> = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "\u0001\u0002\u0003\u001f\u007f",
  "\t\r\n",
  "\ud800",
  "x\udc00y",
  "\ud83d\ude00\ud83d\udca5",
  "\u202e\u0645\u0631\u062d\u0628\u0627\u202c",
  "\u05e9\u05dc\u05d5\u05dd",
  "\ufeff\u200b\u200d",
  "Ω≈ç√∫",
  "../../etc/passwd",
  "%00",
  "%ZZ",
  "' OR 1=1 --",
  "\\",
  "\"",
  "<script>alert(1)</script>",
  "NaN",
  "Infinity",
  "-0",
  "1e309",
  "18446744073709551616",
  "0x10",
  "@",
  "@@bob",
  "@bob",
  "@alice/bot",
  "0x0000000000000000000000000000000000000000",
  "hc_test_",
  "2026-02-30T00:00:00Z",
  "2026-13-01T00:00:00Z",
  "0000-01-01T00:00:00Z",
  "2026-01-01T24:00:00Z",
  "2026-01-01T00:00:60Z",
  "9999-12-31T23:59:59.999999+14:59",
  "2026-11-22T10:00:00.000Z"
]

const exoticNumbers: ReadonlyArray<unknown> = [
  0,
  -0,
  -1,
  1.5,
  1e308,
  -1e308,
  5e-324,
  2 ** 53,
  2 ** 64,
  Number.MAX_SAFE_INTEGER + 2,
  123456789012345678901234567890
]

/** Raw JSON number tokens JSON.stringify cannot write. */
const rawNumberTokens: ReadonlyArray<string> = ["1e309", "-1e309", "-0", "18446744073709551616", "1E+400", "0.0000000000000000000001", "1e-400"]

const longString = (random: Random) => random.pick(["a", "\u00e9", "\ud83d\ude00", "\u0000", "%"]).repeat(random.pick([300, 5_000, 40_000]))

const exoticValue = (random: Random): unknown => {
  switch (random.int(9)) {
    case 0:
      return random.pick(exoticNumbers)
    case 1:
      return random.chance(0.5)
    case 2:
      return null
    case 3:
      return []
    case 4:
      return {}
    case 5:
      return longString(random)
    case 6:
      return [random.pick(exoticStrings), random.pick(exoticNumbers)]
    case 7:
      return { nested: { deeper: random.pick(exoticStrings) } }
    default:
      return random.pick(exoticStrings)
  }
}

// ---------------------------------------------------------------------------------------------
// Values from the OpenAPI document's schemas.
// ---------------------------------------------------------------------------------------------

type JsonSchema = {
  readonly $ref?: string
  readonly type?: string | ReadonlyArray<string>
  readonly properties?: Record<string, JsonSchema>
  readonly required?: ReadonlyArray<string>
  readonly items?: JsonSchema
  readonly anyOf?: ReadonlyArray<JsonSchema>
  readonly oneOf?: ReadonlyArray<JsonSchema>
  readonly allOf?: ReadonlyArray<JsonSchema>
  readonly enum?: ReadonlyArray<unknown>
  readonly const?: unknown
  readonly pattern?: string
}

interface Operation {
  readonly method: string
  readonly path: string
  readonly pathParams: ReadonlyArray<{ readonly name: string; readonly schema: JsonSchema }>
  readonly queryParams: ReadonlyArray<{ readonly name: string; readonly schema: JsonSchema }>
  readonly body: JsonSchema | undefined
}

/** Plausible values for the fields this API has, so some requests get past validation. */
const plausibleByField = (random: Random, field: string, faucet: boolean): unknown => {
  switch (field) {
    case "amount":
      return faucet ? canaryAmountLarge : random.pick([canaryAmount, canaryAmountLarge])
    case "memo":
      return canaryMemo
    case "to":
      return random.pick(["@bob", "@alice/bot", "@nobody_here", "0x000000000000000000000000000000000000dEaD"])
    case "asset":
      return random.pick(["USDG", "ETH"])
    case "url":
      return random.pick(["https://example.com/hook", "http://127.0.0.1:9/hook", "https://10.0.0.1/x"])
    case "events":
      return [random.pick(["transfer.confirmed", "transfer.failed", "agent.policy.updated"])]
    case "name":
      return `bot-${random.int(1000)}`
    case "active_hours":
      return random.pick(["00:00-24:00", "22:00-06:00", "09:00-17:00"])
    case "time_zone":
      return random.pick(["UTC", "Europe/Paris", "America/New_York"])
    case "allowed_recipients":
      return random.pick([null, [], ["@bob", "*.example.com"]])
    case "assets":
      return ["USDG"]
    case "daily_limit_usdg":
    case "per_transaction_limit_usdg":
    case "hitl_threshold_usdg":
      return random.pick([1, 10, 100.5])
    case "confidential":
      return random.chance(0.5)
    case "public_key":
      return `0x${"ab".repeat(32)}`
    default:
      return undefined
  }
}

const resolve = (doc: OpenApiDoc, schema: JsonSchema): JsonSchema =>
  schema.$ref === undefined ? schema : resolve(doc, doc.components?.schemas?.[schema.$ref.split("/").pop()!] ?? {})

/** A value for a schema: plausible for known fields, otherwise by type, sometimes exotic. */
const valueFor = (doc: OpenApiDoc, random: Random, raw: JsonSchema, field: string, faucet: boolean, depth = 0): unknown => {
  if (random.chance(0.12)) return exoticValue(random)
  const plausible = plausibleByField(random, field, faucet)
  if (plausible !== undefined && random.chance(0.8)) return plausible
  const schema = resolve(doc, raw)
  if (schema.const !== undefined) return schema.const
  if (schema.enum !== undefined && schema.enum.length > 0) return random.pick(schema.enum)
  const variants = schema.anyOf ?? schema.oneOf
  if (variants !== undefined && variants.length > 0) return valueFor(doc, random, random.pick(variants), field, faucet, depth)
  if (schema.allOf !== undefined && schema.allOf.length > 0) return valueFor(doc, random, schema.allOf[0]!, field, faucet, depth)
  const type = Array.isArray(schema.type) ? random.pick(schema.type) : schema.type
  switch (type) {
    case "object": {
      if (depth > 4) return {}
      const out: Record<string, unknown> = {}
      for (const [key, inner] of Object.entries(schema.properties ?? {})) {
        const required = schema.required?.includes(key) ?? false
        if (required ? random.chance(0.95) : random.chance(0.5)) out[key] = valueFor(doc, random, inner, key, faucet, depth + 1)
      }
      return out
    }
    case "array":
      return Array.from({ length: random.int(3) }, () => valueFor(doc, random, schema.items ?? {}, field, faucet, depth + 1))
    case "string":
      return random.chance(0.5) ? random.pick(exoticStrings) : `s${random.int(1e6)}`
    case "integer":
    case "number":
      return random.chance(0.5) ? random.int(200) : random.pick(exoticNumbers)
    case "boolean":
      return random.chance(0.5)
    case "null":
      return null
    default:
      return random.pick(exoticStrings)
  }
}

/** A path parameter: a well-formed id (known or random), or something that cannot be one. */
const pathParamValue = (random: Random, schema: JsonSchema, known: ReadonlyArray<string>): string => {
  const prefix = /^\^([a-z]+)_/.exec(schema.pattern ?? "")?.[1] ?? "x"
  switch (random.int(6)) {
    case 0:
      return known.length > 0 ? random.pick(known) : `${prefix}_${fakeUlid(random)}`
    case 1:
      return `${prefix}_${fakeUlid(random)}`
    case 2:
      return encode(random.pick(exoticStrings))
    case 3:
      return random.pick(["%00", "%ZZ", "%ED%A0%80", "%F0%9F%98%80", "..", "%2F", "%2e%2e", "a%00b", `${prefix}_%00`])
    case 4:
      return encode(longString(random)).slice(0, random.pick([100, 2_000, 9_000]))
    default:
      return `${prefix}_${fakeUlid(random).toLowerCase()}`
  }
}

const queryValue = (doc: OpenApiDoc, random: Random, name: string, schema: JsonSchema): string => {
  if (name === "from" || name === "to") return random.pick(exoticStrings.filter((s) => /^\d{4}-/.test(s)).concat(["2026-02-29T00:00:00Z", "2024-02-29T12:00:00+01:00", "garbage"]))
  if (name === "limit" || name === "offset") return random.pick(["1", "20", "100", "101", "0", "-1", "-0", "1e309", "1e2", "NaN", "2.5", "18446744073709551616", "9007199254740993", " 5", "0x10", ""])
  if (name === "status") return random.pick(["pending", "confirmed", "failed", "PENDING", "", "\u0000"])
  const value = valueFor(doc, random, schema, name, false)
  return typeof value === "string" ? value : JSON.stringify(value) ?? ""
}

interface OpenApiDoc {
  readonly paths: Record<string, Record<string, {
    readonly parameters?: ReadonlyArray<{ readonly name: string; readonly in: string; readonly schema?: JsonSchema }>
    readonly requestBody?: { readonly content?: Record<string, { readonly schema?: JsonSchema }> }
  }>>
  readonly components?: { readonly schemas?: Record<string, JsonSchema> }
}

const operationsOf = (doc: OpenApiDoc): ReadonlyArray<Operation> =>
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).filter(([method]) => ["get", "post", "put", "patch", "delete"].includes(method)).map(([method, op]) => ({
      method: method.toUpperCase(),
      path,
      pathParams: (op.parameters ?? []).filter((p) => p.in === "path").map((p) => ({ name: p.name, schema: p.schema ?? {} })),
      queryParams: (op.parameters ?? []).filter((p) => p.in === "query").map((p) => ({ name: p.name, schema: p.schema ?? {} })),
      body: op.requestBody?.content?.["application/json"]?.schema
    }))
  )

// ---------------------------------------------------------------------------------------------
// Requests.
// ---------------------------------------------------------------------------------------------

interface Callers {
  readonly test: string
  readonly live: string
  readonly agent: string
  readonly unverified: string
}

interface FuzzRequest {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string | Array<string>>
  readonly body: string | undefined
  readonly endpoint: string
}

const authorizationFor = (random: Random, callers: Callers): { readonly header: string | Array<string> | undefined; readonly key: keyof Callers | "none" } => {
  const roll = random.next()
  if (roll < 0.3) return { header: `Bearer ${callers.test}`, key: "test" }
  if (roll < 0.42) return { header: `Bearer ${callers.live}`, key: "live" }
  if (roll < 0.62) return { header: `Bearer ${callers.agent}`, key: "agent" }
  if (roll < 0.72) return { header: `Bearer ${callers.unverified}`, key: "unverified" }
  return {
    header: random.pick<string | Array<string> | undefined>([
      undefined,
      "",
      "Bearer",
      "Bearer ",
      `Basic ${Buffer.from("a:b").toString("base64")}`,
      `Bearer hc_test_${"A".repeat(43)}`,
      `Bearer hc_live_${"x".repeat(5000)}`,
      `bearer ${callers.test}`,
      `Bearer ${callers.test}x`,
      `Bearer ${Buffer.from("\ud83d\ude00\u202e").toString("latin1")}`,
      [`Bearer ${callers.test}`, `Bearer ${callers.live}`]
    ]),
    key: "none"
  }
}

/** Turns a JSON value into text with some raw-number tokens JSON.stringify cannot write. */
const withRawNumbers = (random: Random, value: unknown): string =>
  JSON.stringify(value).replace(/:(-?\d+(\.\d+)?)(?=[,}])/g, (whole) => random.chance(0.5) ? `:${random.pick(rawNumberTokens)}` : whole)

const bodyText = (doc: OpenApiDoc, random: Random, op: Operation, faucetSafe: boolean): string | undefined => {
  const schema = op.body
  switch (random.int(14)) {
    case 0:
      return undefined
    case 1:
      return ""
    case 2:
      return random.pick(["{", "{\"a\":", "[1,2", "nul", "{'a':1}", "{\"amount\":\"1\",}", "\u0000", "{\"a\":\"\\u0000\"}", "{\"a\":\"\\ud800\"}", "{\"\\u0000\":1}"])
    case 3:
      return random.pick(["null", "[]", "42", "\"text\"", "true", "{}"])
    case 4:
      return "[".repeat(random.pick([100, 2_000, 20_000])) + "]".repeat(random.pick([0, 100, 2_000, 20_000]))
    case 5:
      return JSON.stringify({ filler: "x".repeat(70 * 1024) })
    default: {
      const value = schema === undefined ? { unexpected: exoticValue(random) } : valueFor(doc, random, schema, "", faucetSafe)
      if (typeof value === "object" && value !== null && !Array.isArray(value) && random.chance(0.2)) {
        ;(value as Record<string, unknown>)[random.pick(["extra", "__proto__", "constructor", "\u0000", "amount", "memo"])] =
          random.pick<unknown>([canaryAmount, canaryMemo, exoticValue(random)])
      }
      const text = random.chance(0.25) ? withRawNumbers(random, value) : JSON.stringify(value) ?? "null"
      return text
    }
  }
}

const makeRequest = (doc: OpenApiDoc, random: Random, ops: ReadonlyArray<Operation>, callers: Callers, known: Record<string, ReadonlyArray<string>>): FuzzRequest => {
  // A few requests go to paths and methods the document does not have.
  const op = random.chance(0.03)
    ? { method: random.pick(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]), path: random.pick(["/v1/nope", "/v1", "/v1/transfers/{transfer_id}/x", "/v1//transfers", "/V1/transfers", "/v1/transfers/"]), pathParams: [{ name: "transfer_id", schema: {} }], queryParams: [], body: undefined }
    : random.pick(ops)
  const method = random.chance(0.04) ? random.pick(["GET", "POST", "PUT", "DELETE", "PATCH"]) : op.method
  const auth = authorizationFor(random, callers)
  // Whatever the caller (a duplicate Authorization header counts as its first), a
  // faucet body never holds a grantable amount: no fuzz request mints on the chain.
  const faucetSafe = op.path === "/v1/test/faucet"
  let path = op.path
  for (const param of op.pathParams) path = path.replace(`{${param.name}}`, pathParamValue(random, param.schema, known[param.name] ?? []))
  const query: Array<string> = []
  for (const param of op.queryParams) {
    if (random.chance(0.5)) query.push(`${encode(param.name)}=${encode(queryValue(doc, random, param.name, param.schema))}`)
  }
  if (random.chance(0.1)) query.push(random.pick(["limit=1&limit=2", "unknown=1", "%00=%00", "from=2026-01-01T00:00:00Z&from=x", "a=%ZZ", `q=${"z".repeat(8_000)}`]))
  const fullPath = query.length > 0 ? `${path}?${query.join("&")}` : path
  const headers: Record<string, string | Array<string>> = {}
  if (auth.header !== undefined) headers["authorization"] = auth.header
  let body = ["POST", "PUT", "PATCH"].includes(method) || random.chance(0.08) ? bodyText(doc, random, op, faucetSafe) : undefined
  if (faucetSafe && body !== undefined) body = body.replaceAll(canaryAmount, canaryAmountLarge)
  if (body !== undefined) {
    headers["content-type"] = random.chance(0.85)
      ? random.pick(["application/json", "application/json; charset=utf-8", "APPLICATION/JSON"])
      : random.pick(["text/plain", "application/x-www-form-urlencoded", "application/json5", "", "multipart/form-data; boundary=x", ["application/json", "text/plain"]])
  }
  if (method === "POST" && random.chance(0.3)) {
    headers["idempotency-key"] = random.pick([`k-${random.int(50)}`, "", "x".repeat(300), Buffer.from("\ud83d\ude00").toString("latin1")])
  }
  if (random.chance(0.05)) headers["x-decryption-proof"] = random.pick(["", "AAAA", "%%%", "x".repeat(3000)])
  if (random.chance(0.05)) headers["x-request-id"] = "req_forged"
  if (random.chance(0.03)) headers["accept"] = "text/html"
  return { method, path: fullPath, headers, body, endpoint: `${op.method} ${op.path}` }
}

interface FuzzResponse {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly text: string
}

const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })

/** One request over a real socket; node:http (not fetch) so duplicate and odd headers go out as written. */
const sendRaw = (baseUrl: string, request: FuzzRequest, via: http.Agent | false) =>
  new Promise<FuzzResponse | { readonly clientError: string }>((resolve) => {
    const url = new URL(baseUrl)
    let req: http.ClientRequest
    try {
      req = http.request({ host: url.hostname, port: url.port, method: request.method, path: request.path, headers: request.headers, agent: via }, (res) => {
        // The live event stream never ends by itself: its answer is its status and headers.
        if (res.statusCode === 200 && String(res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          resolve({ status: 200, headers: res.headers, text: "" })
          req.destroy()
          return
        }
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }))
        res.on("error", (error) => resolve({ clientError: String(error) }))
      })
    } catch (error) {
      resolve({ clientError: String(error) })
      return
    }
    req.setTimeout(requestTimeoutMs, () => req.destroy(new Error("timeout")))
    req.on("error", (error) => resolve({ clientError: String(error) }))
    req.end(request.body)
  })

const Envelope = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String.check(Schema.isPattern(/^[a-z_]+$/)),
    message: Schema.String.check(Schema.isMinLength(1)),
    param: Schema.optionalKey(Schema.String),
    reason: Schema.optionalKey(Schema.String),
    request_id: Schema.String
  })
})

/** What is wrong with an answer, if anything. */
const problemsOf = (response: FuzzResponse): ReadonlyArray<string> => {
  const problems: Array<string> = []
  const requestId = response.headers["x-request-id"]
  if (response.status >= 500) problems.push(`status ${response.status}`)
  if (typeof requestId !== "string" || !/^req_[0-9A-Z]{26}$/.test(requestId)) problems.push("no X-Request-Id")
  if (response.status >= 400) {
    let json: unknown = undefined
    try {
      json = JSON.parse(response.text)
    } catch {
      problems.push("error body is not JSON")
    }
    const envelope = Schema.decodeUnknownOption(Envelope)(json)
    if (envelope._tag === "None") problems.push("error body is not D1's envelope")
    else if (envelope.value.error.request_id !== requestId) problems.push("request_id differs from X-Request-Id")
  }
  for (const canary of canaries) if (response.text.includes(canary)) problems.push(`canary ${canary} in body`)
  return problems
}

const describeRequest = (request: FuzzRequest) =>
  `${request.method} ${request.path.slice(0, 200)} headers=${JSON.stringify(request.headers).slice(0, 300)} body=${JSON.stringify(request.body?.slice(0, 300))}`

/** Accounts and keys the fuzz acts as: none has funds or a registered key. */
const setUp = (server: TestServerShape, suffix = "") =>
  Effect.gen(function*() {
    const alice = yield* createAccount(server, `alice${suffix}`)
    yield* createAccount(server, `bob${suffix}`)
    const carol = yield* createAccount(server, `carol${suffix}`, "unverified")
    const live = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), { account_id: alice.account_id, name: "live", mode: "live" }))
    const created = yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(bearer(alice.api_key), {
      name: "bot",
      spend_policy: { daily_limit_usdg: 50, per_transaction_limit_usdg: 20, hitl_threshold_usdg: 5, allowed_recipients: ["@bob", "*.example.com"] }
    }))
    assert.strictEqual(created.status, 201, created.text)
    const agentAccount = Schema.decodeUnknownSync(Schema.Struct({ account_id: Schema.String }))(created.json)
    const agentKey = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), { account_id: agentAccount.account_id, name: "agent" }))
    const keyOf = (response: { readonly json: unknown }) => Schema.decodeUnknownSync(Schema.Struct({ api_key: Schema.String }))(response.json).api_key
    const callers: Callers = { test: alice.api_key, live: keyOf(live), agent: keyOf(agentKey), unverified: carol.api_key }
    return { callers, known: { account_id: [agentAccount.account_id, alice.account_id] } as Record<string, ReadonlyArray<string>> }
  })

/** Raw bytes on a fresh socket; resolves with everything the server sent before closing. */
const rawExchange = (baseUrl: string, bytes: string | Buffer) =>
  new Promise<string>((resolve, reject) => {
    const url = new URL(baseUrl)
    const socket = net.connect({ host: url.hostname, port: Number(url.port) })
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk) => chunks.push(chunk))
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("utf8")))
    socket.on("error", (error) => chunks.length > 0 ? resolve(Buffer.concat(chunks).toString("utf8")) : reject(error))
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer")))
    socket.write(bytes)
  })

/** Checks a raw answer: the status, D1's envelope, and a request id in header and body alike. */
const expectRawEnvelope = (raw: string, status: number, code: string) => {
  const [head = "", body = ""] = raw.split("\r\n\r\n")
  const statusLine = head.split("\r\n")[0] ?? ""
  assert.match(statusLine, new RegExp(`^HTTP/1\\.1 ${status} `), raw.slice(0, 300))
  const requestId = /^x-request-id: (req_[0-9A-Z]{26})$/im.exec(head)?.[1]
  assert.isDefined(requestId, head)
  const envelope = Schema.decodeUnknownSync(Envelope)(JSON.parse(body))
  assert.strictEqual(envelope.error.code, code)
  assert.strictEqual(envelope.error.request_id, requestId)
}

describe("fuzz", () => {
  layer(makeTestServer(), { timeout: "120 seconds", excludeTestServices: true })("pglite", (it) => {
    it.effect("boundary regressions: impossible ids, dates and text are 4xx, an agent's sealed balance a defined 403", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const { callers } = yield* setUp(server, "2")
        const as = bearer(callers.test)
        const cases: ReadonlyArray<readonly [string, number, string]> = [
          ["/v1/transfers/%00", 404, "transfer_not_found"],
          ["/v1/transfers/%00/sealed", 404, "transfer_not_found"],
          ["/v1/agents/%00/spend-policy", 404, "agent_not_found"],
          ["/v1/agents/transactions/%00/sealed", 404, "transaction_not_found"],
          ["/v1/webhooks/%00/deliveries", 404, "webhook_not_found"],
          ["/v1/transfers?from=2026-02-30T00:00:00Z", 400, "invalid_request"],
          ["/v1/transfers?to=2026-01-01T24:00:00Z", 400, "invalid_request"],
          ["/v1/webhooks/wh_01JUNKJUNKJUNKJUNKJUNKJUNK/deliveries?offset=1e300", 404, "webhook_not_found"]
        ]
        for (const [path, status, code] of cases) expectEnvelope(yield* send(`${server.baseUrl}${path}`, { headers: as }), status, code)
        const replay = `${server.baseUrl}/v1/webhooks/wh_00000000000000000000000000/replay/evt_%00`
        expectEnvelope(yield* send(replay, { method: "POST", headers: as }), 404, "event_not_found")
        const leap = yield* send(`${server.baseUrl}/v1/transfers?from=2024-02-29T00:00:00Z&to=2026-11-22T10:00:00.123456%2B14:00`, { headers: as })
        assert.strictEqual(leap.status, 200, leap.text)
        assert.strictEqual(expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers?from=2026-02-30T00:00:00Z`, { headers: as }), 400, "invalid_request").param, "from")
        const nul = expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers`, postJson(as, { to: "@bob2\u0000", amount: "1" })), 400, "invalid_request")
        assert.strictEqual(nul.param, "to")
        const surrogate = yield* send(`${server.baseUrl}/v1/webhooks`, {
          method: "POST",
          headers: { ...as, "content-type": "application/json" },
          body: "{\"url\":\"https://example.com/\\ud800\",\"events\":[\"transfer.confirmed\"]}"
        })
        assert.strictEqual(expectEnvelope(surrogate, 400, "invalid_request").param, "url")
        expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me/balances/sealed`, { headers: bearer(callers.agent) }), 403, "not_agent_owner")
      }))

    it.effect("raw malformed HTTP: Node's parser refusals carry D1's envelope and a request id", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const exchange = (bytes: string) => Effect.promise(() => rawExchange(server.baseUrl, bytes))
        expectRawEnvelope(yield* exchange("GARBAGE\r\n\r\n"), 400, "invalid_request")
        expectRawEnvelope(yield* exchange("GET /v1/accounts/me HTTP/9.9\r\nHost: x\r\n\r\n"), 400, "invalid_request")
        expectRawEnvelope(yield* exchange(`GET /v1/accounts/me HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`), 431, "headers_too_large")
        expectRawEnvelope(
          yield* exchange("POST /v1/transfers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n"),
          400,
          "invalid_request"
        )
        expectRawEnvelope(
          yield* exchange("POST /v1/transfers HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"),
          400,
          "invalid_request"
        )
        expectRawEnvelope(yield* exchange("GET /v1/accounts/me HTTP/1.1\r\nHost: x\r\nBad\u0000Header: 1\r\n\r\n"), 400, "invalid_request")
      }))

    it.effect(`no 5xx, D1 envelopes and no canary across ${requestsTotal} requests from the OpenAPI document`, () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        console.log(`fuzz seed ${seed} (replay with PPS_FUZZ_SEED=${seed}), ${requestsTotal} requests, concurrency ${concurrency}`)
        const { callers, known } = yield* setUp(server)
        const openapi = yield* send(`${server.baseUrl}/v1/openapi.json`)
        assert.strictEqual(openapi.status, 200)
        const doc = openapi.json as OpenApiDoc
        const ops = operationsOf(doc)
        assert.isAbove(ops.length, 20)
        const random = makeRandom(seed)
        // Generated up front, so the sequence depends on the seed only, not on timing.
        const requests = Array.from({ length: requestsTotal }, () => makeRequest(doc, random, ops, callers, known))
        const statuses = new Map<number, number>()
        const endpoints = new Set<string>()
        const failures: Array<string> = []
        let clientErrors = 0
        const clientErrorSamples: Array<string> = []
        const slowest = new Map<string, { count: number; totalMs: number; maxMs: number }>()
        let sent = 0
        const startedMs = Date.now()
        yield* Effect.promise(async () => {
          let next = 0
          const worker = async () => {
            while (next < requests.length && Date.now() - startedMs < runTimeMaxMs) {
              const request = requests[next++]!
              const requestStartedMs = Date.now()
              if (tracePath !== undefined) fs.appendFileSync(tracePath, `${next - 1} +${requestStartedMs - startedMs} ${describeRequest(request)}\n`)
              // A keep-alive connection the server is closing (after a 413, say) can
              // swallow the next request: that one is sent again on a fresh connection,
              // and only a request that gets no answer on its own connection counts.
              const first = await sendRaw(server.baseUrl, request, agent)
              const response = "clientError" in first && !first.clientError.includes("ERR_") ? await sendRaw(server.baseUrl, request, false) : first
              const tookMs = Date.now() - requestStartedMs
              sent++
              const slow = slowest.get(request.endpoint) ?? { count: 0, totalMs: 0, maxMs: 0 }
              slowest.set(request.endpoint, { count: slow.count + 1, totalMs: slow.totalMs + tookMs, maxMs: Math.max(slow.maxMs, tookMs) })
              if ("clientError" in response) {
                clientErrors++
                if (clientErrorSamples.length < 20) clientErrorSamples.push(`+${requestStartedMs - startedMs} ms ${response.clientError}: ${describeRequest(request)}`)
                continue
              }
              endpoints.add(request.endpoint)
              statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
              const problems = problemsOf(response)
              if (problems.length > 0 && failures.length < 50) {
                failures.push(`${problems.join(", ")}: ${describeRequest(request)} -> ${response.status} ${response.text.slice(0, 300)}`)
              }
            }
          }
          await Promise.all(Array.from({ length: concurrency }, worker))
        })
        const durationMs = Date.now() - startedMs
        const answered = sent - clientErrors
        console.log(
          `fuzz seed ${seed}: ${sent} sent, ${answered} answered in ${durationMs} ms over ${endpoints.size} endpoints ` +
            `(${ops.length} operations); client-side refusals ${clientErrors}; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort(([a], [b]) => a - b)))}`
        )
        if (failures.length > 0) console.log(failures.join("\n"))
        if (process.env["PPS_FUZZ_TIMINGS"] !== undefined) {
          console.log([...slowest].sort(([, a], [, b]) => b.totalMs - a.totalMs).map(([e, t]) => `${e}: ${t.count} req, ${t.totalMs} ms total, max ${t.maxMs}`).join("\n"))
        }
        if (clientErrorSamples.length > 0) console.log(`client-side refusals:\n${clientErrorSamples.join("\n")}`)
        assert.deepStrictEqual(failures, [], `seed ${seed}`)
        assert.strictEqual(sent, requestsTotal, `the run hit its ${runTimeMaxMs} ms bound (seed ${seed})`)
        assert.isAtMost(clientErrors, requestsTotal / 100, "the client refused too many generated requests")
        assert.isAtLeast(endpoints.size, ops.length, "every operation was exercised")
      }), { timeout: 300_000 })
  })
})
