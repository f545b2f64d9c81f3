/**
 * D55: an account's encryption key replaced and its balance re-encrypted to the new key. The
 * guardian is the one party that knows the balance without the old key, so it makes the new
 * ciphertext and attests it; the contract (`rotateEncryptionKey`) also wants the account's own
 * signature over the same `KeyRotation` digest and a proof of possession of the new key, so the
 * guardian alone replaces nothing.
 *
 * The step refuses (`KeyRotationBusy`, retry later) while anything could change the balance
 * under the rotation: an open reservation of the account (an attested debit not yet resolved),
 * or books that do not match the chain (a credit not yet booked). The attestation binds the
 * balance it read (`previousBalanceDigest`): if the balance changes before it is mined, the
 * contract refuses it, and nothing is lost. Once attested, the account is held
 * (`rotationsPending`, `rotationHold`) until the rotation is reported mined (`ForgetKey`) or its
 * deadline passes: a transfer to or from it attested meanwhile and mined after the rotation would
 * add a handle under the old key to the new balance. The hold is in memory: a guardian restart
 * within the window forgets it (D55's record names the gap), as does a reservation committed in
 * the instant between the hold and the check of open reservations.
 *
 * @since 0.12.0
 */
import { TypedData } from "@pps/contracts"
import { ElGamal, EncryptionKey, Point } from "@pps/crypto"
import { Effect } from "effect"
import { bytesToHex, getAddress, type Hex, hexToBytes, keccak256 } from "viem"
import { type ForgetKeyRequest, GuardianError, KeyRotationBusy, type KeyRotationRequest } from "../Domain.ts"
import * as Invariant from "../internal/Invariant.ts"
import { noEndpoint, storage } from "./Failures.ts"
import { type GuardianContext, refFor } from "./GuardianContext.ts"
import { forgetKnownKey, refKeyOf } from "./PartyKeys.ts"

/** The EVM words of a 64-byte point encoding. */
const wordsOf = (point: Uint8Array) => ({ x: BigInt(bytesToHex(point.subarray(0, 32))), y: BigInt(bytesToHex(point.subarray(32, 64))) })

/**
 * @since 0.12.0
 * @category steps
 */
export const keyRotation = Effect.fn("Guardian.keyRotation")(function*(context: GuardianContext, request: typeof KeyRotationRequest.Type) {
  const account = getAddress(request.account)
  const contract = getAddress(request.contract)
  const ref = refFor(request.chainId, contract, account)
  if (!context.chain.knows(request.chainId)) return yield* Effect.fail(noEndpoint(request.chainId))
  const parsed = EncryptionKey.parsePublicKey(hexToBytes(request.newKey as Hex))
  if (!parsed.ok) return yield* new KeyRotationBusy({ account: request.account, reason: "new_key_invalid" })
  const holdKey = refKeyOf(ref)
  return yield* context.accountLane.alone(ref, Effect.gen(function*() {
    // Held first, then checked: an authorization arriving now waits for the rotation.
    context.rotationsPending.set(holdKey, Number(request.deadline) * 1000)
    const open = yield* storage(context.store.openReservationsOf(ref, 1))
    if (open.length > 0) return yield* new KeyRotationBusy({ account: request.account, reason: "reservations_open" })
    const head = yield* context.chain.head(request.chainId)
    const onChain = yield* context.chain.encryptedBalance(request.chainId, contract, account, head.blockNumber)
    const balance = yield* storage(context.store.readBalance(ref))
    const commitment = Point.parse(onChain.commitment, { allowIdentity: true })
    const handle = Point.parse(onChain.guardianHandle, { allowIdentity: true })
    const matched = balance.confirmed >= 0n && commitment.ok && handle.ok &&
      ElGamal.matches(context.keys.encryption.secretKey, commitment.value, handle.value, balance.confirmed)
    if (!matched) return yield* new KeyRotationBusy({ account: request.account, reason: "books_behind_chain" })
    // The balance under a fresh opening, for the new key and the guardian's own (the contract's order).
    const ciphertext = ElGamal.encryptWith(ElGamal.newOpening(balance.confirmed), [parsed.value, context.keys.encryption.publicKey])
    const [ownerHandle, guardianHandle] = ciphertext.handles
    const previousBalanceDigest = keccak256(new Uint8Array([...onChain.commitment, ...onChain.ownerHandle, ...onChain.guardianHandle]))
    const balanceDigest = ElGamal.digest(ciphertext)
    const key = wordsOf(parsed.value)
    const signature = yield* Effect.tryPromise(() =>
      context.signerAccount.signTypedData({
        domain: TypedData.domain(Number(request.chainId), contract),
        types: TypedData.keyRotationTypes,
        primaryType: "KeyRotation",
        message: {
          account,
          nonce: request.nonce,
          keyX: key.x,
          keyY: key.y,
          previousBalanceDigest,
          balanceDigest,
          deadline: request.deadline
        }
      })
    ).pipe(Invariant.orDie("the guardian's local signing key signs any well-formed typed data"))
    // The account's key will change: forget the one remembered, so the next lookup reads the chain.
    forgetKnownKey(context.partyKeys, ref)
    yield* Effect.logInfo("key rotation attested").pipe(Effect.annotateLogs({ account: ref.account, nonce: request.nonce.toString() }))
    return {
      commitment: bytesToHex(ciphertext.commitment),
      ownerHandle: bytesToHex(ownerHandle!),
      guardianHandle: bytesToHex(guardianHandle!),
      previousBalanceDigest,
      balanceDigest,
      guardianSignature: signature
    }
    // Nothing attested (busy, a chain or storage failure): the account's transfers flow again.
  }).pipe(Effect.onError(() => Effect.sync(() => context.rotationsPending.delete(holdKey)))))
})

/**
 * After a rotation was mined: the account's remembered key is forgotten (the next lookup reads
 * the new one from the chain's registry).
 *
 * @since 0.12.0
 * @category steps
 */
export const forgetPartyKey = (context: GuardianContext, request: typeof ForgetKeyRequest.Type) =>
  Effect.sync(() => {
    const ref = refFor(request.chainId, request.contract, request.account)
    forgetKnownKey(context.partyKeys, ref)
    context.rotationsPending.delete(refKeyOf(ref))
  })

/**
 * Refuses, as a retryable outage, an authorization naming an account whose rotation is attested
 * and neither reported mined nor past its deadline.
 *
 * @since 0.12.0
 * @category steps
 */
export const rotationHold = (context: GuardianContext, request: { readonly chainId: bigint; readonly contract: string; readonly from: string; readonly to: string }, nowMs: number) =>
  Effect.suspend(() => {
    if (context.rotationsPending.size === 0) return Effect.void
    for (const party of [request.from, request.to]) {
      const key = refKeyOf(refFor(request.chainId, request.contract, party))
      const until = context.rotationsPending.get(key)
      if (until === undefined) continue
      if (until < nowMs) {
        context.rotationsPending.delete(key)
        continue
      }
      return Effect.fail(new GuardianError({ reason: "unavailable", message: "a party's encryption key is being rotated; retry shortly", retryable: true }))
    }
    return Effect.void
  })
