/**
 * D55: a holder replaces its encryption key, or recovers after losing it, and keeps its balance.
 *
 * Nothing here needs the old key: the guardian knows the balance and re-encrypts it to the new
 * key. So rotation and recovery are one operation; what differs is how the holder proves it is
 * the holder: its API key, its dashboard passkey, or (having lost both) an operator's invite,
 * which enrolls a new passkey (D41) that then rotates. Per asset contract:
 *
 * 1. the new key's proof of possession (bound to chain, contract and the account's wallet) is
 *    checked here, as a registration's is (the contract checks it again);
 * 2. the guardian re-encrypts the balance to the new key and attests it (`KeyRotation`), bound to
 *    the balance it replaces and to one of the account's replay nonces; it refuses while the
 *    balance could move under it (503 here: retry);
 * 3. the account's custodial wallet signs the same `KeyRotation` digest;
 * 4. `rotateEncryptionKey` goes to the chain through settlement, and is awaited;
 * 5. the row holds the new key and every api node forgets the old one (RegisteredKeyCache.ts);
 *    then the guardian lifts its hold on the account's transfers and forgets the old key.
 *
 * D68: the owner's rotation carries its agents. An agent wallet has no registered key; its balance
 * is encrypted to the key the guardian pinned for it, the owner's. So in each contract, after the
 * owner's step, each agent's balance is re-encrypted the same way to the owner's new key (the agent's
 * custodial wallet signs; no proof: nothing is registered), and the guardian moves its pin once the
 * chain holds that balance; step 5 then covers the agents too.
 *
 * A contract whose registry already holds the new key is skipped (an agent the guardian answers
 * `KeyRotationNotNeeded` for, too), so a retry after a cut-off finishes the others. Meanwhile a key
 * refusal that the chain's newer key explains answers 503 (transfers/keyRefusal.ts). Every transfer
 * sealed after the answer uses the new key; what was sealed to the old one stays readable only with
 * the old one.
 *
 * @since 0.12.0
 */
import { ConfidentialTokenArtifact, TypedData } from "@pps/contracts"
import { GuardianClient } from "@pps/guardian"
import { Clock, Context, Effect, Exit, Layer, Option } from "effect"
import { type Address, bytesToHex, encodeFunctionData, getAddress, type Hex, hexToBytes, type LocalAccount } from "viem"
import type { Mode, Principal } from "@pps/api/ApiKeys"
import {
  EncryptionKeyInvalid,
  EncryptionKeyRequired,
  InternalError,
  LivemodeUnavailable,
  NotAgentOwner,
  ServiceUnavailable
} from "@pps/api/Errors"
import { type Asset, assets } from "@pps/api/Transfers"
import { AppConfig } from "../config/AppConfig.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { toEvmPoint } from "../settlement/calls.ts"
import { type ChainContext, confidentialTokenOf } from "../settlement/Chains.ts"
import { gasLimits } from "../settlement/domain.ts"
import { Settlement } from "../settlement/Settlement.ts"
import { AgentStore } from "../agents/AgentStore.ts"
import { TransferStore } from "../transfers/TransferStore.ts"
import { Accounts } from "./Accounts.ts"
import { EncryptionKeys, type Registration, verifiedKey } from "./EncryptionKeys.ts"

/** A rotation is mined within a few blocks; past this the request answers 503 and a retry continues it. */
const rotationWaitMs = 30_000

/** D68: how many agents' rotations of one contract are under way at once. */
const agentsAtOnce = 8

/**
 * @since 0.12.0
 * @category services
 */
export class KeyRotations extends Context.Service<KeyRotations, {
  /** Replaces the principal's registered key by `publicKey` (idempotent for the same key). */
  readonly rotate: (
    principal: Principal,
    input: { readonly publicKey: Uint8Array; readonly proofs: Readonly<Record<Asset, Uint8Array>> }
  ) => Effect.Effect<
    Uint8Array,
    EncryptionKeyInvalid | EncryptionKeyRequired | NotAgentOwner | LivemodeUnavailable | ServiceUnavailable | InternalError
  >
}>()("server/accounts/KeyRotations") {
  static readonly layer = Layer.effect(
    KeyRotations,
    Effect.gen(function*() {
      const context: KeyRotationsContext = {
        accounts: yield* Accounts,
        keys: yield* EncryptionKeys,
        settlement: yield* Settlement,
        transfers: yield* TransferStore,
        agents: yield* AgentStore,
        guardian: yield* GuardianClient.GuardianClient,
        attestationLifetimeSeconds: (yield* AppConfig).attestationLifetimeSeconds
      }
      return KeyRotations.of({ rotate: (principal, input) => rotate(context, principal, input) })
    })
  )
}

