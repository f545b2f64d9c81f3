/**
 * The HTTP edge, over raw sockets to a real server on loopback (PGlite, anvil, the guardian):
 *
 * - a client that half-closes its socket (`socket.end()`, a TCP FIN) once it has written a
 *   complete request still gets the whole answer: a transfer it sent that way is answered
 *   201 on that socket, and exactly one transfer exists for its key;
 * - two `Authorization` or two `Content-Type` headers are refused with 400 `invalid_request`
 *   in D1's envelope (Node's parser would keep the first Authorization and join the
 *   Content-Types, so the application alone could not tell), before anything runs: no
 *   transfer is made.
 */
import * as net from "node:net"
import { assert, describe, layer } from "@effect/vitest"
import { TransferRecord } from "@pps/api/Transfers"
import { Effect, Schema } from "effect"
import { ulid } from "../src/platform/Ids.ts"
import { fundedPair } from "./support/confidentialClient.ts"
import { bearer, send } from "./support/http.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"

const Envelope = Schema.Struct({
  error: Schema.Struct({ code: Schema.String, message: Schema.String, request_id: Schema.String })
})

interface RawAnswer {
  readonly status: number
  readonly head: string
  readonly body: string
}

/**
 * Writes `head` and `body` on a fresh socket, then half-closes it when `halfClose` says so;
 * resolves with what the server sent before it closed its side.
 */
const rawRequest = (baseUrl: string, head: ReadonlyArray<string>, body: string, halfClose: boolean) =>
  Effect.promise(() =>
    new Promise<RawAnswer>((resolve, reject) => {
      const url = new URL(baseUrl)
      // allowHalfOpen: our side keeps reading after its own FIN, as a half-closing client does.
      const socket = net.connect({ host: url.hostname, port: Number(url.port), allowHalfOpen: true })
      const chunks: Array<Buffer> = []
      socket.on("data", (chunk: Buffer) => chunks.push(chunk))
      socket.on("end", () => socket.destroy())
      socket.on("close", () => {
        const raw = Buffer.concat(chunks).toString("utf8")
        const [headText = "", ...rest] = raw.split("\r\n\r\n")
        const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(headText)?.[1] ?? "0")
        resolve({ status, head: headText, body: rest.join("\r\n\r\n") })
      })
      socket.on("error", reject)
      socket.setTimeout(60_000, () => socket.destroy(new Error("no answer within 60 s")))
      const lines = [...head, `Content-Length: ${Buffer.byteLength(body)}`, "Connection: close"]
      socket.write(`${lines.join("\r\n")}\r\n\r\n${body}`)
      if (halfClose) socket.end()
    })
  )

/** The body of a chunked or plain answer (the server answers JSON with Content-Length). */
const jsonOf = (answer: RawAnswer): unknown => JSON.parse(answer.body)

describe("the HTTP edge", () => {
  layer(makeTestServer(), { timeout: "180 seconds", excludeTestServices: true })("over raw sockets", (it) => {
    it.effect("a client that half-closes after a complete request still gets its answer, and one transfer is made", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const { recipientHandle, sender } = yield* fundedPair(server, "10")
        const key = `half-close-${ulid()}`
        const host = new URL(server.baseUrl).host
        const answer = yield* rawRequest(server.baseUrl, [
          "POST /v1/transfers HTTP/1.1",
          `Host: ${host}`,
          `Authorization: Bearer ${sender.api_key}`,
          "Content-Type: application/json",
          `Idempotency-Key: ${key}`
        ], JSON.stringify({ to: `@${recipientHandle}`, amount: "1.5" }), true)
        assert.strictEqual(answer.status, 201, `${answer.head}\n${answer.body}`)
        const transferId = Schema.decodeUnknownSync(TransferRecord)(jsonOf(answer)).transfer_id
        // A GET answered the same way, without a body.
        const me = yield* rawRequest(server.baseUrl, ["GET /v1/accounts/me HTTP/1.1", `Host: ${host}`, `Authorization: Bearer ${sender.api_key}`], "", true)
        assert.strictEqual(me.status, 200, me.head)
        // The key names that one transfer, and the sender has no other.
        const listing = yield* send(`${server.baseUrl}/v1/transfers?limit=100`, { headers: bearer(sender.api_key) })
        const page = Schema.decodeUnknownSync(Schema.Struct({ data: Schema.Array(TransferRecord) }))(listing.json)
        assert.deepStrictEqual(page.data.map((record) => record.transfer_id), [transferId])
        assert.notInclude(server.logs.join("\n"), "service_unavailable", "no request was cut off")
      }))

    it.effect("two Authorization or two Content-Type headers: 400 invalid_request in D1's envelope, nothing done", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const { recipientHandle, sender, recipient } = yield* fundedPair(server, "10")
        const host = new URL(server.baseUrl).host
        const body = JSON.stringify({ to: `@${recipientHandle}`, amount: "1" })
        const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
          ["authorization", [`Authorization: Bearer ${sender.api_key}`, `Authorization: Bearer ${recipient.api_key}`, "Content-Type: application/json"]],
          ["authorization (same value twice)", [`Authorization: Bearer ${sender.api_key}`, `authorization: Bearer ${sender.api_key}`, "Content-Type: application/json"]],
          ["content-type", [`Authorization: Bearer ${sender.api_key}`, "Content-Type: application/json", "Content-Type: text/plain"]],
          ["content-type (same value twice)", [`Authorization: Bearer ${sender.api_key}`, "Content-Type: application/json", "CONTENT-TYPE: application/json"]]
        ]
        for (const [name, headers] of cases) {
          const answer = yield* rawRequest(server.baseUrl, ["POST /v1/transfers HTTP/1.1", `Host: ${host}`, ...headers, `Idempotency-Key: dup-${ulid()}`], body, false)
          assert.strictEqual(answer.status, 400, `${name}: ${answer.head}\n${answer.body}`)
          const envelope = Schema.decodeUnknownSync(Envelope)(jsonOf(answer))
          assert.strictEqual(envelope.error.code, "invalid_request", name)
          assert.include(envelope.error.message, name.split(" ")[0] === "authorization" ? "Authorization" : "Content-Type", name)
          assert.match(answer.head, new RegExp(`^x-request-id: ${envelope.error.request_id}$`, "im"), name)
        }
        // The admin listener shares the edge.
        const admin = yield* rawRequest(server.adminUrl, [
          "GET /admin/accounts/acc_00000000000000000000000000 HTTP/1.1",
          `Host: ${new URL(server.adminUrl).host}`,
          `Authorization: Bearer ${server.adminToken}`,
          `Authorization: Bearer ${server.adminToken}`
        ], "", false)
        assert.strictEqual(admin.status, 400, admin.head)
        // A single header of each is served as before; nothing was sent by the refused ones.
        const listing = yield* send(`${server.baseUrl}/v1/transfers?limit=100`, { headers: bearer(sender.api_key) })
        assert.strictEqual(listing.status, 200, listing.text)
        assert.deepStrictEqual((listing.json as { data: ReadonlyArray<unknown> }).data, [])
      }))
  })
})
