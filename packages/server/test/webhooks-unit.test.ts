/**
 * The pure parts of events and webhooks: D32's schedule, D31's signatures
 * (pinned vectors, checked against the openssl CLI when they were made),
 * D30's payload encoding and D33's subscription rules.
 */
import { assert, describe, it } from "@effect/vitest"
import { encodePayload, type EventInput, transferEvents } from "@pps/api/Events"
import { parseEventTypes } from "@pps/api/Webhooks"
import {
  deliveryAttemptsMax,
  nextRetryDelayMs,
  parseRetryAfterMs,
  retryDelaysMs,
  retryWindowMs
} from "../src/webhooks/RetrySchedule.ts"
import { deliveryHeaders, generateSecret, serviceSignature, standardSignature } from "../src/webhooks/Signature.ts"

describe("retry schedule (D32)", () => {
  it("follows 5 s, 1 min, 5 min, 30 min, 2 h, 6 h, 12 h within 20 % jitter, then stops", () => {
    assert.deepStrictEqual(retryDelaysMs, [5_000, 60_000, 300_000, 1_800_000, 7_200_000, 21_600_000, 43_200_000])
    assert.strictEqual(deliveryAttemptsMax, 8)
    for (let attempt = 1; attempt <= 7; attempt++) {
      const base = retryDelaysMs[attempt - 1]!
      const low = nextRetryDelayMs({ attemptsMade: attempt, jitterUnit: 0, retryAfterMs: undefined, elapsedMs: 0 })!
      const high = nextRetryDelayMs({ attemptsMade: attempt, jitterUnit: 0.999999, retryAfterMs: undefined, elapsedMs: 0 })!
      assert.strictEqual(low, base * 0.8)
      assert.isTrue(high <= base * 1.2 && high > base * 1.19)
    }
    assert.isUndefined(nextRetryDelayMs({ attemptsMade: 8, jitterUnit: 0.5, retryAfterMs: undefined, elapsedMs: 0 }))
  })

  it("never schedules an attempt later than 24 hours after the delivery was created", () => {
    let elapsedMs = 0
    for (let attempt = 1; attempt <= 7; attempt++) {
      // The worst case: every jitter at its top and the largest Retry-After.
      const delay = nextRetryDelayMs({ attemptsMade: attempt, jitterUnit: 0.999999, retryAfterMs: 10 ** 9, elapsedMs })!
      elapsedMs += delay
      assert.isTrue(elapsedMs <= retryWindowMs)
    }
    assert.strictEqual(elapsedMs, retryWindowMs)
    assert.isUndefined(nextRetryDelayMs({ attemptsMade: 3, jitterUnit: 0, retryAfterMs: undefined, elapsedMs: retryWindowMs }))
  })

  it("honours Retry-After within the slot: longer up to +20 %, never shorter than the jittered delay", () => {
    const slot = (retryAfterMs: number | undefined) => nextRetryDelayMs({ attemptsMade: 2, jitterUnit: 0.5, retryAfterMs, elapsedMs: 0 })
    assert.strictEqual(slot(undefined), 60_000)
    assert.strictEqual(slot(65_000), 65_000)
    assert.strictEqual(slot(3_600_000), 72_000)
    assert.strictEqual(slot(1_000), 60_000)
    assert.strictEqual(parseRetryAfterMs("120", 0), 120_000)
    assert.strictEqual(parseRetryAfterMs("Thu, 01 Jan 1970 00:01:00 GMT", 30_000), 30_000)
    assert.isUndefined(parseRetryAfterMs("soon", 0))
    assert.isUndefined(parseRetryAfterMs(undefined, 0))
  })
})

describe("signatures (D31)", () => {
  const secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
  const eventId = "evt_01JD000000000000000000000"
  const body = new TextEncoder().encode(`{"id":"${eventId}","event":"transfer.confirmed"}`)

  it("X-Service-Signature is hex HMAC-SHA256 keyed with the whole secret string (pinned vector)", () => {
    // printf '%s' "$body" | openssl dgst -sha256 -hmac "$secret"
    assert.strictEqual(serviceSignature(secret, body), "33a85fe1d2feda774c7bd7299d2cabeda916ea77a77ee3ee9d0dddbf57061c51")
  })

  it("webhook-signature is Standard Webhooks v1 keyed with the decoded secret (pinned vector)", () => {
    // openssl dgst -sha256 -mac HMAC -macopt hexkey:000102...1f -binary | base64, over "id.timestamp.body"
    assert.strictEqual(
      standardSignature(secret, eventId, 1_700_000_000, body),
      "v1,gXqw5SWZQl0I3T4xHrqlUmw1Mik2EpibUn7zSSkKJAM="
    )
  })

  it("during a rotation both secrets sign; otherwise only the current one", () => {
    const previous = generateSecret()
    const common = { eventId, deliveryId: "dlv_1", timestampSeconds: 1_700_000_000, body }
    const single = deliveryHeaders({ ...common, secrets: [secret] })
    assert.strictEqual(single["webhook-signature"]!.split(" ").length, 1)
    assert.isUndefined(single["x-service-signature-previous"])
    const both = deliveryHeaders({ ...common, secrets: [secret, previous] })
    assert.deepStrictEqual(both["webhook-signature"]!.split(" "), [
      standardSignature(secret, eventId, 1_700_000_000, body),
      standardSignature(previous, eventId, 1_700_000_000, body)
    ])
    assert.strictEqual(both["x-service-signature"], serviceSignature(secret, body))
    assert.strictEqual(both["x-service-signature-previous"], serviceSignature(previous, body))
    assert.strictEqual(both["webhook-id"], eventId)
    assert.strictEqual(both["x-service-delivery-id"], "dlv_1")
  })

  it("secrets are whsec_ + base64 of 32 random bytes, all different", () => {
    const secrets = new Set(Array.from({ length: 100 }, generateSecret))
    assert.strictEqual(secrets.size, 100)
    for (const value of secrets) {
      assert.match(value, /^whsec_[A-Za-z0-9+/]{43}=$/)
      assert.strictEqual(Buffer.from(value.slice(6), "base64").length, 32)
    }
  })
})

