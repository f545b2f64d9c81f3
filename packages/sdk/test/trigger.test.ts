/**
 * `pps trigger` (D64) against the real server (child process, embedded PGlite, anvil and
 * guardian): each event type it takes makes that event happen through the normal path, so a
 * stream that is open receives it and `/v1/events` records it; a repeat with the same
 * idempotency key acts once; a live key, and an event no account can cause, are refused before
 * any request. Beside it, what had no test: the stream's `types` filter, and the facade's
 * `webhooks.get`/`update` and `events.list`/`get`, each against the same server.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EncryptionKey } from "@pps/crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Errors, Pps, type PpsTypes } from "../src/index.ts"
import { type Run, runPps, type ServerProcess, startServer } from "./support/server.ts"

let server: ServerProcess
let alice: { readonly account_id: string; readonly api_key: string }
let pps: Pps
const home = fs.mkdtempSync(path.join(os.tmpdir(), "pps-trigger-"))

const trigger = (args: ReadonlyArray<string>, apiKey = alice.api_key): Promise<Run> =>
  runPps(["trigger", ...args], { HOME: home, PPS_API_KEY: apiKey, PPS_BASE_URL: server.baseUrl })

/** A stream's events as they arrive, collected in the background until `close`. */
const collect = async (options: { readonly types?: ReadonlyArray<string> } = {}) => {
  // Aborted on close: a pending read of the stream ends only with its connection.
  const abort = new AbortController()
  const client = new Pps({
    apiKey: alice.api_key,
    baseUrl: server.baseUrl,
    fetch: (url, init) => globalThis.fetch(url, { ...init, signal: init.signal ? AbortSignal.any([init.signal, abort.signal]) : abort.signal })
  })
  const received: Array<PpsTypes.Event> = []
  const stream = await client.events.stream(options)
  const iterator = stream[Symbol.asyncIterator]()
  let open = true
  const reading = (async () => {
    while (open) {
      const next = await iterator.next()
      if (next.done === true) return
      received.push(next.value)
    }
  })()
  const waitFor = async (what: string, done: () => boolean, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; received ${JSON.stringify(received.map((event) => event.event))}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  const close = async () => {
    open = false
    abort.abort()
    await reading.catch(() => undefined)
  }
  return { received, waitFor, close }
}

/** The `field  value` lines trigger prints, as an object. */
const printed = (run: Run): Record<string, string> => {
  expect(run.exitCode, run.stderr).toBe(0)
  return JSON.parse(run.stdout) as Record<string, string>
}

beforeAll(async () => {
  // The sweep runs every half second, so an expiry is recorded (with its event) at once.
  server = await startServer({ env: { APPROVAL_SWEEP_INTERVAL_MS: "500" } })
  alice = await server.createAccount("alice")
  // The agent pays its owner confidentially: the owner needs a registered key, as for any payee.
  await new Pps({ baseUrl: server.baseUrl, apiKey: alice.api_key, keyPair: EncryptionKey.generate() }).encryptionKey.register()
  pps = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl })
}, 120_000)

afterAll(async () => {
  await server?.stop()
  fs.rmSync(home, { recursive: true, force: true })
}, 30_000)

