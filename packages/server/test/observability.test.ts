/**
 * Operators can see the server run, and what they see holds no amount, memo, key or secret.
 *
 * A whole server on real sockets (PGlite, embedded anvil, the guardian in process) exports
 * OTLP/HTTP (JSON) to a real receiver on loopback: a node:http server in this test that keeps
 * every body it is sent. Transfers with distinctive amounts and memos go through it (two
 * confirmed, one refused), a balance is read with its decryption proof in the query string, and
 * then:
 * - the admin listener's `/metrics` refuses a scrape without the admin token, and with it shows
 *   the transfers counted: `POST /v1/transfers` answered 201 under its route's template, the
 *   transfers confirmed, the guardian's calls timed, the relayers' balances read from the chain,
 *   the backlogs and live nodes read from the database;
 * - the receiver got spans of those requests (`POST /v1/transfers`, `Transfers.create`) and the
 *   metrics;
 * - every metric deploy/'s Grafana dashboard and Prometheus alerts read is in the scrape;
 * - neither the scrape nor any exported body holds an amount (decimal, base units or hex), a
 *   memo, an API key, the admin token, the proof, the proven balance or the collector's token.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { OtlpExporter } from "effect/observability"
import { TransferRecord } from "@pps/api/Transfers"
import { parseHeaders } from "../src/observability/Otlp.ts"
import { balanceProof, fundedPair, registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, postJson, send } from "./support/http.ts"
import { parseExposition, sampleOf } from "./support/metrics.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { makeTestServer, postgres, TestServer } from "./support/TestServer.ts"

/** What the collector was sent: the signal's path, its content type and its body. */
interface Received {
  readonly path: string
  readonly contentType: string
  readonly body: Buffer
  readonly headers: http.IncomingHttpHeaders
}

class Collector extends Context.Service<Collector, { readonly url: string; readonly received: Array<Received> }>()("test/Collector") {}

/** A real OTLP/HTTP receiver on loopback: answers 200 and keeps every body. */
const CollectorLive = Layer.effect(
  Collector,
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly received: Array<Received>; readonly server: http.Server }>((resolve) => {
        const received: Array<Received> = []
        const server = http.createServer((request, response) => {
          const chunks: Array<Buffer> = []
          request.on("data", (chunk: Buffer) => chunks.push(chunk))
          request.on("end", () => {
            received.push({ path: request.url ?? "", contentType: request.headers["content-type"] ?? "", body: Buffer.concat(chunks), headers: request.headers })
            response.writeHead(200, { "content-type": "application/json" }).end("{}")
          })
        })
        server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, server }))
      })
    ),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )
)

const collectorToken = "collector-canary-token-5d7e"

const ServerWithExport = Layer.unwrap(Effect.gen(function*() {
  const collector = yield* Collector
  return makeTestServer({
    config: {
      otlp: {
        endpoint: collector.url,
        protocol: "http/json",
        headers: Option.some(Redacted.make(`x-collector-token=${collectorToken}`)),
        serviceName: "pps-observability-test"
      }
    }
  })
})).pipe(Layer.provideMerge(CollectorLive))

const canaries = [
  { amount: "4817.290563", units: 4_817_290_563n, memo: "metrics-canary-memo-QW8Z" },
  { amount: "73.000419", units: 73_000_419n, memo: "canary ütf memo 🦉 trace" }
]
const refusedCanary = { amount: "99999.271828", units: 99_999_271_828n, memo: "canary-refused-otlp" }

/** Every way an amount or memo could be written down. */
const needlesOf = (canary: { readonly amount: string; readonly units: bigint; readonly memo: string }) => [
  canary.amount,
  canary.units.toString(),
  canary.units.toString(16),
  canary.memo,
  encodeURIComponent(canary.memo)
]

