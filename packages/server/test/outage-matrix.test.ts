/**
 * Every endpoint through each dependency's outage: never a 500.
 *
 * An outage of a dependency a request needs (the database, the guardian, the chain) is an
 * operating error, not a fault: the client is told 503 `service_unavailable` with Retry-After in
 * D1's envelope, or, where the request does not need what is down, its ordinary answer. This
 * test sends one well-formed request per operation of the served OpenAPI document (every
 * operation must have one here, so a new endpoint cannot escape it) first with everything up,
 * then with each dependency down in turn, for real:
 * - the database: the server's PostgreSQL link goes through a loopback proxy the test cuts
 *   (open connections destroyed, new ones refused);
 * - the guardian: the embedded guardian child process is frozen with SIGSTOP (a guardian that
 *   accepts connections and never answers, the hardest case: a refused connection fails fast);
 * - the chain: the anvil child process is frozen with SIGSTOP.
 * Each answer must come within a bound, be below 500 or exactly 503 with Retry-After, and carry
 * D1's envelope when it is an error. After each outage the dependency comes back and the server
 * is ready again before the next.
 */
import { execFileSync } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import { makeId, ulid } from "../src/platform/Ids.ts"
import { balanceProof, fundedPair } from "./support/confidentialClient.ts"
import { cuttableProxy, throughProxy } from "./support/cuttableProxy.ts"
import { bearer, createAccount, expectEnvelope, postJson, readResponse, send, type TestResponse } from "./support/http.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { freshPostgresDatabase, makeTestServer, postgres, TestServer } from "./support/TestServer.ts"
import { eventually } from "./support/webhooks-receiver.ts"

/**
 * How long one request may take during an outage before the test calls it hung. A request that
 * waits on a frozen dependency must still be answered: the transfer create timeout (5 s in tests),
 * the guardian client's call timeout and the chain client's request timeout all sit below this.
 */
const answerWithinMs = 45_000

/** The ids and keys the samples need, made while everything is up. */
interface Fixture {
  readonly ownerKey: string
  readonly agentId: string
  readonly recipientHandle: string
  readonly transferId: string
  /** A confidential transfer the owner received: what its refund sample refunds a cent of (D43). */
  readonly receivedId: string
  readonly webhookId: string
  readonly heldId: string
  readonly balanceProof: string
}

interface Sample {
  readonly method: string
  readonly path: string
  readonly body?: unknown
}

/**
 * One well-formed request per operation (`METHOD /openapi/path`). Ids that must not exist for
 * the request to stay harmless (a delete, an approval) are well-formed unknown ids: the server
 * must look them up, in the database, to answer 404.
 */
