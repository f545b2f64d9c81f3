/**
 * The webhook receiver helper: accepts exactly what the service signs (pinned
 * vectors shared with the server's tests, made with the openssl CLI), refuses
 * a changed byte, a wrong secret, a missing header or a stale timestamp before
 * parsing, and accepts either secret during a rotation.
 */
import { describe, expect, it } from "vitest"
import { Webhook } from "../src/index.ts"

const secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
const eventId = "evt_01JD000000000000000000000"
const body = `{"id":"${eventId}","event":"transfer.confirmed"}`
const timestamp = 1_700_000_000
const headers = {
  "x-service-signature": "33a85fe1d2feda774c7bd7299d2cabeda916ea77a77ee3ee9d0dddbf57061c51",
  "webhook-id": eventId,
  "webhook-timestamp": String(timestamp),
  "webhook-signature": "v1,gXqw5SWZQl0I3T4xHrqlUmw1Mik2EpibUn7zSSkKJAM="
}

describe("Webhook.verify", () => {
  it("accepts the service's signature over the raw bytes and returns the parsed event", () => {
    const event = Webhook.verify({ payload: Buffer.from(body), headers, secret, nowSeconds: timestamp + 10 })
    expect(event).toEqual({ id: eventId, event: "transfer.confirmed" })
    expect(Webhook.verify({ payload: body, headers: new Headers(headers), secret, nowSeconds: timestamp })).toEqual(event)
    expect(Webhook.sign(body, secret)).toBe(headers["x-service-signature"])
  })

  it("refuses a changed byte, a wrong secret or a missing signature, before parsing", () => {
    const refuse = (options: Parameters<typeof Webhook.verify>[0], reason: Webhook.VerificationFailure) => {
      try {
        Webhook.verify(options)
        expect.unreachable("verify accepted a bad delivery")
      } catch (error) {
        expect(error).toBeInstanceOf(Webhook.WebhookVerificationError)
        expect((error as Webhook.WebhookVerificationError).reason).toBe(reason)
      }
    }
    refuse({ payload: body.replace("confirmed", "confirmeD"), headers, secret, nowSeconds: timestamp }, "signature_mismatch")
    refuse({ payload: body + " ", headers, secret, nowSeconds: timestamp }, "signature_mismatch")
    refuse({ payload: body, headers, secret: "whsec_" + Buffer.alloc(32, 1).toString("base64"), nowSeconds: timestamp }, "signature_mismatch")
    const { "x-service-signature": _dropped, ...unsigned } = headers
    refuse({ payload: body, headers: unsigned, secret, nowSeconds: timestamp }, "missing_signature")
    refuse({ payload: body, headers: { ...headers, "x-service-signature": "00" }, secret, nowSeconds: timestamp }, "signature_mismatch")
    // A body that is not JSON is refused by the signature check first: it is never parsed.
    const notJson = "}{ not json"
    refuse({ payload: notJson, headers, secret, nowSeconds: timestamp }, "signature_mismatch")
    // Signed but not JSON: refused only after the signature matched.
    refuse(
      {
        payload: notJson,
        headers: { "x-service-signature": Webhook.sign(notJson, secret) },
        secret,
        toleranceSeconds: null
      },
      "invalid_payload"
    )
  })

  it("refuses a replay outside the timestamp tolerance and a forged Standard Webhooks signature", () => {
    expect(() => Webhook.verify({ payload: body, headers, secret, nowSeconds: timestamp + 301 })).toThrow(/timestamp_out_of_tolerance/)
    expect(() =>
      Webhook.verify({ payload: body, headers: { ...headers, "webhook-timestamp": String(timestamp + 5) }, secret, nowSeconds: timestamp })
    ).toThrow(/signature_mismatch/)
    // Tolerance can be turned off for receivers that only use X-Service-Signature.
    expect(Webhook.verify({ payload: body, headers: { "x-service-signature": headers["x-service-signature"] }, secret, toleranceSeconds: null }))
      .toEqual({ id: eventId, event: "transfer.confirmed" })
  })

  it("during a rotation accepts a delivery signed with either secret", () => {
    const next = "whsec_" + Buffer.alloc(32, 9).toString("base64")
    expect(Webhook.verifySignature({ payload: body, signature: headers["x-service-signature"], secret: [next, secret] })).toBe(true)
    expect(Webhook.verifySignature({ payload: body, signature: headers["x-service-signature"], secret: [next] })).toBe(false)
    const rotated = {
      ...headers,
      "x-service-signature": Webhook.sign(body, next),
      "x-service-signature-previous": headers["x-service-signature"]
    }
    // A receiver that still has only the old secret accepts through the previous signature.
    expect(Webhook.verify({ payload: body, headers: rotated, secret, nowSeconds: timestamp }).id).toBe(eventId)
  })
})
