/**
 * The replay store's rules (D57), without a server: one request at a time per nonce, a served or
 * refunded payment never again, an unserved one redeemable by the same transfer only, one
 * transfer for one nonce; and the binding's tag refusing any changed term.
 */
import { describe, expect, it } from "vitest"
import { Binding, ReplayStore } from "../src/index.ts"

describe("ReplayStore.memory", () => {
  it("claims, refuses while in use, serves once; an unserved payment is redeemed by its own transfer only, or refunded once", async () => {
    const store = ReplayStore.memory(() => 1_000)
    expect(await store.claim("n1", "tr_A", 10_000)).toBeUndefined()
    expect(await store.claim("n1", "tr_A", 10_000)).toBe("payment_in_use")
    await store.release("n1", "served")
    expect(await store.claim("n1", "tr_A", 10_000)).toBe("payment_already_used")

    expect(await store.claim("n2", "tr_B", 10_000)).toBeUndefined()
    await store.release("n2", "unserved")
    expect((await store.unserved()).map((entry) => entry.nonce)).toEqual(["n2"])
    expect(await store.claim("n2", "tr_C", 10_000)).toBe("payment_bound_to_another_transfer")
    expect(await store.claim("n9", "tr_B", 10_000)).toBe("transfer_already_used")
    expect(await store.claim("n2", "tr_B", 10_000)).toBeUndefined()
    await store.release("n2", "unserved")
    expect(await store.markRefunded("n2")).toBe(true)
    expect(await store.markRefunded("n2")).toBe(false)
    expect(await store.claim("n2", "tr_B", 10_000)).toBe("payment_refunded")

    // A claim that did not check out is forgotten: the nonce and the transfer are free again.
    expect(await store.claim("n3", "tr_D", 10_000)).toBeUndefined()
    await store.release("n3", "forget")
    expect(await store.get("n3")).toBeUndefined()
    expect(await store.claim("n3", "tr_E", 10_000)).toBeUndefined()
  })
})

describe("Binding", () => {
  const secret = new Uint8Array(32).fill(7)
  const bound = { scheme: "pps-sealed", network: "eip155:46630", asset: "USDG", amount: "13217", payTo: "@shop", resource: "http://shop/weather", nonce: "abc", expiresAt: "2026-11-29T12:00:00.000Z" }

  it("a tag matches its own binding and no binding with one term changed, nor under another secret", () => {
    const tag = Binding.tagOf(secret, bound)
    expect(Binding.tagMatches(secret, bound, tag)).toBe(true)
    for (const [key, value] of Object.entries(bound)) {
      expect(Binding.tagMatches(secret, { ...bound, [key]: `${value}x` }, tag), key).toBe(false)
    }
    expect(Binding.tagMatches(new Uint8Array(32).fill(8), bound, tag)).toBe(false)
    expect(Binding.tagMatches(secret, bound, "short")).toBe(false)
  })

  it("the memo and the Idempotency-Key follow the nonce", () => {
    expect(Binding.memoOf(bound.resource, "abc", bound.expiresAt)).not.toBe(Binding.memoOf(bound.resource, "abd", bound.expiresAt))
    expect(Binding.idempotencyKeyOf(bound.network, "abc")).toBe("x402_eip155:46630_abc")
    expect(Buffer.byteLength(Binding.memoOf(`http://shop/${"x".repeat(4000)}`, Binding.newNonce(), bound.expiresAt))).toBeLessThanOrEqual(512)
  })
})