const samples = (fixture: Fixture): Record<string, Sample> => {
  const unknownWebhook = makeId("wh", Date.now())
  const unknownHeld = makeId("atx", Date.now())
  return {
    "get /v1/accounts/me": { method: "GET", path: "/v1/accounts/me" },
    "get /v1/accounts/me/encryption-key": { method: "GET", path: "/v1/accounts/me/encryption-key" },
    "put /v1/accounts/me/encryption-key": {
      method: "PUT",
      path: "/v1/accounts/me/encryption-key",
      body: { public_key: `0x${"ab".repeat(64)}`, proofs: { USDG: `0x${"cd".repeat(96)}`, ETH: `0x${"ef".repeat(96)}` } }
    },
    "post /v1/accounts/me/encryption-key/rotate": {
      method: "POST",
      path: "/v1/accounts/me/encryption-key/rotate",
      body: { public_key: `0x${"ab".repeat(64)}`, proofs: { USDG: `0x${"cd".repeat(96)}`, ETH: `0x${"ef".repeat(96)}` } }
    },
    "get /v1/accounts/me/balances": { method: "GET", path: `/v1/accounts/me/balances?proof=${encodeURIComponent(fixture.balanceProof)}` },
    "get /v1/accounts/me/api-keys": { method: "GET", path: "/v1/accounts/me/api-keys" },
    "get /v1/accounts/me/balances/sealed": { method: "GET", path: "/v1/accounts/me/balances/sealed" },
    "post /v1/webhooks": { method: "POST", path: "/v1/webhooks", body: { url: "https://127.0.0.1:9/hook", events: ["transfer.confirmed"] } },
    "get /v1/webhooks": { method: "GET", path: "/v1/webhooks" },
    "get /v1/webhooks/{webhook_id}": { method: "GET", path: `/v1/webhooks/${fixture.webhookId}` },
    "patch /v1/webhooks/{webhook_id}": { method: "PATCH", path: `/v1/webhooks/${fixture.webhookId}`, body: { enabled: true } },
    "delete /v1/webhooks/{webhook_id}": { method: "DELETE", path: `/v1/webhooks/${unknownWebhook}` },
    "post /v1/webhooks/{webhook_id}/rotate-secret": { method: "POST", path: `/v1/webhooks/${fixture.webhookId}/rotate-secret` },
    "get /v1/webhooks/{webhook_id}/deliveries": { method: "GET", path: `/v1/webhooks/${fixture.webhookId}/deliveries` },
    "post /v1/webhooks/{webhook_id}/replay/{event_id}": {
      method: "POST",
      path: `/v1/webhooks/${fixture.webhookId}/replay/${makeId("evt", Date.now())}`
    },
    "post /v1/transfers": { method: "POST", path: "/v1/transfers", body: { to: `@${fixture.recipientHandle}`, amount: "0.25" } },
    "post /v1/transfers/prepare": { method: "POST", path: "/v1/transfers/prepare", body: { to: `@${fixture.recipientHandle}` } },
    "get /v1/transfers": { method: "GET", path: "/v1/transfers" },
    "get /v1/transfers/{transfer_id}": { method: "GET", path: `/v1/transfers/${fixture.transferId}` },
    "get /v1/transfers/{transfer_id}/sealed": { method: "GET", path: `/v1/transfers/${fixture.transferId}/sealed` },
    "post /v1/transfers/{transfer_id}/refund": {
      method: "POST",
      path: `/v1/transfers/${fixture.receivedId}/refund`,
      body: { amount: "0.01" }
    },
    "post /v1/accounts/me/agents": {
      method: "POST",
      path: "/v1/accounts/me/agents",
      body: { name: `bot-${ulid().toLowerCase().slice(-6)}`, spend_policy: { daily_limit_usdg: 5, per_transaction_limit_usdg: 5 } }
    },
    "get /v1/accounts/me/agents": { method: "GET", path: "/v1/accounts/me/agents" },
    "get /v1/agents/{account_id}/spend-policy": { method: "GET", path: `/v1/agents/${fixture.agentId}/spend-policy` },
    "patch /v1/agents/{account_id}/spend-policy": {
      method: "PATCH",
      path: `/v1/agents/${fixture.agentId}/spend-policy`,
      body: { daily_limit_usdg: 12 }
    },
    "post /v1/agents/{account_id}/keys": { method: "POST", path: `/v1/agents/${fixture.agentId}/keys`, body: { name: "outage-key" } },
    "get /v1/agents/{account_id}/keys": { method: "GET", path: `/v1/agents/${fixture.agentId}/keys` },
    "post /v1/agents/{account_id}/keys/{key_id}/revoke": {
      method: "POST",
      path: `/v1/agents/${fixture.agentId}/keys/${makeId("key", Date.now())}/revoke`
    },
    "post /v1/agents/{account_id}/keys/{key_id}/rotate": {
      method: "POST",
      path: `/v1/agents/${fixture.agentId}/keys/${makeId("key", Date.now())}/rotate`,
      body: {}
    },
    "get /v1/agents": { method: "GET", path: "/v1/agents" },
    "get /v1/agents/transactions/pending": { method: "GET", path: "/v1/agents/transactions/pending" },
    "get /v1/agents/transactions/{transaction_id}": { method: "GET", path: `/v1/agents/transactions/${fixture.heldId}` },
    "get /v1/agents/transactions/{transaction_id}/sealed": {
      method: "GET",
      path: `/v1/agents/transactions/${fixture.heldId}/sealed`
    },
    "post /v1/agents/transactions/{transaction_id}/approve": {
      method: "POST",
      path: `/v1/agents/transactions/${unknownHeld}/approve`
    },
    "post /v1/agents/transactions/{transaction_id}/reject": {
      method: "POST",
      path: `/v1/agents/transactions/${unknownHeld}/reject`
    },
    "post /v1/test/faucet": { method: "POST", path: "/v1/test/faucet", body: { amount: "1" } },
    "get /v1/test/faucet/grants": { method: "GET", path: "/v1/test/faucet/grants" },
    "get /v1/events/stream": { method: "GET", path: "/v1/events/stream" },
    "get /v1/events": { method: "GET", path: "/v1/events" },
    "get /v1/events/{event_id}": { method: "GET", path: `/v1/events/${makeId("evt", Date.now())}` }
  }
}