/** @internal exported for the cut-off test, which runs one contract's step alone. */
export interface KeyRotationsContext {
  readonly accounts: Accounts["Service"]
  readonly keys: EncryptionKeys["Service"]
  readonly settlement: Settlement["Service"]
  readonly transfers: TransferStore["Service"]
  readonly agents: AgentStore["Service"]
  readonly guardian: GuardianClient.GuardianClient["Service"]
  readonly attestationLifetimeSeconds: number
}

/** A step that could not finish now: 503, and the same request later continues it. */
const retryLater = (what: string) => (cause: unknown) =>
  Effect.logWarning(`key rotation: ${what}`, cause).pipe(
    Effect.andThen(Effect.fail(ServiceUnavailable.of(`The key rotation could not finish (${what}); retry the same request.`)))
  )

/**
 * One wallet whose balance a rotation re-encrypts: the owner's (its key replaced, proved) or,
 * D68, one of its agents' (no key registered: only the balance, to the owner's new key, no proof).
 */
export interface RotatingWallet {
  readonly accountId: string
  readonly mode: Mode
  readonly wallet: Address
  readonly signer: LocalAccount
  readonly publicKey: Uint8Array
  /** The new key's proof of possession bound to this wallet; "0x" for an agent's. */
  readonly proof: (asset: Asset) => Hex
  /** D68: for an agent, its owner's wallet, whose registered key the guardian checks is the new one. */
  readonly keyOwner?: Address
}

/**
 * The guardian's attestation of one wallet's rotation in one asset contract, or none when there is
 * nothing to do: the owner's registry holds the new key already (a retry after an answer that came
 * too late), or (D68) an agent's balance is under the new key already, or it has none there.
 */
const attestOn = Effect.fn("KeyRotations.attestOn")(function*(
  context: KeyRotationsContext,
  chain: ChainContext,
  rotating: RotatingWallet,
  contract: Address
) {
  if (rotating.keyOwner === undefined) {
    const registered = yield* context.keys.keyOfAddressIn(chain, contract, rotating.wallet).pipe(Effect.catch(retryLater("reading the key registry")))
    if (Option.isSome(registered) && bytesToHex(registered.value) === bytesToHex(rotating.publicKey)) return Option.none()
  }
  const nonce = yield* context.transfers.nextNonce(rotating.accountId, rotating.mode).pipe(Effect.catch(retryLater("taking a nonce")))
  const deadline = BigInt(Math.floor((yield* Clock.currentTimeMillis) / 1000) + context.attestationLifetimeSeconds)
  return yield* context.guardian.keyRotation({
    chainId: BigInt(chain.chainId),
    contract,
    account: rotating.wallet,
    newKey: bytesToHex(rotating.publicKey),
    nonce,
    deadline,
    ...(rotating.keyOwner === undefined ? {} : { keyOwner: rotating.keyOwner })
  }).pipe(
    Effect.map((attested) => Option.some({ ...attested, nonce, deadline })),
    Effect.catchTag("KeyRotationNotNeeded", () => Effect.succeed(Option.none())),
    Effect.catch(retryLater("the guardian did not attest (transfers of the account in flight, or unreachable)"))
  )
})

/**
 * The rotation of one wallet in one asset contract: attested, co-signed, mined. Its nonce, the one
 * the guardian's hold is lifted by (none: nothing to do there).
 *
 * @internal exported for the cut-off test, which runs it alone (a rotation stopped after it).
 */