describe("pps trigger", { timeout: 180_000 }, () => {
  it("makes each event happen for real: the open stream receives it, /v1/events records it", async () => {
    const stream = await collect()
    try {
      const cases: ReadonlyArray<readonly [string, (out: Record<string, string>) => (event: PpsTypes.Event) => boolean]> = [
        ["transfer.initiated", (out) => (event) => event.event === "transfer.initiated" && "transfer_id" in event && event.transfer_id === out["transfer_id"]],
        ["transfer.confirmed", (out) => (event) => event.event === "transfer.confirmed" && "transfer_id" in event && event.transfer_id === out["transfer_id"]],
        ["agent.policy.updated", (out) => (event) => event.event === "agent.policy.updated" && event.policy_id === out["policy_id"]],
        ...(["pending_approval", "approved", "rejected", "expired"] as const).map((status) =>
          [`agent.transaction.${status}`, (out: Record<string, string>) => (event: PpsTypes.Event) =>
            event.event === `agent.transaction.${status}` && "transaction_id" in event && event.transaction_id === out["transaction_id"]] as const)
      ]
      for (const [type, matches] of cases) {
        const out = printed(await trigger([type, "--json"]))
        expect(out).toMatchObject({ event: type, agent: expect.stringMatching(/^acct_\S+ \(@alice\/trigger\)$/), idempotency_key: expect.stringMatching(/^pps-/) })
        await stream.waitFor(type, () => stream.received.some(matches(out)))
        const arrived = stream.received.find(matches(out))!
        // The same event, recorded as any other: /v1/events has it under the id the stream gave.
        const recorded = await pps.events.get(arrived.id)
        expect(recorded).toMatchObject({ id: arrived.id, type, data: { object: { id: arrived.id, event: type } } })
      }
      // An approval makes its transfer, a payment of the agent to its owner: both sides' events.
      const approved = stream.received.find((event) => event.event === "agent.transaction.approved")!
      expect(approved).toMatchObject({ account: "@alice/trigger", agent: "@alice/trigger" })
      // The first run created the agent and issued its key, kept on this machine; later runs use them.
      const kept = JSON.parse(fs.readFileSync(path.join(home, ".pps", `trigger-${alice.account_id}.json`), "utf8")) as Record<string, string>
      expect(fs.statSync(path.join(home, ".pps", `trigger-${alice.account_id}.json`)).mode & 0o777).toBe(0o600)
      expect(kept["api_key"]).toMatch(/^hc_test_/)
      const agents = await pps.agents.list()
      expect(agents.agents.map((agent) => agent.handle)).toEqual(["@alice/trigger"])
    } finally {
      await stream.close()
    }
  })

  it("a repeat with the same idempotency key acts once; a revoked agent key is replaced", async () => {
    const first = printed(await trigger(["agent.transaction.rejected", "--idempotency-key", "pps-trigger-once", "--json"]))
    const again = printed(await trigger(["agent.transaction.rejected", "--idempotency-key", "pps-trigger-once", "--json"]))
    expect(again["transaction_id"]).toBe(first["transaction_id"])
    const held = (await pps.events.list({ type: "agent.transaction.pending_approval" })).data
      .filter((event) => "transaction_id" in event.data.object && event.data.object.transaction_id === first["transaction_id"])
    expect(held).toHaveLength(1)

    // The owner revokes the kept key: the next run issues another and keeps it instead.
    const file = path.join(home, ".pps", `trigger-${alice.account_id}.json`)
    const kept = JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, string>
    await pps.agents.keys.revoke(kept["agent_id"]!, kept["key_id"]!)
    // Without --json, one `name  value` line each, the key drawn told on stderr.
    const text = await trigger(["agent.policy.updated"])
    expect(text.exitCode, text.stderr).toBe(0)
    expect(text.stdout).toMatch(/^event {12}agent\.policy\.updated\nagent {12}acct_\S+ \(@alice\/trigger\)\npolicy_id {8}pol_\S+\nupdated_at {7}\S+\nidempotency_key {2}(pps-[0-9a-f-]{36})\n$/)
    const drawn = /idempotency_key +(\S+)/.exec(text.stdout)?.[1]
    expect(text.stderr).toBe(`pps: Idempotency-Key ${drawn} (to repeat this request safely: --idempotency-key ${drawn})\n`)
    const replaced = JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, string>
    expect(replaced["agent_id"]).toBe(kept["agent_id"])
    expect(replaced["key_id"]).not.toBe(kept["key_id"])
  })

  it("refuses a live key and transfer.failed before any request, and names an unknown type", async () => {
    const before = (await pps.events.list()).data.length
    const live = await server.issueKey(alice.account_id, "live", "live")
    const refused = await trigger(["transfer.confirmed"], live.api_key)
    expect(refused).toMatchObject({ exitCode: 1, stdout: "" })
    expect(refused.stderr).toBe("pps: trigger acts in test mode only, and PPS_API_KEY is a live key (hc_live_): it would move real money; use the account's hc_test_ key\n")
    const failed = await trigger(["transfer.failed"])
    expect(failed).toMatchObject({ exitCode: 1, stdout: "" })
    expect(failed.stderr).toMatch(/^pps: transfer\.failed cannot be triggered: a transfer fails only when the chain does not settle it/)
    const unknown = await trigger(["transfer.exploded"])
    expect(unknown.exitCode).toBe(2)
    expect(unknown.stderr.split("\n")[0]).toMatch(/^pps: EVENT must be one of transfer\.initiated\|transfer\.confirmed\|\S+, not "transfer\.exploded"$/)
    expect((await pps.events.list()).data.length).toBe(before)
  })
})

