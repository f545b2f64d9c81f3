/**
 * The guardian's behaviour, run unchanged against each deployment (in process on
 * PGlite, over HTTP on PostgreSQL): authorization with the ciphertext it computes and
 * the attestation it signs, every refusal, D25's check order, idempotency, settlement,
 * expiry, concurrency at the balance and at the daily cap, and a storage dump and log
 * search for canary amounts.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Attestation, ElGamal, Note, Point } from "@pps/crypto"
import { Effect } from "effect"
import { bytesToHex, getAddress, type Hex, hexToBytes } from "viem"
import { type Domain, GuardianKeys } from "../../src/index.ts"
import { makeTarget, type TargetName, TestGuardian, testSecret } from "../support/targets.ts"
import {
  chainId,
  confidentialRequest,
  contract,
  newParty,
  newTransferId,
  nowSeconds,
  type Party,
  publicRequest
} from "../support/transfers.ts"
import { Redacted } from "effect"

const asPoint = (hex: string) => {
  const parsed = Point.parse(hexToBytes(hex as Hex), { allowIdentity: true })
  if (!parsed.ok) throw new Error(parsed.reason)
  return parsed.value
}

let creditCounter = 0
const fund = (party: Party, amount: bigint) =>
  Effect.gen(function*() {
    const { client } = yield* TestGuardian
    return yield* client.credit({ chainId, contract, account: party.address, amount, creditId: `test-credit-${++creditCounter}-${Date.now()}` })
  })

/** The balance as the account's client reads it: the guardian's statement opened with its own key. */
const balanceOf = (party: Party) =>
  Effect.gen(function*() {
    const { client } = yield* TestGuardian
    const sealed = yield* client.sealedBalance({ chainId, contract, account: party.address, publicKey: Point.isIdentity(party.keys.publicKey) ? "" : `0x${Buffer.from(party.keys.publicKey).toString("hex")}` })
    const opened = Note.openBalanceStatement(party.keys, hexToBytes(sealed.sealedStatement as Hex), {
      chainId,
      contract: getAddress(contract),
      account: party.address
    })
    if (!opened.ok) throw new Error(opened.reason)
    assert.strictEqual(opened.value.ciphertextVersion, sealed.version)
    return opened.value.amount
  })

const policy = (overrides: Partial<Domain.PolicySnapshot> = {}): Domain.PolicySnapshot => ({
  perTransactionLimit: 1_000_000n,
  dailyLimit: 10_000_000n,
  hitlThreshold: null,
  timeZone: "UTC",
  ...overrides
})

/** A decision by its refusal's reason, or its tag. */
const name = (result: Domain.AuthorizeOutcome) => result._tag === "PolicyViolation" || result._tag === "Refused" ? result.reason : result._tag

