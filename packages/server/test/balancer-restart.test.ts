/**
 * Failure modes (docs/operations.md), "the balancer dies": HAProxy (scripts/cluster/haproxy.ts)
 * in front of a real server node, SIGKILLed while a transfer request goes through it, then
 * started again on the same port. It keeps no state: the new process serves once its health
 * check has seen the node ready, and the cut-off request sent again with its Idempotency-Key
 * through the new balancer names one transfer (the first attempt's, when it reached the node),
 * replayed when sent once more.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as tls from "node:tls"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { TransferRecord } from "@pps/api/Transfers"
import { Context, Effect, Fiber, Layer, Schema } from "effect"
import { ensureCertificate } from "../scripts/cluster/cluster.ts"
import { freePort } from "../scripts/cluster/processGroups.ts"
import { ulid } from "../src/platform/Ids.ts"
import { fundedPair } from "./support/confidentialClient.ts"
import { haproxyAvailable, startBalancer, type TestBalancer } from "./support/haproxy.ts"
import { bearer, postJson, send } from "./support/http.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"
import { eventually } from "./support/webhooks-receiver.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-balancer-restart-"))
const certificate = ensureCertificate(path.join(dir, "tls"))
// The balancer's certificate is self-signed: trust it, in this test process only.
tls.setDefaultCACertificates([...tls.getCACertificates("default"), fs.readFileSync(certificate.cert, "utf8")])

const balancers: Array<TestBalancer> = []
afterAll(async () => {
  for (const balancer of balancers) await balancer.kill()
  fs.rmSync(dir, { recursive: true, force: true })
})

/** HAProxy on `port` in front of the node at `upstream`; resolves once it has seen the node ready. */
const startBalancerProcess = (port: number, upstream: string) =>
  Effect.promise(async () => {
    const balancer = await startBalancer({ dir, pemFile: certificate.pem, port, upstreams: [{ name: "api-1", host: "127.0.0.1", port: Number(new URL(upstream).port) }] })
    balancers.push(balancer)
    return balancer
  })

describe.skipIf(!haproxyAvailable)("the balancer dies and is started again", () => {
  it.live("SIGKILL mid-request, a new process on the same port: served at once, the retry names one transfer", () =>
    Effect.scoped(Effect.gen(function*() {
      const server = yield* Layer.build(makeTestServer()).pipe(Effect.map((context) => Context.get(context, TestServer)))
      const port = yield* Effect.promise(freePort)
      const baseUrl = `https://localhost:${port}`
      const first = yield* startBalancerProcess(port, server.baseUrl)

      const { recipientHandle, sender: alice } = yield* fundedPair(server, "100")
      const key = `balancer-${ulid()}`
      const transfer = (idempotencyKey: string, amount: string) =>
        send(`${baseUrl}/v1/transfers`, postJson({ ...bearer(alice.api_key), "idempotency-key": idempotencyKey }, { to: `@${recipientHandle}`, amount }))
          .pipe(Effect.exit)

      const through = yield* transfer(`warm-${ulid()}`, "1")
      assert.isTrue(through._tag === "Success" && through.value.status === 201, "served through the first balancer")

      // Killed while the request is on its way: the client is left without an answer.
      const inFlight = yield* Effect.forkChild(transfer(key, "2.5"))
      yield* Effect.sleep(30)
      yield* Effect.promise(() => first.kill())
      const cutOff = yield* Fiber.join(inFlight)
      const down = yield* transfer(`down-${ulid()}`, "1")
      assert.strictEqual(down._tag, "Failure", "nothing answers while the balancer is down")

      // A new process on the same port, with nothing carried over: it serves once it has seen the node ready.
      yield* startBalancerProcess(port, server.baseUrl)
      const retried = yield* eventually(
        transfer(key, "2.5").pipe(Effect.map((exit) => (exit._tag === "Success" && exit.value.status === 201 ? exit.value : undefined))),
        "the retry through the new balancer",
        { timeoutMs: 30_000 }
      )
      assert.strictEqual(retried.headers.get("x-served-by"), "api-1")
      const transferId = Schema.decodeUnknownSync(TransferRecord)(retried.json).transfer_id
      if (cutOff._tag === "Success" && cutOff.value.status === 201) {
        assert.strictEqual(Schema.decodeUnknownSync(TransferRecord)(cutOff.value.json).transfer_id, transferId)
      }
      const again = yield* transfer(key, "2.5")
      assert.isTrue(again._tag === "Success", "answered")
      if (again._tag === "Success") {
        assert.strictEqual(again.value.status, 201, again.value.text)
        assert.strictEqual(again.value.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(Schema.decodeUnknownSync(TransferRecord)(again.value.json).transfer_id, transferId)
      }

      // The node holds two transfers from Alice: the warm-up and the one the key names.
      const listing = yield* send(`${server.baseUrl}/v1/transfers?limit=100`, { headers: bearer(alice.api_key) })
      const page = Schema.decodeUnknownSync(Schema.Struct({ data: Schema.Array(TransferRecord) }))(listing.json)
      assert.strictEqual(page.data.length, 2, listing.text)
      assert.include(page.data.map((record) => record.transfer_id), transferId)
    })), { timeout: 240_000 })
})