/** Sends a sample as the owner; a stream is answered once its headers arrive. */
const sendSample = (baseUrl: string, key: string, sample: Sample) =>
  Effect.promise(async (): Promise<TestResponse> => {
    const controller = new AbortController()
    const response = await fetch(`${baseUrl}${sample.path}`, {
      method: sample.method,
      signal: controller.signal,
      headers: {
        ...bearer(key),
        ...(sample.method === "POST" ? { "idempotency-key": `outage-${ulid()}` } : {}),
        ...(sample.body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(sample.body === undefined ? {} : { body: JSON.stringify(sample.body) })
    })
    if ((response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      controller.abort()
      return { status: response.status, headers: response.headers, text: "", json: undefined }
    }
    return readResponse(response)
  }).pipe(
    Effect.timeoutOrElse({
      duration: Duration.millis(answerWithinMs),
      orElse: () => Effect.die(new Error(`${sample.method} ${sample.path}: no answer within ${answerWithinMs} ms`))
    })
  )

/** What an answer during an outage may be: below 500, or 503 with Retry-After, errors enveloped. */
const expectOutageAnswer = (response: TestResponse, what: string) => {
  assert.isTrue(response.status < 500 || response.status === 503, `${what}: ${response.status} ${response.text}`)
  if (response.status === 503) {
    expectEnvelope(response, 503, "service_unavailable")
    assert.match(response.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/, `${what}: Retry-After`)
  } else if (response.status >= 400) {
    const code = (response.json as { error?: { code?: string } } | undefined)?.error?.code ?? ""
    expectEnvelope(response, response.status, code)
  }
}

/** The pid of this process's child whose command line matches (the guardian, anvil). */
const childPid = (pattern: RegExp): number => {
  const lines = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(process.pid)], { encoding: "utf8" }).split("\n")
  const line = lines.find((candidate) => pattern.test(candidate))
  if (line === undefined) throw new Error(`no child process matches ${pattern}: ${lines.join(" | ")}`)
  return Number(line.trim().split(/\s+/)[0])
}

const OpenApiPaths = Schema.Struct({ paths: Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Unknown)) })
const Created = Schema.Record(Schema.String, Schema.Unknown)
/** The id a creation answered, by its field. */
const idOf = (response: TestResponse, field: string): string => {
  const value = Schema.decodeUnknownSync(Created)(response.json)[field]
  if (typeof value !== "string") throw new Error(`no ${field} in ${response.text}`)
  return value
}

