/**
 * The replay store (D57): what the resource server remembers of each payment it was shown, by
 * the nonce of the request it paid for, so that no payment serves two requests.
 *
 * A nonce is `in_use` while one request verifies and serves it (a second request carrying the
 * same payment meanwhile is refused: ten concurrent requests with one payment get one 200),
 * `unserved` when that request failed after the payment checked out (the payment stays
 * redeemable for the same resource until its expiry, or the merchant refunds it), `served` once
 * a request was answered with it, `refunded` once the merchant gave it back. A transfer serves
 * one nonce only.
 *
 * The store here lives in the resource server's memory: one process. A merchant running several
 * processes behind one payee gives them one store (the interface is small; a SQL row per nonce
 * with a conditional update does it).
 *
 * @since 0.1.0
 */

/**
 * What became of a nonce.
 *
 * @since 0.1.0
 * @category models
 */
export type NonceState = "in_use" | "unserved" | "served" | "refunded"

/**
 * Why a claim was refused: each is the `invalidReason` a 402 answers.
 *
 * @since 0.1.0
 * @category models
 */
export type ClaimRefusal =
  | "payment_in_use"
  | "payment_already_used"
  | "payment_refunded"
  | "payment_bound_to_another_transfer"
  | "transfer_already_used"

/**
 * A nonce's entry.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  readonly nonce: string
  readonly transferId: string
  readonly state: NonceState
  readonly expiresAtMs: number
}

/**
 * The store's operations. Each is atomic with respect to the others for one nonce.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReplayStore {
  /** Takes the nonce for one request: new, or `unserved` with the same transfer. */
  readonly claim: (nonce: string, transferId: string, expiresAtMs: number) => Promise<ClaimRefusal | undefined>
  /** The request that claimed it ended: `served`, `unserved` (paid, not served) or forgotten (the payment did not check out). */
  readonly release: (nonce: string, outcome: "served" | "unserved" | "forget") => Promise<void>
  /** Marks an `unserved` nonce refunded; false when it was not unserved. */
  readonly markRefunded: (nonce: string) => Promise<boolean>
  readonly get: (nonce: string) => Promise<Entry | undefined>
  /** The `unserved` entries: payments taken for requests that were not answered. */
  readonly unserved: () => Promise<ReadonlyArray<Entry>>
}

/** How long an entry is kept past its expiry: after it, a replay fails on the expiry check anyway. */
const keptAfterExpiryMs = 60 * 60 * 1000

/**
 * A store in this process's memory.
 *
 * @since 0.1.0
 * @category constructors
 */
export const memory = (now: () => number = Date.now): ReplayStore => {
  const byNonce = new Map<string, Entry>()
  const nonceOfTransfer = new Map<string, string>()
  const prune = () => {
    const before = now() - keptAfterExpiryMs
    for (const [nonce, entry] of byNonce) {
      if (entry.expiresAtMs < before && entry.state !== "in_use") {
        byNonce.delete(nonce)
        nonceOfTransfer.delete(entry.transferId)
      }
    }
  }
  const claim = (nonce: string, transferId: string, expiresAtMs: number): ClaimRefusal | undefined => {
    prune()
    const bound = nonceOfTransfer.get(transferId)
    if (bound !== undefined && bound !== nonce) return "transfer_already_used"
    const entry = byNonce.get(nonce)
    if (entry !== undefined) {
      if (entry.transferId !== transferId) return "payment_bound_to_another_transfer"
      if (entry.state === "in_use") return "payment_in_use"
      if (entry.state === "served") return "payment_already_used"
      if (entry.state === "refunded") return "payment_refunded"
    }
    byNonce.set(nonce, { nonce, transferId, state: "in_use", expiresAtMs })
    nonceOfTransfer.set(transferId, nonce)
    return undefined
  }
  const release = (nonce: string, outcome: "served" | "unserved" | "forget") => {
    const entry = byNonce.get(nonce)
    if (entry === undefined || entry.state !== "in_use") return
    if (outcome === "forget") {
      byNonce.delete(nonce)
      nonceOfTransfer.delete(entry.transferId)
    } else {
      byNonce.set(nonce, { ...entry, state: outcome })
    }
  }
  const markRefunded = (nonce: string) => {
    const entry = byNonce.get(nonce)
    if (entry === undefined || entry.state !== "unserved") return false
    byNonce.set(nonce, { ...entry, state: "refunded" })
    return true
  }
  return {
    claim: (nonce, transferId, expiresAtMs) => Promise.resolve(claim(nonce, transferId, expiresAtMs)),
    release: (nonce, outcome) => Promise.resolve(release(nonce, outcome)),
    markRefunded: (nonce) => Promise.resolve(markRefunded(nonce)),
    get: (nonce) => Promise.resolve(byNonce.get(nonce)),
    unserved: () => Promise.resolve([...byNonce.values()].filter((entry) => entry.state === "unserved"))
  }
}