describe("the stream's types filter, webhooks.get/update, events.list/get", { timeout: 120_000 }, () => {
  it("a stream with types receives only those, in commit order; an unknown type is 400", async () => {
    const filtered = await collect({ types: ["agent.policy.updated", "agent.transaction.rejected"] })
    try {
      // Recorded first: a transfer's events, which the filter must keep out of this stream.
      const paid = printed(await trigger(["transfer.confirmed", "--json"]))
      const patched = printed(await trigger(["agent.policy.updated", "--json"]))
      await filtered.waitFor("the policy event", () => filtered.received.length >= 1)
      expect(filtered.received[0]).toMatchObject({ event: "agent.policy.updated", policy_id: patched["policy_id"] })
      const rejected = printed(await trigger(["agent.transaction.rejected", "--json"]))
      await filtered.waitFor("the rejection", () => filtered.received.length >= 2)
      expect(filtered.received.map((event) => event.event)).toEqual(["agent.policy.updated", "agent.transaction.rejected"])
      expect(filtered.received[1]).toMatchObject({ transaction_id: rejected["transaction_id"] })
      // The transfer's and the hold's events were recorded all the same.
      const recorded = (await pps.events.list({ limit: 20 })).data.map((event) => event.data.object)
      expect(recorded.some((event) => "transfer_id" in event && event.transfer_id === paid["transfer_id"])).toBe(true)
    } finally {
      await filtered.close()
    }
    const bad = await fetch(`${server.baseUrl}/v1/events/stream?types=transfer.exploded`, { headers: { authorization: `Bearer ${alice.api_key}` } })
    expect(bad.status).toBe(400)
    expect(await bad.json()).toMatchObject({ error: { code: "invalid_request", param: "types" } })
  })

  it("events.list pages newest first and filters by type; events.get answers one, 404 for another's or none", async () => {
    const all = await pps.events.list({ limit: 5 })
    expect(all).toMatchObject({ limit: 5, offset: 0, has_more: true })
    const times = all.data.map((event) => event.created_at)
    expect([...times].sort().reverse()).toEqual(times)
    const next = await pps.events.list({ limit: 5, offset: 5 })
    expect(next.data.map((event) => event.id)).not.toContain(all.data[0]!.id)
    const policies = await pps.events.list({ type: "agent.policy.updated" })
    expect(policies.data.length).toBeGreaterThanOrEqual(2)
    expect(new Set(policies.data.map((event) => event.type))).toEqual(new Set(["agent.policy.updated"]))
    const one = await pps.events.get(policies.data[0]!.id)
    expect(one).toEqual(policies.data[0])
    await expect(pps.events.get("evt_01JAZ3Y8X6Q4M2N7P5R9S0T1V4")).rejects.toBeInstanceOf(Errors.ApiError)
    await expect(pps.events.get("evt_01JAZ3Y8X6Q4M2N7P5R9S0T1V4")).rejects.toMatchObject({ status: 404 })
    // Another account's event is not found either.
    const bob = await server.createAccount("bob")
    await expect(new Pps({ apiKey: bob.api_key, baseUrl: server.baseUrl }).events.get(one.id)).rejects.toMatchObject({ status: 404 })
  })

  it("webhooks.get answers one subscription; webhooks.update changes url, events and enabled", async () => {
    const created = await pps.webhooks.create({ url: "https://example.com/hooks/a", events: ["transfer.confirmed"] })
    const read = await pps.webhooks.get(created.webhook_id)
    expect(read).toMatchObject({ webhook_id: created.webhook_id, url: "https://example.com/hooks/a", events: ["transfer.confirmed"] })
    expect(read).not.toHaveProperty("secret")
    const updated = await pps.webhooks.update(created.webhook_id, {
      url: "https://example.com/hooks/b",
      events: ["agent.policy.updated", "transfer.failed"],
      enabled: false
    })
    expect(updated).toMatchObject({ webhook_id: created.webhook_id, url: "https://example.com/hooks/b", events: ["agent.policy.updated", "transfer.failed"], enabled: false })
    expect(await pps.webhooks.get(created.webhook_id)).toEqual(updated)
    // Only what is named changes.
    const resumed = await pps.webhooks.update(created.webhook_id, { enabled: true })
    expect(resumed).toMatchObject({ url: "https://example.com/hooks/b", events: ["agent.policy.updated", "transfer.failed"], enabled: true })
    await expect(pps.webhooks.update(created.webhook_id, { events: ["transfer.exploded"] })).rejects.toMatchObject({ status: 400 })
    await expect(pps.webhooks.get("wh_01JAZ3Y8X6Q4M2N7P5R9S0T1V4")).rejects.toMatchObject({ status: 404 })
  })
})