export const rotateOn = Effect.fn("KeyRotations.rotateOn")(function*(
  context: KeyRotationsContext,
  chain: ChainContext,
  rotating: RotatingWallet,
  asset: Asset
) {
  const contract = confidentialTokenOf(chain, asset)
  const attestation = yield* attestOn(context, chain, rotating, contract)
  if (Option.isNone(attestation)) return Option.none<bigint>()
  const { nonce, deadline, ...attested } = attestation.value
  const newKey = toEvmPoint(rotating.publicKey)
  const message = {
    account: rotating.wallet,
    nonce,
    keyX: newKey.x,
    keyY: newKey.y,
    previousBalanceDigest: attested.previousBalanceDigest as Hex,
    balanceDigest: attested.balanceDigest as Hex,
    deadline
  }
  const accountSignature = yield* Effect.promise(() =>
    rotating.signer.signTypedData({
      domain: TypedData.domain(chain.chainId, contract),
      types: TypedData.keyRotationTypes,
      primaryType: "KeyRotation",
      message
    })
  )
  const request = {
    account: rotating.wallet,
    nonce,
    newKey,
    commitment: toEvmPoint(hexToBytes(attested.commitment as Hex)),
    ownerHandle: toEvmPoint(hexToBytes(attested.ownerHandle as Hex)),
    guardianHandle: toEvmPoint(hexToBytes(attested.guardianHandle as Hex)),
    deadline
  }
  const submissionId = `rot_${rotating.accountId}_${rotating.mode}_${asset}_${nonce}`
  yield* context.settlement.submit({
    submissionId,
    mode: rotating.mode,
    kind: "rotate_key",
    target: contract,
    data: encodeFunctionData({
      abi: ConfidentialTokenArtifact.abi,
      functionName: "rotateEncryptionKey",
      args: [request, rotating.proof(asset), attested.guardianSignature as Hex, accountSignature]
    }),
    gasLimit: gasLimits.rotate_key,
    deadlineSeconds: deadline,
    replayKey: null
  }).pipe(Effect.catch(retryLater("submitting to the chain")))
  const outcome = yield* context.settlement.awaitResolution(submissionId, rotationWaitMs).pipe(Effect.catch(retryLater("awaiting the chain")))
  if (Option.isNone(outcome)) return yield* Effect.fail(ServiceUnavailable.of("The key rotation is still being mined; retry the same request."))
  if (outcome.value._tag === "Failed") {
    // A revert (the balance moved since the attestation, or gas ran out) or no inclusion: a retry
    // attests afresh. The guardian lifts its hold only once the chain shows this attestation can
    // never be mined; anyone holding its calldata could otherwise still get it mined.
    yield* forgetOn(context, chain, rotating.wallet, asset, { failed: { nonce, deadline, previousBalanceDigest: attested.previousBalanceDigest } })
    return yield* retryLater("the chain did not apply the rotation")(submissionId)
  }
  return Option.some(nonce)
})

/**
 * The guardian lifts its hold on the account's transfers in one asset's contract and forgets its
 * key. The report names its attestation: the mined one's `nonce` (none: this request attested
 * nothing there), or the `failed` one. The guardian lifts at once only for the mined latest one;
 * otherwise only once the chain shows its latest attestation dead. Not lifted (the guardian
 * unreachable), the hold lapses at the attestation's deadline plus the guardian's margin.
 */
const forgetOn = (
  context: KeyRotationsContext,
  chain: ChainContext,
  wallet: Address,
  asset: Asset,
  report: Pick<Parameters<KeyRotationsContext["guardian"]["forgetKey"]>[0], "nonce" | "failed">
) =>
  context.guardian.forgetKey({
    chainId: BigInt(chain.chainId),
    contract: confidentialTokenOf(chain, asset),
    account: wallet,
    ...report
  }).pipe(
    Effect.catch((error) => Effect.logWarning("key rotation: the guardian did not lift its hold", error))
  )

/**
 * D68: the owner's agents, as wallets to rotate with it: their balances are encrypted to the key
 * the guardian pinned for them, the owner's, which must follow it. Their wallets are custodial.
 */
const agentWallets = Effect.fn("KeyRotations.agentWallets")(function*(
  context: KeyRotationsContext,
  owner: RotatingWallet
) {
  const agents = yield* context.agents.listByOwner(owner.accountId, owner.mode).pipe(Effect.catch(retryLater("listing the agents")))
  const wallets: Array<RotatingWallet> = []
  for (const agent of agents) {
    const signer = yield* context.accounts.custodialSigner(agent.accountId).pipe(Effect.catch(retryLater("opening an agent's wallet")))
    wallets.push({
      accountId: agent.accountId,
      mode: owner.mode,
      wallet: getAddress(agent.walletAddress),
      signer,
      publicKey: owner.publicKey,
      proof: () => "0x",
      keyOwner: owner.wallet
    })
  }
  return wallets
})