describe.skipIf(!postgresAvailable)("every endpoint through each dependency's outage", () => {
  it.live("database, guardian and chain down in turn: every answer below 500 or 503 with Retry-After", () =>
    Effect.scoped(Effect.gen(function*() {
      const databaseUrl = yield* freshPostgresDatabase
      const proxy = yield* cuttableProxy(databaseUrl, 5432)
      const server = yield* Layer.build(makeTestServer({
        database: postgres,
        config: {
          databaseUrl: Option.some(Redacted.make(throughProxy(databaseUrl, proxy))),
          // The guardian as a child process, as deployed: it can be frozen.
          guardianInProcess: false,
          guardianStartTimeoutMs: 180_000
        }
      })).pipe(Effect.map((context) => Context.get(context, TestServer)))
      const readiness = send(`${server.baseUrl}/readyz`).pipe(Effect.map((response) => response.status))
      const ready = eventually(readiness.pipe(Effect.map((status) => (status === 200 ? true : undefined))), "readyz 200", {
        timeoutMs: 60_000
      })

      // Everything up: the ids the samples name.
      const pair = yield* fundedPair(server, "50")
      const owner = pair.sender
      const as = bearer(owner.api_key)
      const created = yield* send(
        `${server.baseUrl}/v1/transfers`,
        postJson({ ...as, "idempotency-key": `fixture-${ulid()}` }, { to: `@${pair.recipientHandle}`, amount: "1" })
      )
      assert.strictEqual(created.status, 201, created.text)
      // A transfer the owner received, to refund a cent of in each round (D43).
      const recipientGrant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(pair.recipient.api_key), { amount: "5" }))
      assert.strictEqual(recipientGrant.status, 200, recipientGrant.text)
      const received = yield* send(
        `${server.baseUrl}/v1/transfers`,
        postJson({ ...bearer(pair.recipient.api_key), "idempotency-key": `fixture-${ulid()}` }, { to: `@${owner.handle.replace(/^@/, "")}`, amount: "2" })
      )
      assert.strictEqual(received.status, 201, received.text)
      const webhook = yield* send(`${server.baseUrl}/v1/webhooks`, postJson(as, { url: "https://127.0.0.1:9/hook", events: ["transfer.confirmed"] }))
      assert.strictEqual(webhook.status, 201, webhook.text)
      const agent = yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(as, {
        name: "outage",
        spend_policy: { daily_limit_usdg: 10, per_transaction_limit_usdg: 10, hitl_threshold_usdg: 1 }
      }))
      assert.strictEqual(agent.status, 201, agent.text)
      const agentId = idOf(agent, "account_id")
      const agentKey = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), { account_id: agentId, name: "a" }))
      const asAgent = bearer(idOf(agentKey, "api_key"))
      const agentGrant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(asAgent, { amount: "5" }))
      assert.strictEqual(agentGrant.status, 200, agentGrant.text)
      const held = yield* send(
        `${server.baseUrl}/v1/transfers`,
        postJson({ ...asAgent, "idempotency-key": `held-${ulid()}` }, {
          to: `@${pair.recipientHandle}`,
          amount: "2"
        })
      )
      assert.strictEqual(held.status, 202, held.text)
      const fixture: Fixture = {
        ownerKey: owner.api_key,
        agentId,
        recipientHandle: pair.recipientHandle,
        transferId: idOf(created, "transfer_id"),
        receivedId: idOf(received, "transfer_id"),
        webhookId: idOf(webhook, "webhook_id"),
        heldId: idOf(held, "transaction_id"),
        balanceProof: yield* balanceProof(server.baseUrl, owner.api_key, pair.senderKey)
      }
      // An account no request has authenticated yet: its key is not in any cache when a
      // dependency goes down, so authentication itself meets the outage.
      const uncached = yield* createAccount(server, `cold-${ulid().toLowerCase().slice(-8)}`)

      // Every operation of the served document has a sample, and each sample is well-formed:
      // with everything up it is answered below 500 (a 400 would mean the sample tests nothing).
      const document = Schema.decodeUnknownSync(OpenApiPaths)((yield* send(`${server.baseUrl}/v1/openapi.json`)).json)
      const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
        Object.keys(methods).filter((method) => ["get", "post", "put", "patch", "delete"].includes(method)).map((method) => `${method} ${path}`)
      )
      const table = samples(fixture)
      assert.deepStrictEqual(operations.filter((operation) => table[operation] === undefined), [], "operations without a sample")
      for (const [operation, sample] of Object.entries(table)) {
        const answer = yield* sendSample(server.baseUrl, fixture.ownerKey, sample)
        assert.isTrue(answer.status < 500 && answer.status !== 400, `up: ${operation}: ${answer.status} ${answer.text}`)
      }

      const outages: ReadonlyArray<{ readonly name: string; readonly begin: () => void; readonly end: () => void }> = [
        { name: "database", begin: () => proxy.cut(), end: () => proxy.resume() },
        {
          name: "guardian",
          begin: () => process.kill(childPid(/guardian\/src\/main\.ts/), "SIGSTOP"),
          end: () => process.kill(childPid(/guardian\/src\/main\.ts/), "SIGCONT")
        },
        {
          name: "chain",
          begin: () => process.kill(childPid(/anvil/), "SIGSTOP"),
          end: () => process.kill(childPid(/anvil/), "SIGCONT")
        }
      ]
      const statuses: Array<string> = []
      for (const outage of outages) {
        outage.begin()
        const answers = yield* Effect.forEach(
          Object.entries(samples(fixture)),
          ([operation, sample]) =>
            sendSample(server.baseUrl, fixture.ownerKey, sample).pipe(Effect.map((answer) => [operation, answer] as const)),
          { concurrency: "unbounded" }
        ).pipe(Effect.ensuring(Effect.sync(outage.end)))
        for (const [operation, answer] of answers) {
          expectOutageAnswer(answer, `${outage.name} down: ${operation}`)
          statuses.push(`${outage.name} ${operation} ${answer.status}`)
        }
        yield* ready
      }
      // Authentication meets the database outage too (no cached key).
      proxy.cut()
      const cold = yield* sendSample(server.baseUrl, uncached.api_key, { method: "GET", path: "/v1/accounts/me" }).pipe(
        Effect.ensuring(Effect.sync(() => proxy.resume()))
      )
      expectOutageAnswer(cold, "database down: authenticating an uncached key")
      assert.strictEqual(cold.status, 503, cold.text)
      yield* ready
      console.log(statuses.join("\n"))
    })), { timeout: 600_000 })
})