/** A span as OTLP/JSON writes it, with what this test reads. */
const SpanJson = Schema.Struct({
  name: Schema.String,
  attributes: Schema.optionalKey(Schema.Array(Schema.Struct({ key: Schema.String, value: Schema.Unknown })))
})
const TracesJson = Schema.Struct({
  resourceSpans: Schema.Array(Schema.Struct({ scopeSpans: Schema.Array(Schema.Struct({ spans: Schema.Array(SpanJson) })) }))
})

describe("observability", () => {
  layer(ServerWithExport, { timeout: "180 seconds", excludeTestServices: true })("metrics and OTLP export", (it) => {
    it.effect("a scrape after transfers shows them counted; neither it nor the exported traces and metrics hold an amount, memo, key or secret", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const collector = yield* Collector
        const metricsUrl = `${server.adminUrl}/metrics`

        // The admin listener's rule: the admin token or nothing.
        const anonymous = yield* send(metricsUrl)
        assert.strictEqual(anonymous.status, 401, anonymous.text)
        assert.strictEqual((anonymous.json as { error: { code: string } }).error.code, "unauthorized")
        const withApiKeyLike = yield* send(metricsUrl, { headers: bearer("adm_wrong_token_0123456789abcdef0123") })
        assert.strictEqual(withApiKeyLike.status, 401)

        const sender = yield* createAccount(server, "metrics.sender")
        const recipient = yield* createAccount(server, "metrics.recipient")
        const senderKey = yield* registerKey(server.baseUrl, sender.api_key)
        yield* registerKey(server.baseUrl, recipient.api_key)
        const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(sender.api_key), { amount: "9000" }))
        assert.strictEqual(grant.status, 200, grant.text)
        const transferIds: Array<string> = []
        for (const [i, canary] of canaries.entries()) {
          const created = yield* send(`${server.baseUrl}/v1/transfers`, {
            ...postJson(bearer(sender.api_key), { to: "@metrics.recipient", amount: canary.amount, memo: canary.memo }),
            headers: { ...bearer(sender.api_key), "content-type": "application/json", "idempotency-key": `metrics-canary-${i}` }
          })
          assert.strictEqual(created.status, 201, created.text)
          const transfer = Schema.decodeUnknownSync(TransferRecord)(created.json)
          assert.strictEqual(transfer.status, "confirmed")
          transferIds.push(transfer.transfer_id)
        }
        const refused = yield* send(
          `${server.baseUrl}/v1/transfers`,
          postJson(bearer(sender.api_key), { to: "@metrics.recipient", amount: refusedCanary.amount, memo: refusedCanary.memo })
        )
        assert.strictEqual(refused.status, 402, refused.text)
        const read = yield* send(`${server.baseUrl}/v1/transfers/${transferIds[0]}`, { headers: bearer(sender.api_key) })
        assert.strictEqual(read.status, 200, read.text)
        // D20: the decryption proof travels in the query string; the balance it proves comes back.
        const proof = yield* balanceProof(server.baseUrl, sender.api_key, senderKey)
        const proven = yield* send(`${server.baseUrl}/v1/accounts/me/balances?decryption_proof=${encodeURIComponent(proof)}`, { headers: bearer(sender.api_key) })
        assert.strictEqual(proven.status, 200, proven.text)
        const provenByHeader = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, { headers: { ...bearer(sender.api_key), "x-decryption-proof": proof } })
        assert.strictEqual(provenByHeader.status, 200, provenByHeader.text)
        const provenAmount = (proven.json as { balances: ReadonlyArray<{ asset: string; amount?: string }> }).balances.find((b) => b.asset === "USDG")?.amount
        assert.isString(provenAmount)

        const scrape = yield* send(metricsUrl, { headers: bearer(server.adminToken) })
        assert.strictEqual(scrape.status, 200, scrape.text)
        assert.match(scrape.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/)
        const samples = parseExposition(scrape.text)
        const created = sampleOf(samples, "pps_http_requests_total", { method: "POST", route: "/v1/transfers", status: "201" })
        assert.strictEqual(created.length, 1, "one series for POST /v1/transfers 201")
        assert.isAtLeast(created[0]!.value, 2)
        assert.isAtLeast(sampleOf(samples, "pps_http_requests_total", { method: "POST", route: "/v1/transfers", status: "402" })[0]?.value ?? 0, 1)
        // The route's template, never the path with its ids.
        assert.strictEqual(sampleOf(samples, "pps_http_requests_total", { method: "GET", route: "/v1/transfers/:transfer_id", status: "200" })[0]?.value, 1)
        for (const id of transferIds) assert.notInclude(scrape.text, id, "an id in a label")
        assert.isAtLeast(sampleOf(samples, "pps_http_request_duration_seconds_count", { method: "POST", route: "/v1/transfers", status: "201" })[0]?.value ?? 0, 2)
        assert.isAtLeast(sampleOf(samples, "pps_transfers_total", { stage: "confirmed", mode: "test" })[0]?.value ?? 0, 2)
        assert.isAtLeast(sampleOf(samples, "pps_transfers_total", { stage: "authorized", mode: "test" })[0]?.value ?? 0, 2)
        assert.isAtLeast(sampleOf(samples, "pps_transfers_total", { stage: "submitted", mode: "test" })[0]?.value ?? 0, 2)
        assert.isAtLeast(sampleOf(samples, "pps_transfers_total", { stage: "refused", mode: "test" })[0]?.value ?? 0, 1)
        assert.isAtLeast(sampleOf(samples, "pps_guardian_call_duration_seconds_count", { operation: "authorizeMany", outcome: "ok" })[0]?.value ?? 0, 3)
        const balances = sampleOf(samples, "pps_relayer_balance_wei", { mode: "test" })
        assert.strictEqual(balances.length, 4, "one balance per relayer (RELAYER_COUNT 4 in tests)")
        for (const balance of balances) assert.isAbove(balance.value, 0)
        assert.strictEqual(sampleOf(samples, "pps_scrape_source_up", { source: "database" })[0]?.value, 1)
        assert.strictEqual(sampleOf(samples, "pps_scrape_source_up", { source: "chain_test" })[0]?.value, 1)
        assert.strictEqual(sampleOf(samples, "pps_nodes_alive", {})[0]?.value, 1)
        assert.strictEqual(sampleOf(samples, "pps_settlement_backlog", { mode: "test", status: "sent" }).length, 1)
        assert.strictEqual(sampleOf(samples, "pps_webhook_backlog", {})[0]?.value, 0)
        assert.strictEqual(sampleOf(samples, "pps_build_info", { role: "all", database: "pglite" })[0]?.value, 1)

        // The dashboard and the alerts read metrics the server has: every name they use is in the scrape.
        const families = new Set(samples.map((sample) => sample.name.replace(/_(bucket|count|sum)$/, "")))
        for (const file of ["grafana-dashboard.json", "prometheus-alerts.yml"]) {
          const text = fs.readFileSync(new URL(`../../../deploy/${file}`, import.meta.url), "utf8")
          const used = new Set([...text.matchAll(/\bpps_[a-z_]+/g)].map((match) => match[0].replace(/_(bucket|count|sum)$/, "")))
          assert.isAbove(used.size, 5, `${file} reads the service's metrics`)
          for (const name of used) assert.isTrue(families.has(name), `${file} reads ${name}, which the server does not serve`)
        }

        // Everything the server exported so far, now.
        const flusher = Context.getOption(server.services as Context.Context<unknown>, OtlpExporter.Flusher)
        assert.isTrue(Option.isSome(flusher), "the OTLP export is configured")
        if (Option.isSome(flusher)) yield* flusher.value.flush
        const traces = collector.received.filter((entry) => entry.path === "/v1/traces")
        const metrics = collector.received.filter((entry) => entry.path === "/v1/metrics")
        assert.isAbove(traces.length, 0, "traces exported")
        assert.isAbove(metrics.length, 0, "metrics exported")
        for (const entry of collector.received) {
          assert.match(entry.contentType, /^application\/json/)
          assert.strictEqual(entry.headers["x-collector-token"], collectorToken, "OTEL_EXPORTER_OTLP_HEADERS reach the collector")
        }
        const spans = traces.flatMap((entry) =>
          Schema.decodeUnknownSync(TracesJson)(JSON.parse(entry.body.toString("utf8"))).resourceSpans.flatMap((resource) =>
            resource.scopeSpans.flatMap((scope) => scope.spans)
          )
        )
        const names = new Set(spans.map((span) => span.name))
        assert.isTrue(names.has("POST /v1/transfers"), `a server span named by its route; got ${[...names].slice(0, 40).join(", ")}`)
        assert.isTrue(names.has("GET /v1/transfers/:transfer_id"))
        assert.isTrue(names.has("Transfers.create"))
        assert.isTrue(metrics.some((entry) => entry.body.toString("utf8").includes("pps_transfers_total")))
        const balanceSpan = spans.find((span) => span.name === "GET /v1/accounts/me/balances")
        assert.isDefined(balanceSpan, "the balance read was traced")
        assert.include(JSON.stringify(balanceSpan), "decryption_proof=", "its query string is there, its value redacted")

        const exported = collector.received.map((entry) => entry.body.toString("utf8")).join("\n")
        const secrets = [sender.api_key, recipient.api_key, server.adminToken, collectorToken, proof, encodeURIComponent(proof), `metrics-canary-0`]
        const haystacks = { scrape: scrape.text, exported }
        for (const [where, haystack] of Object.entries(haystacks)) {
          for (const needle of [...canaries, refusedCanary].flatMap(needlesOf)) assert.notInclude(haystack, needle, `${needle} in the ${where}`)
          for (const secret of secrets) assert.notInclude(haystack, secret, `a key or secret in the ${where}`)
          assert.notInclude(haystack, provenAmount!, `the proven balance in the ${where}`)
        }
      }))
  })

  // The distributed mode's database: the gauges' statements run on PostgreSQL as on PGlite.
  describe.skipIf(!postgresAvailable)("on PostgreSQL", () => {
    layer(makeTestServer({ database: postgres }), { timeout: "180 seconds", excludeTestServices: true })("scrape", (it) => {
      it.effect("a scrape after a transfer shows it counted and every source answering", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const { recipientHandle, sender } = yield* fundedPair(server, "10")
          const created = yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(sender.api_key), { to: `@${recipientHandle}`, amount: "1.5" }))
          assert.strictEqual(created.status, 201, created.text)
          const scrape = yield* send(`${server.adminUrl}/metrics`, { headers: bearer(server.adminToken) })
          assert.strictEqual(scrape.status, 200, scrape.text)
          const samples = parseExposition(scrape.text)
          assert.strictEqual(sampleOf(samples, "pps_http_requests_total", { method: "POST", route: "/v1/transfers", status: "201" })[0]?.value, 1)
          assert.isAtLeast(sampleOf(samples, "pps_transfers_total", { stage: "created", mode: "test" })[0]?.value ?? 0, 1)
          assert.strictEqual(sampleOf(samples, "pps_scrape_source_up", { source: "database" })[0]?.value, 1, scrape.text)
          assert.strictEqual(sampleOf(samples, "pps_nodes_alive", {})[0]?.value, 1)
          assert.strictEqual(sampleOf(samples, "pps_build_info", { database: "postgres" })[0]?.value, 1)
          assert.strictEqual(sampleOf(samples, "pps_event_outbox_backlog", {}).length, 1)
          assert.strictEqual(sampleOf(samples, "pps_held_transactions", { mode: "test" })[0]?.value, 0)
        }))
    })
  })

  describe("OTEL_EXPORTER_OTLP_HEADERS", () => {
    layer(Layer.empty)((it) => {
      it.effect("key=value pairs, values percent-decoded, names lower-cased, malformed entries skipped", () =>
        Effect.sync(() => {
          assert.deepStrictEqual(parseHeaders("Authorization=Bearer%20abc, x-tenant = t1,broken,=nokey"), {
            authorization: "Bearer abc",
            "x-tenant": "t1"
          })
        }))
    })
  })
})