describe("event payloads (D30)", () => {
  it("one event per side, agents routed to their owner with account = the agent's handle, no amount", () => {
    const events = transferEvents({
      event: "transfer.confirmed",
      mode: "test",
      transferId: "tr_1",
      sender: { accountId: "acct_agent", handle: "acme/buyer", ownerAccountId: "acct_acme" },
      recipient: { accountId: "acct_bob", handle: "bob", ownerAccountId: null },
      recipientDisplay: "@bob",
      asset: "USDG",
      confidential: true,
      txHash: "0xabc",
      refundOf: null
    })
    assert.strictEqual(events.length, 2)
    assert.strictEqual(events[0]!.recipientAccountId, "acct_acme")
    assert.deepStrictEqual(events[0]!.payload, {
      event: "transfer.confirmed",
      account: "@acme/buyer",
      direction: "sent",
      counterparty: "@bob",
      asset: "USDG",
      confidential: true,
      tx_hash: "0xabc",
      transfer_id: "tr_1"
    })
    assert.strictEqual(events[1]!.recipientAccountId, "acct_bob")
    assert.strictEqual(events[1]!.payload.account, "@bob")
    assert.strictEqual((events[1]!.payload as { direction: string }).direction, "received")
    assert.strictEqual((events[1]!.payload as { counterparty: string }).counterparty, "@acme/buyer")
  })

  it("a refund's events name its original on both sides (D43); other transfers' events have no refund_of key", () => {
    const events = transferEvents({
      event: "transfer.initiated",
      mode: "test",
      transferId: "tr_refund",
      sender: { accountId: "acct_bob", handle: "bob", ownerAccountId: null },
      recipient: { accountId: "acct_agent", handle: "acme/buyer", ownerAccountId: "acct_acme" },
      recipientDisplay: "@acme/buyer",
      asset: "USDG",
      confidential: true,
      txHash: null,
      refundOf: "tr_original"
    })
    assert.deepStrictEqual(events.map((event) => (event.payload as { refund_of?: string }).refund_of), ["tr_original", "tr_original"])
    const encoded = encodePayload(events[1]!.payload, "evt_1", "2026-11-30T00:00:00.000Z")
    assert.strictEqual(JSON.parse(encoded.json).refund_of, "tr_original")
    const plain = transferEvents({
      event: "transfer.initiated",
      mode: "test",
      transferId: "tr_plain",
      sender: { accountId: "acct_bob", handle: "bob", ownerAccountId: null },
      recipient: null,
      recipientDisplay: "0x0000000000000000000000000000000000000001",
      asset: "USDG",
      confidential: true,
      txHash: null,
      refundOf: null
    })
    assert.isFalse("refund_of" in JSON.parse(encodePayload(plain[0]!.payload, "evt_2", "2026-11-30T00:00:00.000Z").json))
  })

  it("encoding drops any field its Schema does not list: an amount or memo slipped in never reaches the JSON", () => {
    const input = {
      event: "transfer.initiated",
      account: "@alice",
      direction: "sent",
      counterparty: "0x0000000000000000000000000000000000000001",
      asset: "USDG",
      confidential: false,
      tx_hash: null,
      transfer_id: "tr_2",
      amount: "987654.321",
      memo: "rent for march"
    } as unknown as EventInput["payload"]
    const { json, type } = encodePayload(input, "evt_X", "2026-01-01T00:00:00.000Z")
    assert.strictEqual(type, "transfer.initiated")
    assert.notInclude(json, "987654")
    assert.notInclude(json, "rent")
    assert.deepStrictEqual(Object.keys(JSON.parse(json)), [
      "id", "event", "account", "direction", "counterparty", "asset", "confidential", "tx_hash", "transfer_id", "timestamp"
    ])
  })
})

describe("subscription events (D33)", () => {
  it("must be non-empty and known; duplicates collapse", () => {
    assert.deepStrictEqual(parseEventTypes(["transfer.confirmed", "transfer.confirmed", "agent.policy.updated"]), {
      _tag: "Ok",
      types: ["transfer.confirmed", "agent.policy.updated"]
    })
    assert.strictEqual(parseEventTypes([])._tag, "Invalid")
    const unknown = parseEventTypes(["transfer.confirmed", "transfer.exploded"])
    assert.strictEqual(unknown._tag === "Invalid" ? unknown.param : "", "events.1")
  })
})