/**
 * D68: the agents' rotations in one contract, a few at a time. Each runs to its end before the
 * first failure is answered: one cut off mid-submit would leave its nonce spent and its hold
 * standing to its deadline for nothing.
 */
const eachToItsEnd = <E, R>(agents: ReadonlyArray<RotatingWallet>, rotateOne: (agent: RotatingWallet) => Effect.Effect<unknown, E, R>) =>
  Effect.forEach(agents, (agent) => Effect.exit(rotateOne(agent)), { concurrency: agentsAtOnce }).pipe(
    Effect.flatMap((exits) => {
      const failed = exits.find(Exit.isFailure)
      return failed === undefined ? Effect.void : Effect.failCause(failed.cause)
    })
  )

/** @internal exported for the test of an agent first paid during its owner's rotation. */
export const rotate = Effect.fn("KeyRotations.rotate")(function*(
  context: KeyRotationsContext,
  principal: Principal,
  input: { readonly publicKey: Uint8Array; readonly proofs: Readonly<Record<Asset, Uint8Array>> }
) {
  // An agent's balance is encrypted to its owner's key: the owner's rotation carries it (D68).
  if (principal.ownerAccountId !== null) {
    return yield* Effect.fail(NotAgentOwner.of("An agent's amounts are sealed to its owner's key; the owner rotates its own key."))
  }
  const chain = yield* Option.match(context.settlement.chain(principal.mode), {
    onNone: () => Effect.fail(LivemodeUnavailable.of()),
    onSome: Effect.succeed
  })
  const account = yield* context.accounts.get(principal.accountId).pipe(
    Unavailable.database("KeyRotations.rotate"),
    Unavailable.answerServiceUnavailable,
    Effect.flatMap(Invariant.some("an authenticated principal's account exists"))
  )
  const wallet = getAddress(account.walletAddress)
  const registration: Registration = { accountId: principal.accountId, mode: principal.mode, ...input }
  const publicKey = yield* verifiedKey(chain, registration, wallet)
  const current = yield* context.keys.keyOfAccount(principal.accountId, principal.mode).pipe(Effect.catch(retryLater("reading the key")))
  if (Option.isNone(current)) return yield* Effect.fail(EncryptionKeyRequired.of())
  const signer = yield* context.accounts.custodialSigner(principal.accountId).pipe(Effect.catch(retryLater("opening the wallet")))
  const owner: RotatingWallet = { accountId: principal.accountId, mode: principal.mode, wallet, signer, publicKey, proof: (asset) => bytesToHex(input.proofs[asset]) }
  const agents = yield* agentWallets(context, owner)
  // Per contract, the owner first: the guardian re-encrypts an agent's balance only to the key
  // registered for its owner there (D68). The agents' are independent of each other: a few at a
  // time, so an owner with many agents waits for a few blocks, not one per agent.
  const mined = new Map<string, bigint>()
  const rotated = (rotating: RotatingWallet, asset: Asset) =>
    rotateOn(context, chain, rotating, asset).pipe(Effect.map(Option.map((nonce) => mined.set(`${rotating.wallet}:${asset}`, nonce))))
  for (const asset of Object.keys(assets) as Array<Asset>) {
    yield* rotated(owner, asset)
    yield* eachToItsEnd(agents, (agent) => rotated(agent, asset))
  }
  // Every node forgets the old key before the guardian lifts its holds (and moves the agents'
  // pins): a transfer let through then is sealed to the new key wherever it is made.
  yield* context.keys.replaced(principal.accountId, principal.mode, publicKey).pipe(Effect.catch(retryLater("recording the key")))
  // An agent with no pin at its pass may have been pinned to the old key since, by a payment
  // sealed before every node forgot it: once more, now nothing is sealed to it. The agents done
  // already answer `KeyRotationNotNeeded` (a nonce and a guardian call each).
  for (const asset of Object.keys(assets) as Array<Asset>) yield* eachToItsEnd(agents, (agent) => rotated(agent, asset))
  for (const asset of Object.keys(assets) as Array<Asset>) {
    for (const rotating of [owner, ...agents]) {
      const nonce = mined.get(`${rotating.wallet}:${asset}`)
      yield* forgetOn(context, chain, rotating.wallet, asset, nonce === undefined ? {} : { nonce })
    }
  }
  yield* Effect.logInfo("encryption key rotated").pipe(Effect.annotateLogs({ account_id: principal.accountId, mode: principal.mode, agents: agents.length }))
  return publicKey
})