export const guardianSuite = (target: TargetName) =>
  describe(target, () => {
    layer(makeTarget(target), { timeout: "90 seconds", excludeTestServices: true })("guardian", (it) => {
      it.effect("publishes the signer and encryption key derived from its secret", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const keys = GuardianKeys.fromSecret(Redacted.value(testSecret))
          assert.strictEqual(guardian.signer, keys.info.signer)
          assert.strictEqual(guardian.encryptionKey, keys.info.encryptionKey)
          const health = yield* guardian.client.health
          assert.deepStrictEqual(health, { ready: true, frozenAccounts: 0, alertCount: 0, alerts: [] })
        }))

      it.effect("authorizes a funded transfer with a ciphertext every party can check and a signature the contract accepts", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          yield* fund(alice, 1_000n)
          const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 250n })
          const result = yield* guardian.client.authorize(request)
          assert.strictEqual(result._tag, "Authorized")
          if (result._tag !== "Authorized") return
          const { ciphertext } = result
          assert.isDefined(ciphertext.toHandle)
          // Each party's own handle decrypts to the amount: C − s·D = a·G.
          const commitment = asPoint(ciphertext.commitment)
          assert.isTrue(ElGamal.matches(alice.keys.secretKey, commitment, asPoint(ciphertext.fromHandle), 250n))
          assert.isTrue(ElGamal.matches(bob.keys.secretKey, commitment, asPoint(ciphertext.toHandle ?? ""), 250n))
          assert.isFalse(ElGamal.matches(bob.keys.secretKey, commitment, asPoint(ciphertext.toHandle ?? ""), 251n))
          const digest = ElGamal.digest({
            commitment,
            handles: [asPoint(ciphertext.fromHandle), asPoint(ciphertext.toHandle ?? ""), asPoint(ciphertext.guardianHandle)]
          })
          assert.strictEqual(result.ciphertextDigest, digest)
          const typedData = Attestation.confidentialTransfer(Attestation.domain(chainId, getAddress(contract)), {
            from: alice.address,
            to: bob.address,
            transferId: request.transferId as Hex,
            nonce: request.nonce,
            ciphertextDigest: digest,
            sealedDigest: request.sealedDigest as Hex,
            deadline: request.deadline
          })
          const signer = Attestation.recoverSigner(typedData, result.signature as Hex)
          assert.isTrue(signer.ok && signer.value === guardian.signer)
          // Reserved, not yet moved: the confirmed balance is unchanged until settlement.
          assert.strictEqual(yield* balanceOf(alice), 1_000n)
          const settled = yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })
          assert.strictEqual(settled.status, "confirmed")
          assert.strictEqual(yield* balanceOf(alice), 750n)
          assert.strictEqual(yield* balanceOf(bob), 250n)
          const nonZero = yield* guardian.client.nonZero({ account: bob.address, assets: [{ chainId, contract }, { chainId, contract: "0x00000000000000000000000000000000000000ee" }] })
          assert.deepStrictEqual(nonZero.map((entry) => entry.nonZero), [true, false])
        }))

      it.effect("a public transfer signs PublicTransfer over (C, D_from, D_guardian) and pays out nothing confidential", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          yield* fund(alice, 500n)
          const request = publicRequest({ guardianKey: guardian.encryptionKey, from: alice, to: alice, amount: 200n })
          const result = yield* guardian.client.authorize(request)
          assert.strictEqual(result._tag, "Authorized")
          if (result._tag !== "Authorized") return
          assert.isUndefined(result.ciphertext.toHandle)
          const typedData = Attestation.publicTransfer(Attestation.domain(chainId, getAddress(contract)), {
            from: alice.address,
            to: alice.address,
            transferId: request.transferId as Hex,
            nonce: request.nonce,
            amount: 200n,
            ciphertextDigest: result.ciphertextDigest as Hex,
            deadline: request.deadline
          })
          const signer = Attestation.recoverSigner(typedData, result.signature as Hex)
          assert.isTrue(signer.ok && signer.value === guardian.signer)
          yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })
          assert.strictEqual(yield* balanceOf(alice), 300n)
          // A public amount that differs from the guardian's note is refused.
          const lying = publicRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 100n, publicAmount: 99n })
          const refused = yield* guardian.client.authorize(lying)
          assert.deepStrictEqual([refused._tag, refused._tag === "Refused" ? refused.reason : ""], ["Refused", "public_amount_mismatch"])
        }))

      it.effect("is idempotent per transfer id and refuses a reused transfer id or nonce", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          yield* fund(alice, 100n)
          const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 60n })
          const first = yield* guardian.client.authorize(request)
          const again = yield* guardian.client.authorize(request)
          assert.strictEqual(first._tag, "Authorized")
          assert.deepStrictEqual(again, first)
          // Reserved once: 40 remain available, so 41 is refused and 40 fits.
          const tooMuch = yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 41n }))
          assert.strictEqual(tooMuch._tag, "InsufficientBalance")
          const reusedId = yield* guardian.client.authorize(
            confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 10n, transferId: request.transferId as Hex })
          )
          assert.deepStrictEqual(reusedId._tag === "Refused" ? reusedId.reason : reusedId._tag, "transfer_id_reused")
          const reusedNonce = yield* guardian.client.authorize(
            confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 10n, nonce: request.nonce })
          )
          assert.deepStrictEqual(reusedNonce._tag === "Refused" ? reusedNonce.reason : reusedNonce._tag, "nonce_reused")
          // Settling twice moves the funds once.
          const settled = yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })
          const settledAgain = yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })
          const contradicted = yield* guardian.client.settle({ transferId: request.transferId, outcome: "failed" })
          assert.deepStrictEqual([settled.status, settledAgain.status, contradicted.status], ["confirmed", "confirmed", "confirmed"])
          assert.strictEqual(yield* balanceOf(alice), 40n)
          assert.strictEqual(yield* balanceOf(bob), 60n)
          // A replay after settlement still answers the recorded attestation, reserving nothing.
          assert.deepStrictEqual(yield* guardian.client.authorize(request), first)
          const fits = yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 40n }))
          assert.strictEqual(fits._tag, "Authorized")
        }))

      it.effect("a failed settlement releases the reservation; an unknown transfer id is not found", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          yield* fund(alice, 100n)
          const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 100n })
          assert.strictEqual((yield* guardian.client.authorize(request))._tag, "Authorized")
          assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 1n })))._tag, "InsufficientBalance")
          assert.strictEqual((yield* guardian.client.settle({ transferId: request.transferId, outcome: "failed" })).status, "failed")
          assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 100n })))._tag, "Authorized")
          assert.strictEqual(yield* balanceOf(alice), 100n)
          const missing = yield* Effect.flip(guardian.client.settle({ transferId: newTransferId(), outcome: "confirmed" }))
          assert.strictEqual(missing._tag, "ReservationNotFound")
        }))

      it.effect("refuses malformed and inconsistent requests, each with its reason", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          yield* fund(alice, 1_000n)
          const key = guardian.encryptionKey
          const base = confidentialRequest({ guardianKey: key, from: alice, to: bob, amount: 10n })
          const otherTransfersNote = confidentialRequest({ guardianKey: key, from: alice, to: bob, amount: 10n })
          const tampered = base.guardianNote.slice(0, -2) + (base.guardianNote.endsWith("00") ? "01" : "00")
          const { toKey: _toKey, ...withoutToKey } = base
          const offCurve = `0x${"00".repeat(63)}05`
          const cases: ReadonlyArray<readonly [string, Domain.AuthorizeRequest]> = [
            ["note_invalid", { ...base, guardianNote: otherTransfersNote.guardianNote }],
            ["note_invalid", { ...base, guardianNote: tampered }],
            ["note_invalid", confidentialRequest({ guardianKey: bob.keys.publicKey ? `0x${Buffer.from(bob.keys.publicKey).toString("hex")}` : key, from: alice, to: bob, amount: 10n })],
            ["inputs_inconsistent", withoutToKey],
            ["inputs_inconsistent", { ...base, amount: 10n }],
            ["recipient_key_invalid", { ...base, toKey: offCurve }],
            ["sender_key_invalid", { ...base, fromKey: `0x${"00".repeat(64)}` }],
            ["self_transfer", confidentialRequest({ guardianKey: key, from: alice, to: alice, amount: 10n })],
            ["deadline_out_of_range", confidentialRequest({ guardianKey: key, from: alice, to: bob, amount: 10n, deadline: nowSeconds() - 1n })],
            ["deadline_out_of_range", confidentialRequest({ guardianKey: key, from: alice, to: bob, amount: 10n, deadline: nowSeconds() + 100_000n })],
            ["amount_zero", confidentialRequest({ guardianKey: key, from: alice, to: bob, amount: 0n })],
            ["time_zone_invalid", confidentialRequest({ guardianKey: key, from: alice, to: bob, amount: 10n, agent: { policy: policy({ timeZone: "Mars/Olympus_Mons" }), approved: false } })]
          ]
          for (const [reason, request] of cases) {
            const result = yield* guardian.client.authorize(request)
            assert.deepStrictEqual(result._tag === "Refused" ? result.reason : result._tag, reason, reason)
          }
          // Nothing was reserved by any refusal: the whole balance is still available.
          assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({ guardianKey: key, from: alice, to: bob, amount: 1_000n })))._tag, "Authorized")
        }))

      it.effect("credits are idempotent per credit id; a reused id with other content fails", () =>
        Effect.gen(function*() {
          const { client } = yield* TestGuardian
          const carol = newParty()
          const creditId = `shield-${newTransferId()}`
          const first = yield* client.credit({ chainId, contract, account: carol.address, amount: 70n, creditId })
          const second = yield* client.credit({ chainId, contract, account: carol.address, amount: 70n, creditId })
          assert.deepStrictEqual([first.status, second.status], ["applied", "duplicate"])
          const conflict = yield* Effect.flip(client.credit({ chainId, contract, account: carol.address, amount: 71n, creditId }))
          assert.strictEqual(conflict._tag, "CreditIdReused")
          assert.strictEqual(yield* balanceOf(carol), 70n)
        }))

      it.effect("checks an agent's transfer in D25's order: per-transaction, daily, balance, approval threshold", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const owner = newParty()
          const agent = newParty()
          const bob = newParty()
          yield* fund(agent, 100n)
          const snapshot = policy({ perTransactionLimit: 80n, dailyLimit: 150n, hitlThreshold: 50n })
          const attempt = (amount: bigint, approved = false) =>
            guardian.client.authorize(confidentialRequest({
              guardianKey: guardian.encryptionKey,
              from: agent,
              fromKeyOwner: owner,
              to: bob,
              amount,
              agent: { policy: snapshot, approved }
            }))
          // 200 breaks every rule; per-transaction comes first.
          assert.strictEqual(name(yield* attempt(200n)), "per_transaction_limit_exceeded")
          // Spend 50 (at the threshold: not held, strictly greater holds).
          assert.strictEqual(name(yield* attempt(50n)), "Authorized")
          // 75 is within per-transaction, within daily (125 ≤ 150), above the remaining balance (50) and the threshold.
          assert.strictEqual(name(yield* attempt(75n)), "InsufficientBalance")
          yield* fund(agent, 1_000n)
          // Now the balance suffices and 75 is above the threshold: held, nothing reserved.
          assert.strictEqual(name(yield* attempt(75n)), "HoldForApproval")
          // The owner's approval skips the threshold.
          assert.strictEqual(name(yield* attempt(75n, true)), "Authorized")
          // 50 + 75 spent today; 26 more breaks the daily limit before the balance or threshold is looked at.
          assert.strictEqual(name(yield* attempt(26n)), "daily_limit_exceeded")
          assert.strictEqual(name(yield* attempt(25n)), "Authorized")
        }))

      it.effect("decides an actor's turn in its order: each sees the reservations before it; a refused, held or malformed one blocks nothing (D73)", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const owner = newParty()
          const agent = newParty()
          const bob = newParty()
          yield* fund(agent, 100n)
          const snapshot = policy({ perTransactionLimit: 90n, dailyLimit: 1_000n, hitlThreshold: 45n })
          const request = (amount: bigint) =>
            confidentialRequest({ guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount, agent: { policy: snapshot, approved: false } })
          const first = request(40n)
          // Its note sealed for another guardian: refused before any lock, in its own place.
          const broken = { ...request(5n), guardianNote: confidentialRequest({ guardianKey: bytesToHex(bob.keys.publicKey), from: agent, to: bob, amount: 5n }).guardianNote }
          const turn = [
            first, // 100 available: reserved, 60 left
            request(70n), // above the 60 left (the reservation before it counts)
            request(50n), // within 60, above the threshold: held, reserves nothing
            broken,
            request(95n), // above the per-transaction limit
            request(45n), // at the threshold: 15 left
            request(16n), // above the 15 left
            request(15n), // exactly what is left
            first // the first again: replayed, not reserved twice
          ]
          const results = yield* guardian.client.authorizeMany(turn)
          assert.deepStrictEqual(results.map(name), [
            "Authorized",
            "InsufficientBalance",
            "HoldForApproval",
            "note_invalid",
            "per_transaction_limit_exceeded",
            "Authorized",
            "InsufficientBalance",
            "Authorized",
            "Authorized"
          ])
          assert.deepStrictEqual(results[8], results[0])
          // Alone again, the same requests replay their decisions: nothing was decided twice.
          assert.strictEqual(name(yield* guardian.client.authorize(request(1n))), "InsufficientBalance")
          assert.deepStrictEqual(yield* guardian.client.authorize(turn[5]!), results[5])
        }))

      it.effect("one decision per transfer id: a decided box asked about under another policy is refused, approvals re-decide a few times", () =>
        Effect.gen(function*() {
          // The attack this closes: whoever holds a box (an api tier) replays it with invented
          // policies; before, every answer (per-transaction limit exceeded or not) was a bit of
          // the amount, and none of them reserved anything, so ~64 questions gave the amount.
          const guardian = yield* TestGuardian
          const owner = newParty()
          const agent = newParty()
          const bob = newParty()
          yield* fund(agent, 1_000n)
          const snapshot = policy({ perTransactionLimit: 800n, dailyLimit: 5_000n, hitlThreshold: 50n })
          const held = confidentialRequest({
            guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount: 75n, agent: { policy: snapshot, approved: false }
          })
          assert.strictEqual(name(yield* guardian.client.authorize(held)), "HoldForApproval")
          // The same box under a probing policy, not an approval: refused, whatever the amount.
          for (const limit of [70n, 80n]) {
            const probe = { ...held, agent: { policy: policy({ ...snapshot, perTransactionLimit: limit }), approved: false } }
            assert.strictEqual(name(yield* guardian.client.authorize(probe)), "transfer_id_reused")
          }
          // The same request again is decided again (a retry), with the same answer.
          assert.strictEqual(name(yield* guardian.client.authorize(held)), "HoldForApproval")

          // A refusal is a decision too: a box refused for its balance cannot be asked about again.
          const tooMuch = confidentialRequest({
            guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount: 2_000n, agent: { policy: policy({ ...snapshot, perTransactionLimit: 5_000n }), approved: false }
          })
          assert.strictEqual(name(yield* guardian.client.authorize(tooMuch)), "InsufficientBalance")
          const limitProbe = { ...tooMuch, agent: { policy: policy({ ...snapshot, perTransactionLimit: 1_500n }), approved: false } }
          assert.strictEqual(name(yield* guardian.client.authorize(limitProbe)), "transfer_id_reused")
          assert.strictEqual(name(yield* guardian.client.authorize(tooMuch)), "InsufficientBalance")

          // An owner's approvals of the held box re-decide it, each under the policy in force:
          // eight different ones in all, then it is refused and the operator is alerted.
          const approvals = [10n, 20n, 30n, 40n, 50n, 60n, 70n, 74n].map((limit) =>
            ({ ...held, agent: { policy: policy({ ...snapshot, perTransactionLimit: limit }), approved: true } }))
          for (const approval of approvals) {
            assert.strictEqual(name(yield* guardian.client.authorize(approval)), "per_transaction_limit_exceeded")
          }
          const ninth = { ...held, agent: { policy: snapshot, approved: true } }
          assert.strictEqual(name(yield* guardian.client.authorize(ninth)), "redecisions_exhausted")
          const health = yield* guardian.client.health
          assert.isTrue(health.alerts.some((entry) => entry.kind === "decision_conflict" && entry.account.toLowerCase() === agent.address.toLowerCase()))
          // Nothing was reserved by any of it: the whole balance is still there to spend.
          assert.strictEqual(yield* balanceOf(agent), 1_000n)
        }))

      it.effect("an owner's approval of a held box is authorized once, and replayed to a retry", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const owner = newParty()
          const agent = newParty()
          const bob = newParty()
          yield* fund(agent, 500n)
          const snapshot = policy({ perTransactionLimit: 400n, dailyLimit: 1_000n, hitlThreshold: 50n })
          const held = confidentialRequest({
            guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount: 120n, agent: { policy: snapshot, approved: false }
          })
          assert.strictEqual((yield* guardian.client.authorize(held))._tag, "HoldForApproval")
          const approval = { ...held, agent: { policy: snapshot, approved: true } }
          const first = yield* guardian.client.authorize(approval)
          assert.strictEqual(first._tag, "Authorized")
          assert.deepStrictEqual(yield* guardian.client.authorize(approval), first)
          yield* guardian.client.settle({ transferId: held.transferId, outcome: "confirmed" })
          assert.strictEqual(yield* balanceOf(agent), 380n)
        }))

      it.effect("an approval whose attestation expired unused is decided afresh under the same nonce, its spend counted once (D45)", () =>
        Effect.gen(function*() {
          // The api server that asked died before it recorded the answer; its retry comes with a
          // fresh deadline. No chain endpoint here: time alone decides the first one is dead.
          const guardian = yield* TestGuardian
          const owner = newParty()
          const agent = newParty()
          const bob = newParty()
          yield* fund(agent, 500n)
          // A daily limit that two counts of the amount would break (120 + 120 > 200).
          const snapshot = policy({ perTransactionLimit: 400n, dailyLimit: 200n, hitlThreshold: 50n })
          const held = confidentialRequest({
            guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount: 120n, agent: { policy: snapshot, approved: false }
          })
          assert.strictEqual((yield* guardian.client.authorize(held))._tag, "HoldForApproval")
          const first = { ...held, deadline: nowSeconds() + 4n, agent: { policy: snapshot, approved: true } }
          const lost = yield* guardian.client.authorize(first)
          assert.strictEqual(lost._tag, "Authorized")
          // While the first attestation can still be mined, no second one: refused until its deadline.
          const retry = { ...first, deadline: nowSeconds() + 600n }
          const early = yield* guardian.client.authorize(retry)
          assert.deepStrictEqual(
            early._tag === "Refused" ? [early.reason, early.liveUntil] : [early._tag],
            ["earlier_attestation_live", first.deadline]
          )
          // Deadline (≤ 4 s away: room for a loaded machine to make the early retry before it) + margin 0:
          // dead by time alone (see the expiry test below).
          yield* Effect.sleep("5500 millis")
          const fresh = yield* guardian.client.authorize(retry)
          assert.strictEqual(fresh._tag, "Authorized")
          if (fresh._tag !== "Authorized" || lost._tag !== "Authorized") return
          assert.strictEqual(fresh.deadline, retry.deadline)
          assert.notStrictEqual(fresh.signature, lost.signature)
          assert.deepStrictEqual(yield* guardian.client.authorize(retry), fresh)
          // The first request is not answered with its dead attestation any more.
          assert.strictEqual((yield* guardian.client.authorize(first))._tag, "Refused")
          // Reserved once: the other 380 can move, no more; spent today 120, once (200 - 120 = 80 left).
          const name = (result: Domain.AuthorizeResult) => result._tag === "PolicyViolation" ? result.reason : result._tag
          const small = (amount: bigint) =>
            confidentialRequest({ guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount, agent: { policy: snapshot, approved: false } })
          assert.strictEqual(name(yield* guardian.client.authorize(small(81n))), "daily_limit_exceeded")
          assert.strictEqual(name(yield* guardian.client.authorize(small(50n))), "Authorized")
          assert.strictEqual((yield* guardian.client.settle({ transferId: held.transferId, outcome: "confirmed" })).status, "confirmed")
          assert.strictEqual(yield* balanceOf(agent), 380n)
        }))

      it.effect("an approval decided afresh refuses what the balance of the moment does not cover, and reserves nothing (D45)", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const owner = newParty()
          const agent = newParty()
          const bob = newParty()
          yield* fund(agent, 150n)
          const snapshot = policy({ perTransactionLimit: 400n, dailyLimit: 1_000n, hitlThreshold: 50n })
          const held = confidentialRequest({
            guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount: 120n, agent: { policy: snapshot, approved: false }
          })
          assert.strictEqual((yield* guardian.client.authorize(held))._tag, "HoldForApproval")
          const first = { ...held, deadline: nowSeconds() + 4n, agent: { policy: snapshot, approved: true } }
          assert.strictEqual((yield* guardian.client.authorize(first))._tag, "Authorized")
          yield* Effect.sleep("5500 millis")
          // Meanwhile the agent spent most of its balance (the expired reservation no longer holds it).
          const spend = confidentialRequest({
            guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount: 50n, agent: { policy: snapshot, approved: false }
          })
          assert.strictEqual((yield* guardian.client.authorize(spend))._tag, "Authorized")
          const retry = { ...first, deadline: nowSeconds() + 600n }
          assert.strictEqual((yield* guardian.client.authorize(retry))._tag, "InsufficientBalance")
          // Refused, so nothing held: the remaining 100 can still move.
          assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({
            guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount: 50n, agent: { policy: snapshot, approved: false }
          })))._tag, "Authorized")
          assert.strictEqual((yield* guardian.client.settle({ transferId: spend.transferId, outcome: "confirmed" })).status, "confirmed")
          assert.strictEqual(yield* balanceOf(agent), 100n)
        }))

      it.effect("100 concurrent authorizations on one account never overdraw it", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          yield* fund(alice, 1_000n)
          const requests = Array.from({ length: 100 }, () =>
            confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 37n }))
          const postsBefore = guardian.httpRequests()
          const results = yield* Effect.forEach(requests, (request) => guardian.client.authorize(request), { concurrency: "unbounded" })
          if (guardian.name === "http/postgres") {
            // Calls made together share POSTs (GuardianRpc.rpcBatching: up to 64 each; 2 when the
            // scheduler does not yield in between, a few more on a loaded machine, 100 unbatched),
            // and each still gets its own answer (checked below).
            assert.isAtMost(guardian.httpRequests() - postsBefore, 25)
          }
          const authorized = results.filter((result) => result._tag === "Authorized").length
          const refused = results.filter((result) => result._tag === "InsufficientBalance").length
          // floor(1000 / 37) = 27: exactly as many as fit, and every other one refused.
          assert.deepStrictEqual([authorized, refused], [27, 73])
          const authorizedRequests = requests.filter((_, index) => results[index]?._tag === "Authorized")
          yield* Effect.forEach(authorizedRequests, (request) =>
            guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" }), { concurrency: 10 })
          assert.strictEqual(yield* balanceOf(alice), 1_000n - 27n * 37n)
          assert.strictEqual(yield* balanceOf(bob), 27n * 37n)
        }))

      it.effect("refunds (D43): only of a settled confidential transfer between the parties, reversed; concurrent ones never exceed it", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          const carol = newParty()
          yield* fund(alice, 1_000n)
          // Bob's own funds are ample: only the refund rule can stop his refunds.
          yield* fund(bob, 1_000n)
          const paid = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 100n })
          assert.strictEqual((yield* guardian.client.authorize(paid))._tag, "Authorized")
          const refundOf = (amount: bigint, original: Domain.AuthorizeRequest = paid, from: Party = bob, to: Party = alice) => ({
            ...confidentialRequest({ guardianKey: guardian.encryptionKey, from, to, amount }),
            refundOf: original.transferId
          })
          const reasonOf = (result: Domain.AuthorizeResult) => (result._tag === "Refused" ? result.reason : result._tag)
          // Not settled yet: a state that passes.
          assert.strictEqual(reasonOf(yield* guardian.client.authorize(refundOf(10n))), "refund_original_unsettled")
          yield* guardian.client.settle({ transferId: paid.transferId, outcome: "confirmed" })
          // Another pair of parties, an unknown original, a public refund: refused before any amount rule.
          assert.strictEqual(reasonOf(yield* guardian.client.authorize(refundOf(10n, paid, bob, carol))), "refund_original_unknown")
          assert.strictEqual(reasonOf(yield* guardian.client.authorize(refundOf(10n, paid, carol, alice))), "refund_original_unknown")
          assert.strictEqual(reasonOf(yield* guardian.client.authorize({ ...refundOf(10n), refundOf: newTransferId() })), "refund_original_unknown")
          const publicRefund = { ...publicRequest({ guardianKey: guardian.encryptionKey, from: bob, to: alice, amount: 10n }), refundOf: paid.transferId }
          assert.strictEqual(reasonOf(yield* guardian.client.authorize(publicRefund)), "inputs_inconsistent")

          // Twenty at once, 30 each, of 100: three fit.
          const racing = Array.from({ length: 20 }, () => refundOf(30n))
          const results = yield* Effect.forEach(racing, (request) => guardian.client.authorize(request), { concurrency: "unbounded" })
          assert.deepStrictEqual(
            [results.filter((r) => r._tag === "Authorized").length, results.filter((r) => r._tag === "RefundExceeded").length],
            [3, 17]
          )
          // A retry of a refused one is decided again, and refused again.
          const refusedIndex = results.findIndex((r) => r._tag === "RefundExceeded")
          assert.strictEqual((yield* guardian.client.authorize(racing[refusedIndex]!))._tag, "RefundExceeded")
          // A failed refund gives its share back; confirmed and in-flight ones keep theirs.
          const authorized = racing.filter((_, index) => results[index]?._tag === "Authorized")
          yield* guardian.client.settle({ transferId: authorized[0]!.transferId, outcome: "failed" })
          yield* guardian.client.settle({ transferId: authorized[1]!.transferId, outcome: "confirmed" })
          assert.strictEqual((yield* guardian.client.authorize(refundOf(41n)))._tag, "RefundExceeded")
          const last = refundOf(40n)
          assert.strictEqual((yield* guardian.client.authorize(last))._tag, "Authorized")
          assert.strictEqual((yield* guardian.client.authorize(refundOf(1n)))._tag, "RefundExceeded")
          yield* Effect.forEach([authorized[2]!, last], (request) => guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" }))
          // 100 went to Bob and 100 came back.
          assert.strictEqual(yield* balanceOf(alice), 1_000n)
          assert.strictEqual(yield* balanceOf(bob), 1_000n)
        }))

      it.effect("concurrent twins and reused nonces: each transfer id decided once, each nonce attested once", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          yield* fund(alice, 1_000n)
          const originals = Array.from({ length: 10 }, (_, index) =>
            confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: BigInt(10 + index) }))
          // Another transfer id under each original's nonce, for another amount.
          const reusers = originals.map((original) =>
            confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 5n, nonce: original.nonce }))
          // Sent together (one group when the guardian is free): each original, its twin, and its nonce's reuser.
          const results = yield* Effect.forEach([...originals, ...originals, ...reusers], (request) => guardian.client.authorize(request), {
            concurrency: "unbounded"
          })
          const reasonOf = (result: typeof results[number] | undefined) => result?._tag === "Refused" ? result.reason : result?._tag
          let reserved = 0n
          for (const index of originals.keys()) {
            const [first, twin, reuser] = [results[index], results[index + 10], results[index + 20]]
            assert.deepStrictEqual(twin, first, "a twin is answered as its original")
            // Whichever came first took the nonce; the other is refused for it.
            const reasons = [reasonOf(first), reasonOf(reuser)].sort()
            assert.deepStrictEqual(reasons, ["Authorized", "nonce_reused"])
            reserved += first?._tag === "Authorized" ? BigInt(10 + index) : 5n
          }
          const authorized = [...originals, ...reusers].filter((_, index) => results[index < 10 ? index : index + 10]?._tag === "Authorized")
          assert.strictEqual(authorized.length, 10)
          // A request after them sees exactly the reserved total: what is left fits, one more unit does not.
          const tooMuch = yield* guardian.client.authorize(
            confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 1_000n - reserved + 1n })
          )
          assert.strictEqual(tooMuch._tag, "InsufficientBalance")
          yield* Effect.forEach(authorized, (request) => guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" }), {
            concurrency: "unbounded"
          })
          assert.strictEqual(yield* balanceOf(alice), 1_000n - reserved)
          assert.strictEqual(yield* balanceOf(bob), reserved)
        }))

      it.effect("concurrent settlements of several accounts and API keys book each key's total and count exactly", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const carol = newParty()
          const bob = newParty()
          yield* fund(alice, 1_000n)
          yield* fund(carol, 1_000n)
          const requests = Array.from({ length: 30 }, (_, index) => {
            const from = index % 3 === 2 ? carol : alice
            const apiKey = index % 3 === 0 ? "key_alice_1" : index % 3 === 1 ? "key_alice_2" : "key_carol"
            return { ...confidentialRequest({ guardianKey: guardian.encryptionKey, from, to: bob, amount: BigInt(index + 1) }), apiKey }
          })
          const results = yield* Effect.forEach(requests, (request) => guardian.client.authorize(request), { concurrency: "unbounded" })
          assert.isTrue(results.every((result) => result._tag === "Authorized"))
          // Together: the settlements of one group change several balances and key totals at once.
          yield* Effect.forEach(requests, (request) => guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" }), {
            concurrency: "unbounded"
          })
          const totalsOf = (party: Party) =>
            Effect.gen(function*() {
              const account = { chainId, contract: getAddress(contract), account: party.address }
              const sealed = yield* guardian.client.sealedKeyTotals({ chainId, contract, account: party.address, publicKey: bytesToHex(party.keys.publicKey) })
              return Object.fromEntries(sealed.map(({ apiKeyId, sealedTotal }) => {
                const opened = Note.openKeyTotal(party.keys, hexToBytes(sealedTotal as Hex), { ...account, apiKeyId })
                if (!opened.ok) throw new Error(opened.reason)
                return [apiKeyId, [opened.value.amount, opened.value.transfers]]
              }))
            })
          const sumOf = (first: number) => Array.from({ length: 10 }, (_, index) => BigInt(first + 3 * index)).reduce((a, b) => a + b)
          assert.deepStrictEqual(yield* totalsOf(alice), { key_alice_1: [sumOf(1), 10n], key_alice_2: [sumOf(2), 10n] })
          assert.deepStrictEqual(yield* totalsOf(carol), { key_carol: [sumOf(3), 10n] })
          assert.strictEqual(yield* balanceOf(alice), 1_000n - sumOf(1) - sumOf(2))
          assert.strictEqual(yield* balanceOf(carol), 1_000n - sumOf(3))
          assert.strictEqual(yield* balanceOf(bob), sumOf(1) + sumOf(2) + sumOf(3))
        }))

      it.effect("100 concurrent agent authorizations at the daily cap overshoot it by exactly 0 base units", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const owner = newParty()
          const agent = newParty()
          const bob = newParty()
          yield* fund(agent, 100_000n)
          const snapshot = policy({ perTransactionLimit: 1_000n, dailyLimit: 1_000n })
          const requests = Array.from({ length: 100 }, () =>
            confidentialRequest({
              guardianKey: guardian.encryptionKey,
              from: agent,
              fromKeyOwner: owner,
              to: bob,
              amount: 17n,
              agent: { policy: snapshot, approved: false }
            }))
          const results = yield* Effect.forEach(requests, (request) => guardian.client.authorize(request), { concurrency: "unbounded" })
          const authorized = results.filter((result) => result._tag === "Authorized").length
          const overDaily = results.filter((result) => result._tag === "PolicyViolation" && result.reason === "daily_limit_exceeded").length
          // floor(1000 / 17) = 58 → 986 spent; a 59th would make 1003.
          assert.deepStrictEqual([authorized, overDaily], [58, 42])
          const spent = BigInt(authorized) * 17n
          assert.isTrue(spent <= 1_000n && 1_000n - spent < 17n)
          // A failed transfer gives its share of the day back; a held or refused one never took any.
          const firstAuthorized = requests.find((_, index) => results[index]?._tag === "Authorized")
          assert.isDefined(firstAuthorized)
          yield* guardian.client.settle({ transferId: firstAuthorized?.transferId ?? "", outcome: "failed" })
          const retry = yield* guardian.client.authorize(confidentialRequest({
            guardianKey: guardian.encryptionKey, from: agent, fromKeyOwner: owner, to: bob, amount: 17n, agent: { policy: snapshot, approved: false }
          }))
          assert.strictEqual(retry._tag, "Authorized")
        }))

      it.effect("a reservation never settled expires after its deadline and releases the funds", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          yield* fund(alice, 300n)
          const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 300n, deadline: nowSeconds() + 2n })
          assert.strictEqual((yield* guardian.client.authorize(request))._tag, "Authorized")
          assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 1n })))._tag, "InsufficientBalance")
          // Deadline (≤ 2 s away) + margin 0, swept every 200 ms; no chain endpoint: time alone decides.
          // Two whole seconds ahead, not one: building the request on a loaded machine can cross a
          // second boundary, and a deadline that is already the current second is refused.
          yield* Effect.sleep("3500 millis")
          assert.strictEqual((yield* guardian.client.settle({ transferId: request.transferId, outcome: "failed" })).status, "expired")
          assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 300n })))._tag, "Authorized")
          assert.strictEqual(yield* balanceOf(alice), 300n)
        }))

      it.effect("a storage dump and the logs contain none of the canary amounts", () =>
        Effect.gen(function*() {
          const guardian = yield* TestGuardian
          const alice = newParty()
          const bob = newParty()
          const canaries = [987_654_321_987n, 123_456_789_123n, 555_444_333_222n]
          const [funded, sent, pending] = canaries as [bigint, bigint, bigint]
          yield* fund(alice, funded + pending)
          const settledRequest = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: sent })
          assert.strictEqual((yield* guardian.client.authorize(settledRequest))._tag, "Authorized")
          yield* guardian.client.settle({ transferId: settledRequest.transferId, outcome: "confirmed" })
          const pendingRequest = confidentialRequest({
            guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: pending,
            agent: { policy: policy({ perTransactionLimit: 1_000_000_000_000n, dailyLimit: 1_000_000_000_000n }), approved: false }
          })
          assert.strictEqual((yield* guardian.client.authorize(pendingRequest))._tag, "Authorized")
          // Balances now hold funded + pending − sent and bob's sent: derived values are canaries too.
          const derived = [funded + pending - sent, funded + pending, sent]
          const dump = (yield* guardian.dumpStorage).toLowerCase()
          assert.isAbove(dump.length, 0)
          assert.include(dump, settledRequest.transferId.slice(2).toLowerCase().slice(0, 16))
          // The guardian logged these transfers (by id), so the log search below is not vacuous.
          assert.isTrue(guardian.logs.some((line) => line.includes(pendingRequest.transferId.toLowerCase())))
          const files = guardian.storageFiles()
          for (const amount of [...canaries, ...derived]) {
            const decimal = amount.toString()
            const hex = amount.toString(16)
            const usdg = `${amount / 1_000_000n}.${(amount % 1_000_000n).toString().padStart(6, "0")}`
            for (const text of [decimal, hex, usdg]) {
              assert.notInclude(dump, text, `the dump shows ${text}`)
              for (const line of guardian.logs) assert.notInclude(line.toLowerCase(), text, `a log line shows ${text}`)
            }
            const u64 = Buffer.alloc(8)
            u64.writeBigUInt64BE(amount)
            const u64le = Buffer.alloc(8)
            u64le.writeBigUInt64LE(amount)
            for (const file of files) {
              for (const needle of [u64, u64le, Buffer.from(decimal)]) {
                assert.strictEqual(file.indexOf(needle), -1, `a storage file holds ${decimal}`)
              }
            }
          }
        }))
    })
  })
