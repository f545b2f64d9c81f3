/**
 * The guardian: the confidential ledger of the service. It keeps every account's
 * plaintext balance (sealed at rest), decides the amount-dependent predicates (enough
 * balance? within the agent's limits? above its approval threshold?), reserves what it
 * approves, and signs the EIP-712 attestation the ConfidentialToken requires for every
 * debit. It never returns an amount.
 *
 * A transfer's ciphertext is computed here, not checked: the server draws the opening
 * r and seals {amount, r} to the guardian; the guardian opens it and computes
 * C = a·G + r·H and the three handles itself (`ElGamal.encryptWith`), so every handle
 * encodes the amount in its note by construction, and signs exactly those points.
 *
 * Concurrency: decisions, settlements and the chain follower's bookings run in sequence
 * through the group committer (internal/groupCommit.ts): the calls that arrive while one
 * transaction runs share the next one, each caller answered after the commit that holds
 * its effect. Every unit locks the rows it changes (SELECT … FOR UPDATE), so several
 * guardian processes on one PostgreSQL database are safe too; the other writers (reported
 * credits, the expiry sweeper) take a keyed semaphore per account in this process and
 * their own transaction. No SQL transaction spans a chain read.
 *
 * Credits come from the chain (D39): the guardian follows the events of every
 * ConfidentialToken that names it as its guardian, in block order, past a confirmation
 * depth, and books each credit exactly once (a row per log, in the transaction that
 * changes the balance). Reconciliation is a check and an alarm: a mismatch raises an
 * alert, it never freezes an account (an outsider's deposit must not block anyone).
 *
 * @since 0.1.0
 */
import { hmac } from "@noble/hashes/hmac.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex as nobleBytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import { TypedData } from "@pps/contracts"
import { Attestation, ElGamal, EncryptionKey, Note, Point } from "@pps/crypto"
import { Clock, Context, Data, DateTime, Effect, Layer, Metric, RcMap, Schedule, Schema, Semaphore } from "effect"
import { type SqlError, SqlClient } from "effect/sql"
import { type Address, bytesToHex, getAddress, type Hash, type Hex, hexToBytes } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { ChainReader, type CreditLog, type RotationProposal } from "./ChainReader.ts"
import {
  type AccountKeyMismatch,
  AccountKeyMismatch as AccountKeyMismatchError,
  type Alert,
  alertsListedMax,
  Authorized,
  type AuthorizeRequest,
  type AuthorizeResult,
  CreditIdReused,
  CreditRefused,
  type CreditRequest,
  type CreditResult,
  GuardianError,
  type HealthResult,
  HoldForApproval,
  type InfoResult,
  InsufficientBalance,
  type NonZeroRequest,
  type NonZeroResult,
  PolicyViolation,
  type ReconcileRequest,
  type ReconcileResult,
  Refused,
  type RefusedReason,
  ReservationNotFound,
  type SealedBalanceRequest,
  type SealedBalanceResult,
  type SealedKeyTotalsResult,
  type RotationVetoRequest,
  type RotationVetoResult,
  type SettleRequest,
  type SettleResult,
  type SyncRequest,
  type SyncResult
} from "./Domain.ts"
import type { GuardianKeys } from "./GuardianKeys.ts"
import { makeAtRestBox } from "./internal/atRest.ts"
import { bucketOf, bucketRange, dayWindow, isValidTimeZone } from "./internal/dayWindow.ts"
import * as GroupCommit from "./internal/groupCommit.ts"
import {
  type AccountRef,
  type AlertRow,
  discoveryScope,
  makeStore,
  type ReservationRow,
  type RowHints,
  type RotationVetoRow,
  type Store
} from "./internal/store.ts"

/**
 * Timings of the guardian, all with defaults (`defaultTiming`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Timing {
  /**
   * A reservation never settled is released this long after its deadline. It covers
   * the skew between the guardian's clock and block timestamps; with a chain endpoint
   * the guardian also checks on chain that the attestation was not mined first.
   */
  readonly reservationMarginSeconds: number
  /** Latest deadline accepted, from now: bounds how long funds can stay reserved. */
  readonly deadlineHorizonSeconds: number
  /** How often due reservations are resolved; 0 disables the sweep (tests whose clocks are not the sweeper's). */
  readonly sweepIntervalMs: number
  /** How often every owned account is reconciled with the chain; 0 disables the sweep. */
  readonly reconcileIntervalMs: number
  /**
   * A mismatch is re-checked once after this delay before it raises an alert: the books
   * trail the chain by the follower's poll and the confirmation depth.
   */
  readonly reconcileRetryDelayMs: number
  /** How often the chain follower reads new blocks' credit events; 0 disables the loop (`sync` still reads). */
  readonly chainPollIntervalMs: number
  /**
   * Blocks mined on top of a log's block before the guardian books it: 0 books a log as
   * soon as its block is the latest (the embedded anvil, which never reorganises). The
   * guardian assumes no reorganisation deeper than this; one would leave a booked credit
   * the chain no longer has, which reconciliation reports (docs/guardian.md).
   */
  readonly chainConfirmations: number
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultTiming: Timing = {
  reservationMarginSeconds: 120,
  deadlineHorizonSeconds: 3_600,
  sweepIntervalMs: 5_000,
  reconcileIntervalMs: 60_000,
  reconcileRetryDelayMs: 5_000,
  chainPollIntervalMs: 1_000,
  chainConfirmations: 0
}

/** Reservations resolved per sweep step; the rest wait for the next step. */
const sweepBatchMax = 100
/** In-flight reservations of one account considered by a reconciliation (each costs one chain read). */
const reconcileInFlightMax = 64
/** Accounts read per page by the reconciliation sweep. */
const reconcilePageMax = 200
/** Blocks per getLogs call: public endpoints cap the range of one request. */
const chainBlockRangeMax = 2_000n
/** Credit logs booked in one transaction by the chain follower (see `bookLogs`). */
const logsPerUnit = 64
/** Registered keys remembered in memory (a registered key never changes: the contract refuses a second registration). */
const keyCacheMax = 100_000

/**
 * Counts reconciliation mismatches raised as alerts (one per account and episode: a
 * mismatch already alerted is not counted again until the books matched in between).
 *
 * @since 0.1.0
 * @category metrics
 */
export const reconciliationMismatches = Metric.counter("guardian_reconciliation_mismatches_total", {
  description: "Reconciliation mismatches raised as alerts: the on-chain guardian handle did not decrypt to the booked balance",
  incremental: true
})

/** Alerts a matching reconciliation clears: the books agree with the chain again. */
const alertsClearedByMatch = ["reconciliation_mismatch", "credit_out_of_range", "late_confirmation_overdraw"] as const

/**
 * The guardian's operations. The RPC handlers and the in-process client are thin
 * wrappers around these.
 *
 * @since 0.1.0
 * @category models
 */
export interface GuardianShape {
  readonly info: typeof InfoResult.Type
  readonly authorize: (request: AuthorizeRequest) => Effect.Effect<AuthorizeResult, GuardianError>
  readonly settle: (request: typeof SettleRequest.Type) => Effect.Effect<SettleResult, ReservationNotFound | GuardianError>
  readonly credit: (
    request: typeof CreditRequest.Type
  ) => Effect.Effect<typeof CreditResult.Type, CreditIdReused | CreditRefused | GuardianError>
  /** Books the chain's credits through the block of `txHash` now (see `SyncRequest`). */
  readonly sync: (request: typeof SyncRequest.Type) => Effect.Effect<typeof SyncResult.Type, GuardianError>
  readonly nonZero: (request: typeof NonZeroRequest.Type) => Effect.Effect<typeof NonZeroResult.Type, GuardianError>
  readonly sealedBalance: (
    request: typeof SealedBalanceRequest.Type
  ) => Effect.Effect<typeof SealedBalanceResult.Type, AccountKeyMismatch | GuardianError>
  /** The signed cancellation of one rotation proposal, if the guardian vetoed it. */
  readonly rotationVeto: (
    request: typeof RotationVetoRequest.Type
  ) => Effect.Effect<typeof RotationVetoResult.Type, GuardianError>
  /** D40: every API key's total of confirmed debits from the account, each sealed to its key. */
  readonly sealedKeyTotals: (
    request: typeof SealedBalanceRequest.Type
  ) => Effect.Effect<typeof SealedKeyTotalsResult.Type, AccountKeyMismatch | GuardianError>
  readonly reconcile: (request: typeof ReconcileRequest.Type) => Effect.Effect<ReconcileResult, GuardianError>
  readonly health: Effect.Effect<typeof HealthResult.Type>
  /** Resolves every reservation past its expiry (the sweeper runs it periodically). */
  readonly resolveDueReservations: Effect.Effect<number, GuardianError>
  /** Reconciles every owned account on every chain it has an endpoint for. */
  readonly reconcileAll: Effect.Effect<{ readonly checked: number; readonly mismatched: number }, GuardianError>
  /** Books every credit of the chain up to its confirmed block; answers that block (-1 when there is none yet). */
  readonly followChain: (chainId: bigint) => Effect.Effect<bigint, GuardianError>
}

/**
 * @since 0.1.0
 * @category services
 */
export class Guardian extends Context.Service<Guardian, GuardianShape>()("guardian/Guardian") {
  /**
   * The guardian over a SqlClient (migrated) and a ChainReader, with its background
   * sweepers (expiry, and reconciliation unless disabled) running for the layer's life.
   *
   * @since 0.1.0
   */
  static readonly layer = (options: {
    readonly keys: GuardianKeys
    readonly timing?: Partial<Timing>
    /**
     * GUARDIAN_APPROVED_ROTATIONS: the signers the guardian's operator agreed to hand over
     * to. A rotation proposed to any other signer is vetoed (none: every proposal is).
     */
    readonly approvedRotations?: ReadonlyArray<Address>
  }) =>
    Layer.effect(
      Guardian,
      Effect.gen(function*() {
        const guardian = yield* make(options.keys, { ...defaultTiming, ...options.timing }, options.approvedRotations ?? [])
        const timing = { ...defaultTiming, ...options.timing }
        if (timing.sweepIntervalMs > 0) {
          yield* guardian.resolveDueReservations.pipe(
            Effect.catch((error) => Effect.logWarning("reservation sweep failed").pipe(Effect.annotateLogs("reason", error.message))),
            Effect.repeat(Schedule.spaced(timing.sweepIntervalMs)),
            Effect.forkScoped
          )
        }
        if (timing.chainPollIntervalMs > 0) {
          const chain = yield* ChainReader
          for (const chainId of chain.chainIds) {
            yield* guardian.followChain(chainId).pipe(
              Effect.catch((error) =>
                Effect.logWarning("chain follower step failed").pipe(
                  Effect.annotateLogs({ chain_id: chainId.toString(), reason: error.message })
                )
              ),
              Effect.repeat(Schedule.spaced(timing.chainPollIntervalMs)),
              Effect.forkScoped
            )
          }
        }
        if (timing.reconcileIntervalMs > 0) {
          yield* guardian.reconcileAll.pipe(
            Effect.delay(timing.reconcileIntervalMs),
            Effect.catch((error) => Effect.logWarning("reconciliation sweep failed").pipe(Effect.annotateLogs("reason", error.message))),
            Effect.forever,
            Effect.forkScoped
          )
        }
        return guardian
      })
    )
}

// ---------------------------------------------------------------------------------------------
// Preparing an authorization: everything that needs no state (validation, the note, the
// ciphertext, the signature) happens before the account is locked.
// ---------------------------------------------------------------------------------------------

interface Prepared {
  readonly sender: AccountRef
  readonly recipient: Address
  readonly amount: bigint
  readonly authorized: Authorized
}

const storageFailure = (error: SqlError.SqlError) =>
  new GuardianError({ reason: "storage", message: `guardian storage failed: ${error.message.split("\n")[0]}` })

const refFor = (chainId: bigint, contract: string, account: string): AccountRef => ({
  chainId: chainId.toString(),
  contract: contract.toLowerCase(),
  account: account.toLowerCase()
})

const hexOf = (bytes: Uint8Array): Hex => bytesToHex(bytes)

/**
 * A keyed digest (HMAC-SHA256 under the at-rest key) of what defines the transfer, to
 * tell a retry from a different transfer under a reused id. Keyed, because a public
 * amount inside a plain hash could be found by trying candidates in a storage dump. The
 * policy and the approval flag are left out: a retry must replay the first decision even
 * if the policy changed in between.
 */
const requestDigest = (key: Uint8Array, request: AuthorizeRequest): string =>
  nobleBytesToHex(
    hmac(
      sha256,
      key,
      utf8ToBytes(
        [
          "authorize/v1",
          request.transferId,
          request.chainId,
          request.contract,
          request.kind,
          request.from,
          request.to,
          request.fromKey,
          request.toKey ?? "",
          request.amount ?? "",
          request.nonce,
          request.deadline,
          request.guardianNote,
          request.sealedDigest ?? "",
          request.apiKey ?? ""
        ].map((part) => String(part).toLowerCase()).join("|")
      )
    )
  )

/**
 * What a decision is recorded under: the request (its digest) and the agent context it was
 * decided in, which `requestDigest` leaves out (an approval replays its reservation whatever
 * the policy is by then). Keyed like it, so the store shows no policy either.
 */
const decisionDigest = (key: Uint8Array, request: AuthorizeRequest, digest: string): string =>
  nobleBytesToHex(
    hmac(
      sha256,
      key,
      utf8ToBytes(
        [
          "decision/v1",
          digest,
          request.agent === undefined ? "account" : "agent",
          request.agent?.policy.perTransactionLimit ?? "",
          request.agent?.policy.dailyLimit ?? "",
          request.agent?.policy.hitlThreshold ?? "",
          request.agent?.policy.timeZone ?? "",
          request.agent?.approved ?? ""
        ].map((part) => String(part)).join("|")
      )
    )
  )

const prepare = (
  request: AuthorizeRequest,
  keys: GuardianKeys,
  nowMs: number,
  timing: Timing
): Prepared | RefusedReason => {
  const confidential = request.kind === "confidential"
  const shapeOk = confidential
    ? request.toKey !== undefined && request.sealedDigest !== undefined && request.amount === undefined
    : request.toKey === undefined && request.sealedDigest === undefined && request.amount !== undefined
  if (!shapeOk) return "inputs_inconsistent"
  if (confidential && request.from.toLowerCase() === request.to.toLowerCase()) return "self_transfer"
  const nowSeconds = BigInt(Math.floor(nowMs / 1000))
  if (request.deadline <= nowSeconds || request.deadline > nowSeconds + BigInt(timing.deadlineHorizonSeconds)) {
    return "deadline_out_of_range"
  }
  if (request.agent !== undefined && !isValidTimeZone(request.agent.policy.timeZone)) return "time_zone_invalid"
  const fromKey = EncryptionKey.parsePublicKey(hexToBytes(request.fromKey as Hex))
  if (!fromKey.ok) return "sender_key_invalid"
  let toKey: EncryptionKey.PublicKey | undefined
  if (request.toKey !== undefined) {
    const parsed = EncryptionKey.parsePublicKey(hexToBytes(request.toKey as Hex))
    if (!parsed.ok) return "recipient_key_invalid"
    toKey = parsed.value
  }

  const transferId = hexToBytes(request.transferId as Hex)
  const contract = getAddress(request.contract)
  const opened = Note.openGuardianNote(keys.encryption, hexToBytes(request.guardianNote as Hex), {
    chainId: request.chainId,
    contract,
    transferId
  })
  if (!opened.ok) return "note_invalid"
  const opening = opened.value
  if (opening.amount === 0n) return "amount_zero"
  if (!confidential && opening.amount !== request.amount) return "public_amount_mismatch"

  const guardianKey = keys.encryption.publicKey
  const publicKeys = toKey === undefined ? [fromKey.value, guardianKey] : [fromKey.value, toKey, guardianKey]
  const ciphertext = ElGamal.encryptWith(opening, publicKeys)
  const ciphertextDigest = ElGamal.digest(ciphertext)
  const [fromHandle, second, third] = ciphertext.handles
  if (fromHandle === undefined || second === undefined) throw new Error("invariant violated: missing handles")
  const domain = Attestation.domain(request.chainId, contract)
  const from = getAddress(request.from)
  const to = getAddress(request.to)
  const transferIdHex = request.transferId.toLowerCase() as Hex
  const typedData = confidential
    ? Attestation.confidentialTransfer(domain, {
      from,
      to,
      transferId: transferIdHex,
      nonce: request.nonce,
      ciphertextDigest,
      sealedDigest: request.sealedDigest as Hex,
      deadline: request.deadline
    })
    : Attestation.publicTransfer(domain, {
      from,
      to,
      transferId: transferIdHex,
      nonce: request.nonce,
      amount: opening.amount,
      ciphertextDigest,
      deadline: request.deadline
    })
  const signature = Attestation.signWith(keys.signer, typedData)
  const points = confidential && third !== undefined
    ? { commitment: hexOf(ciphertext.commitment), fromHandle: hexOf(fromHandle), toHandle: hexOf(second), guardianHandle: hexOf(third) }
    : { commitment: hexOf(ciphertext.commitment), fromHandle: hexOf(fromHandle), guardianHandle: hexOf(second) }
  return {
    sender: refFor(request.chainId, request.contract, request.from),
    recipient: to,
    amount: opening.amount,
    authorized: new Authorized({
      transferId: transferIdHex,
      ciphertext: points,
      ciphertextDigest,
      signature,
      deadline: request.deadline
    })
  }
}

/**
 * How many different requests may re-decide a held transfer: each is an owner's approval
 * (D27), which re-checks under the policy in force and a fresh deadline, and may fail (402, a
 * limit) and be tried again. Enough for an owner's real attempts over a 24 h window; few enough
 * that a caller replaying a held box with invented policies learns a handful of bits, not its
 * amount (docs/security.md).
 */
const approvalDecisionsMax = 8

/** A concurrent twin inserted the same transfer id first: roll back and answer from its row. */
class TransferIdRace extends Data.TaggedError("TransferIdRace")<{}> {}

const encodeAuthorized = Schema.encodeSync(Authorized)
const decodeAuthorized = Schema.decodeUnknownSync(Authorized)

const make = Effect.fnUntraced(function*(keys: GuardianKeys, timing: Timing, approvedRotations: ReadonlyArray<Address>) {
  const sql = yield* SqlClient.SqlClient
  const chain = yield* ChainReader
  const store: Store = makeStore(sql, makeAtRestBox(keys.atRestKey))
  const group = yield* GroupCommit.make<RowHints>(store.withHeldRows, store.prefetch)
  const locks = yield* RcMap.make({ lookup: (_key: string) => Semaphore.make(1), idleTimeToLive: "1 minute" })
  const withAccountLock = <A, E, R>(account: AccountRef, effect: Effect.Effect<A, E, R>) =>
    Effect.scoped(
      Effect.flatMap(
        RcMap.get(locks, `${account.chainId}/${account.contract}/${account.account}`),
        (semaphore) => Semaphore.withPermit(semaphore, effect)
      )
    )
  const info = { signer: keys.info.signer, encryptionKey: keys.info.encryptionKey }

  // -------------------------------------------------------------------------------------------
  // whose keys the guardian encrypts to (issue 12 item 5)
  // -------------------------------------------------------------------------------------------

  /**
   * Keys known for good, by `chain/contract/account`: registered keys (the contract refuses
   * a second registration, so a registered key never changes) and pinned keys (never
   * unpinned). Only positive answers are remembered: an unregistered account may register.
   */
  const knownKeys = new Map<string, { readonly key: string; readonly source: "registered" | "pinned" }>()
  const refKey = (ref: AccountRef) => `${ref.chainId}/${ref.contract}/${ref.account}`
  const remember = (ref: AccountRef, key: string, source: "registered" | "pinned") => {
    // A crude bound: forgetting costs one read again, never correctness.
    if (knownKeys.size >= keyCacheMax) knownKeys.clear()
    knownKeys.set(refKey(ref), { key, source })
  }

  /**
   * The key the guardian must encrypt this party's copy to: the key pinned for the address
   * (an address with no registration, e.g. an agent, whose balance is encrypted to its
   * owner's key: the first key used for it), else its registered key on chain; undefined
   * when it has neither (the caller's key is then pinned with the reservation). A pin is
   * looked up before the registration: the balance stays encrypted to the pinned key even
   * if a key is registered for the address later.
   */
  const lookUpKey = (ref: AccountRef) =>
    Effect.gen(function*() {
      const pinned = yield* store.pinnedKey(ref).pipe(Effect.mapError(storageFailure))
      if (pinned !== undefined) {
        remember(ref, pinned, "pinned")
        return pinned
      }
      const registered = yield* chain.encryptionKeyOf(BigInt(ref.chainId), getAddress(ref.contract), getAddress(ref.account))
      if (registered === undefined) return undefined
      const key = bytesToHex(registered).toLowerCase()
      remember(ref, key, "registered")
      return key
    })
  /** Lookups under way, shared: a burst of transfers to one new party reads the chain once. */
  const lookups = new Map<string, Effect.Effect<string | undefined, GuardianError>>()
  const expectedKeyOf = (ref: AccountRef): Effect.Effect<string | undefined, GuardianError> =>
    Effect.suspend(() => {
      const id = refKey(ref)
      const known = knownKeys.get(id)
      if (known !== undefined) return Effect.succeed(known.key)
      const running = lookups.get(id)
      if (running !== undefined) return running
      return Effect.flatMap(Effect.cached(lookUpKey(ref).pipe(Effect.ensuring(Effect.sync(() => lookups.delete(id))))), (shared) => {
        lookups.set(id, shared)
        return shared
      })
    })

  /** Keys to pin in the decision's transaction (parties with neither a pin nor a registration). */
  interface KeyCheck {
    readonly pins: ReadonlyArray<{ readonly ref: AccountRef; readonly key: string; readonly refusal: RefusedReason }>
  }

  /**
   * Checks `fromKey` and `toKey` against the keys the parties' balances are encrypted to,
   * so a caller cannot have a party's copy encrypted to a key of its own. Without an
   * endpoint for the chain the guardian cannot tell and checks nothing (docs/guardian.md).
   */
  const checkKeys = (request: AuthorizeRequest) =>
    Effect.gen(function*() {
      if (!chain.knows(request.chainId)) return { pins: [] } satisfies KeyCheck
      const parties: Array<{ readonly ref: AccountRef; readonly key: string; readonly refusal: RefusedReason }> = [
        { ref: refFor(request.chainId, request.contract, request.from), key: request.fromKey.toLowerCase(), refusal: "sender_key_not_registered" }
      ]
      if (request.toKey !== undefined) {
        parties.push({ ref: refFor(request.chainId, request.contract, request.to), key: request.toKey.toLowerCase(), refusal: "recipient_key_not_registered" })
      }
      const pins: Array<KeyCheck["pins"][number]> = []
      for (const party of parties) {
        const expected = yield* expectedKeyOf(party.ref)
        if (expected === undefined) pins.push(party)
        else if (expected !== party.key) return party.refusal
      }
      return { pins } satisfies KeyCheck
    })

  // -------------------------------------------------------------------------------------------
  // authorize
  // -------------------------------------------------------------------------------------------

  const decide = (
    request: AuthorizeRequest,
    prepared: Prepared | RefusedReason,
    keyCheck: KeyCheck | RefusedReason,
    digest: string,
    nowMs: number
  ): Effect.Effect<AuthorizeResult, SqlError.SqlError | TransferIdRace> =>
    Effect.gen(function*() {
      const transferId = request.transferId.toLowerCase()
      // Idempotent per transfer id: the same request replays the recorded decision.
      const replay = (existing: ReservationRow) =>
        existing.requestDigest === digest
          ? decodeAuthorized(JSON.parse(existing.result))
          : new Refused({ transferId, reason: "transfer_id_reused" })
      // A request refused as such still replays a decision recorded under its transfer id.
      const refuse = (reason: RefusedReason) =>
        Effect.map(store.findReservation(transferId, { forUpdate: false }), (existing) =>
          existing === undefined ? new Refused({ transferId, reason }) : replay(existing))
      if (typeof prepared === "string") return yield* refuse(prepared)
      if (typeof keyCheck === "string") return yield* refuse(keyCheck)
      const { sender } = prepared
      const balance = yield* store.lockBalance(sender)
      // Read under the sender's lock, as the nonce's check always was; the rows themselves only
      // when they exist (a retry, an approval): a new transfer id costs this one statement.
      const before = yield* store.recordedBefore(transferId, sender, request.nonce)
      if (before.reserved) {
        const existing = yield* store.findReservation(transferId, { forUpdate: false })
        if (existing !== undefined) return replay(existing)
      }
      if (balance.frozenReason !== null) return new Refused({ transferId, reason: "account_frozen" })
      // One decision per transfer id (a box is bound to it): the same request is decided again
      // (a retry; the balance may have changed since), another request is refused unless it is
      // an owner's approval of a held transfer, a few times at most. Otherwise a caller holding
      // a box could ask about it under policy after policy and binary-search its amount.
      const decidedUnder = decisionDigest(keys.atRestKey, request, digest)
      const decided = before.decided ? yield* store.findDecision(transferId) : undefined
      const redecision = decided !== undefined && decided.requestDigest !== decidedUnder
      if (redecision) {
        const approval = request.agent?.approved === true && decided.held
        if (!approval || decided.redecisions >= approvalDecisionsMax) {
          yield* alert(
            sender,
            "decision_conflict",
            approval
              ? `transfer ${transferId} was approved under ${approvalDecisionsMax} different requests already; refused`
              : `transfer ${transferId} was asked about with a request other than the one decided; refused`,
            nowMs
          )
          return new Refused({ transferId, reason: "transfer_id_reused" })
        }
      }
      const record = (outcome: AuthorizeResult) =>
        Effect.gen(function*() {
          const row = {
            requestDigest: decidedUnder,
            held: outcome._tag === "HoldForApproval" || decided?.held === true,
            redecisions: (decided?.redecisions ?? 0) + (redecision ? 1 : 0)
          }
          if (decided !== undefined) return yield* store.updateDecision(transferId, row, nowMs)
          if (!(yield* store.insertDecision(transferId, row, nowMs))) return yield* new TransferIdRace()
        }).pipe(Effect.as(outcome))
      return yield* evaluate(request, prepared, keyCheck, digest, before.nonceTaken, nowMs, balance).pipe(Effect.flatMap((outcome) =>
        // Refusals of the request itself say nothing about the amount: only decisions are recorded.
        outcome._tag === "Refused" ? Effect.succeed(outcome) : record(outcome)
      ))
    })

  /** The amount-dependent part of `decide`, in D25's order, on the sender's locked balance. */
  const evaluate = (
    request: AuthorizeRequest,
    prepared: Prepared,
    keyCheck: KeyCheck,
    digest: string,
    nonceTaken: boolean,
    nowMs: number,
    balance: Effect.Success<ReturnType<typeof store.lockBalance>>
  ): Effect.Effect<AuthorizeResult, SqlError.SqlError | TransferIdRace> =>
    Effect.gen(function*() {
      const transferId = request.transferId.toLowerCase()
      const { amount, sender } = prepared
      if (nonceTaken) return new Refused({ transferId, reason: "nonce_reused" })
      // First use of an address with no registered key: its key is pinned now (a concurrent
      // first use may have pinned another one, which then stands).
      for (const pin of keyCheck.pins) {
        const pinned = yield* store.pinKey(pin.ref, pin.key, nowMs)
        if (pinned !== pin.key) return new Refused({ transferId, reason: pin.refusal })
      }

      // D25's order for the amount-dependent rules: per-transaction, daily, balance, threshold.
      const agent = request.agent
      if (agent !== undefined) {
        if (amount > agent.policy.perTransactionLimit) {
          return new PolicyViolation({ transferId, reason: "per_transaction_limit_exceeded" })
        }
        const window = dayWindow(nowMs, agent.policy.timeZone)
        if (window === undefined) return new Refused({ transferId, reason: "time_zone_invalid" })
        const { endBucket, firstBucket } = bucketRange(window)
        const spent = yield* store.spentIn(sender, firstBucket, endBucket)
        if (spent + amount > agent.policy.dailyLimit) return new PolicyViolation({ transferId, reason: "daily_limit_exceeded" })
      }
      if (balance.confirmed - balance.reserved < amount) return new InsufficientBalance({ transferId })
      if (
        agent !== undefined && !agent.approved && agent.policy.hitlThreshold !== null &&
        amount > agent.policy.hitlThreshold
      ) {
        const ownerKey = EncryptionKey.parsePublicKey(hexToBytes(request.fromKey as Hex))
        if (!ownerKey.ok) return new Refused({ transferId, reason: "sender_key_invalid" })
        const sealedAmount = Note.sealHeldAmount({
          context: { chainId: request.chainId, contract: getAddress(request.contract), transferId: hexToBytes(transferId as Hex) },
          ownerKey: ownerKey.value,
          amount
        })
        return new HoldForApproval({ transferId, sealedAmount: hexOf(sealedAmount) })
      }

      const spendBucket = agent === undefined ? null : bucketOf(nowMs)
      const inserted = yield* store.insertReservation({
        transferId,
        chainId: sender.chainId,
        contract: sender.contract,
        fromAccount: sender.account,
        toAccount: prepared.recipient.toLowerCase(),
        kind: request.kind,
        nonce: request.nonce,
        deadline: request.deadline,
        expiresAtMs: (Number(request.deadline) + timing.reservationMarginSeconds) * 1000,
        amount,
        spendBucket,
        requestDigest: digest,
        result: JSON.stringify(encodeAuthorized(prepared.authorized)),
        apiKeyId: request.apiKey ?? null
      }, nowMs)
      if (!inserted) return yield* new TransferIdRace()
      yield* store.writeBalance(sender, { ...balance, reserved: balance.reserved + amount, owned: true })
      if (spendBucket !== null) yield* store.addSpend(sender, spendBucket, amount)
      return prepared.authorized
    })

  const authorize = Effect.fn("Guardian.authorize")(function*(request: AuthorizeRequest) {
    const nowMs = yield* Clock.currentTimeMillis
    const prepared = prepare(request, keys, nowMs, timing)
    // Stateless refusals come first; the key check may read the chain (once per party, then cached).
    const keyCheck = typeof prepared === "string" ? { pins: [] } : yield* checkKeys(request)
    const digest = requestDigest(keys.atRestKey, request)
    // In the next group's transaction (group commit): answered once that transaction committed.
    // A request refused before any lock names no row: its unit reads nothing under a lock.
    const hint: RowHints | undefined = typeof prepared === "string" || typeof keyCheck === "string"
      ? undefined
      : {
        balances: [prepared.sender],
        decisions: [{ transferId: request.transferId.toLowerCase(), sender: prepared.sender, nonce: request.nonce }]
      }
    const result = yield* group.run(decide(request, prepared, keyCheck, digest, nowMs), hint).pipe(
      // The twin committed first: its row now answers.
      Effect.catchTag("TransferIdRace", () => group.run(decide(request, prepared, keyCheck, digest, nowMs), hint)),
      Effect.catchTag("TransferIdRace", () =>
        Effect.succeed(new Refused({ transferId: request.transferId.toLowerCase(), reason: "transfer_id_reused" }))),
      Effect.mapError(storageFailure)
    )
    yield* Effect.logDebug("authorize decided").pipe(
      Effect.annotateLogs({ transfer_id: request.transferId, decision: result._tag })
    )
    return result
  })

  // -------------------------------------------------------------------------------------------
  // settle, expiry
  // -------------------------------------------------------------------------------------------

  const senderOf = (reservation: ReservationRow): AccountRef => ({
    chainId: reservation.chainId,
    contract: reservation.contract,
    account: reservation.fromAccount
  })

  /**
   * Adds a credit the chain recorded to a balance locked by the caller. A credit that
   * would take the booked balance out of u64 (the range the books and `ElGamal.matches`
   * work in; the contract accepts larger amounts, e.g. a shield of 2^64 wei) is not
   * booked: it raises a `credit_out_of_range` alert instead. The account's transfers go
   * on against the books, which then hold less than the chain.
   */
  const addCredit = (
    account: AccountRef,
    balance: Effect.Success<ReturnType<typeof store.lockBalance>>,
    amount: bigint,
    what: string,
    nowMs: number
  ) =>
    Effect.gen(function*() {
      if (balance.confirmed + amount >= ElGamal.amountLimit) {
        yield* alert(account, "credit_out_of_range", `${what} would take the booked balance out of the u64 range; not booked`, nowMs)
        return "out_of_range" as const
      }
      yield* store.writeBalance(account, {
        ...balance,
        confirmed: balance.confirmed + amount,
        version: balance.version + 1n,
        owned: true
      })
      return "booked" as const
    })

  /** Raises (or confirms) an alert; logs it without amounts when it is new. */
  const alert = (account: AccountRef, kind: typeof Alert.Type["kind"], explanation: string, nowMs: number) =>
    Effect.gen(function*() {
      const raised = yield* store.raiseAlert(account, kind, explanation, nowMs)
      if (raised) {
        yield* Effect.logError(`guardian alert: ${explanation}`).pipe(
          Effect.annotateLogs({ chain_id: account.chainId, contract: account.contract, account: account.account, alert: kind })
        )
      }
      return raised
    })

  /**
   * Applies a mined transfer to the books: debit the sender's confirmed balance (and its
   * reservation when still held), credit the recipient of a confidential transfer unless
   * its event credited it first. `held` is false for a confirmation that arrives after
   * the reservation expired. On "overdraw" nothing is written.
   */
  const applyConfirmed = (reservation: ReservationRow, held: boolean, nowMs: number) =>
    Effect.gen(function*() {
      const sender = senderOf(reservation)
      const credited = reservation.kind === "confidential" && reservation.toAccount !== reservation.fromAccount &&
        !reservation.recipientCredited
      const recipient: AccountRef = { ...sender, account: reservation.toAccount }
      // Rows are locked in address order, so concurrent settlements never deadlock.
      const ordered = credited ? [sender, recipient].sort((a, b) => (a.account < b.account ? -1 : 1)) : [sender]
      const locked = new Map<string, Effect.Success<ReturnType<typeof store.lockBalance>>>()
      for (const account of ordered) locked.set(account.account, yield* store.lockBalance(account))
      const senderBalance = locked.get(sender.account)
      if (senderBalance === undefined) return yield* Effect.die(new Error("invariant violated: sender row not locked"))
      const available = held ? senderBalance.confirmed : senderBalance.confirmed - senderBalance.reserved
      if (available < reservation.amount) return "overdraw" as const
      yield* store.writeBalance(sender, {
        ...senderBalance,
        confirmed: senderBalance.confirmed - reservation.amount,
        reserved: held ? senderBalance.reserved - reservation.amount : senderBalance.reserved,
        version: senderBalance.version + 1n
      })
      const recipientBalance = locked.get(recipient.account)
      if (credited && recipientBalance !== undefined) {
        yield* addCredit(recipient, recipientBalance, reservation.amount, `confidential transfer ${reservation.transferId}`, nowMs)
      }
      // An expired reservation gave its daily spend back; the mined transfer takes it again.
      if (!held && reservation.spendBucket !== null) yield* store.addSpend(sender, reservation.spendBucket, reservation.amount)
      // D40: once per transfer, as the reservation leaves `reserved`/`expired` for `confirmed` below.
      if (reservation.apiKeyId !== null) yield* store.addKeyTotal(sender, reservation.apiKeyId, reservation.amount)
      // The recipient's credit is marked in the same statement as the status (one UPDATE, issue 16).
      yield* store.setReservationStatus(reservation.transferId, "confirmed", nowMs, { recipientCredited: credited && recipientBalance !== undefined })
      return "applied" as const
    })

  const release = (reservation: ReservationRow, status: "failed" | "expired", nowMs: number) =>
    Effect.gen(function*() {
      const sender = senderOf(reservation)
      const balance = yield* store.lockBalance(sender)
      if (balance.reserved < reservation.amount) {
        return yield* Effect.die(new Error("invariant violated: a reservation exceeds the account's reserved total"))
      }
      yield* store.writeBalance(sender, { ...balance, reserved: balance.reserved - reservation.amount })
      if (reservation.spendBucket !== null) yield* store.addSpend(sender, reservation.spendBucket, -reservation.amount)
      yield* store.setReservationStatus(reservation.transferId, status, nowMs)
    })

  /**
   * The one freeze left: a transfer the chain applied after its reservation was released,
   * for more than the sender has left (docs/guardian.md). Only a guardian-attested
   * transfer reaches it, never an outsider's action.
   */
  const freeze = (account: AccountRef, nowMs: number) =>
    Effect.gen(function*() {
      yield* store.lockBalance(account)
      yield* store.setFrozen(account, "late_confirmation_overdraw", nowMs)
      yield* alert(
        account,
        "late_confirmation_overdraw",
        "a transfer confirmed after its reservation was released exceeds the available balance; the account is frozen",
        nowMs
      )
    })

  /**
   * The chain applied a transfer whose reservation had been released (expired on time
   * alone, or reported failed): debit the sender now; if that would overdraw, freeze the
   * sender, and still credit the recipient, whom the chain credited.
   */
  const applyLate = (reservation: ReservationRow, nowMs: number) =>
    Effect.gen(function*() {
      const applied = yield* applyConfirmed(reservation, false, nowMs)
      if (applied === "applied") return "confirmed" as const
      yield* freeze(senderOf(reservation), nowMs)
      if (reservation.kind === "confidential" && !reservation.recipientCredited) {
        const recipient: AccountRef = { ...senderOf(reservation), account: reservation.toAccount }
        const balance = yield* store.lockBalance(recipient)
        yield* addCredit(recipient, balance, reservation.amount, `confidential transfer ${reservation.transferId}`, nowMs)
        yield* store.markRecipientCredited(reservation.transferId)
      }
      return "overdraw" as const
    })

  const settleLocked = (transferId: string, outcome: "confirmed" | "failed", nowMs: number) =>
    Effect.gen(function*() {
      const reservation = yield* store.findReservation(transferId, { forUpdate: true })
      if (reservation === undefined) return yield* new ReservationNotFound({ transferId })
      if (reservation.status === "reserved") {
        if (outcome === "failed") {
          yield* release(reservation, "failed", nowMs)
          return "failed" as const
        }
        const applied = yield* applyConfirmed(reservation, true, nowMs)
        if (applied === "overdraw") return yield* Effect.die(new Error("invariant violated: a held reservation exceeds the confirmed balance"))
        return "confirmed" as const
      }
      if (reservation.status === "expired" && outcome === "confirmed") {
        // The chain adapter saw the transfer mined (so before its deadline) but reports it
        // after the reservation expired: the chain is the truth, the books follow it.
        const applied = yield* applyLate(reservation, nowMs)
        if (applied === "overdraw") return "expired" as const
        yield* Effect.logWarning("late confirmation applied after expiry").pipe(Effect.annotateLogs("transfer_id", transferId))
        return "confirmed" as const
      }
      if (reservation.status !== outcome) {
        yield* Effect.logWarning("settle disagrees with the recorded outcome; the recorded one stands").pipe(
          Effect.annotateLogs({ transfer_id: transferId, recorded: reservation.status, asked: outcome })
        )
      }
      return reservation.status
    })

  const settle = Effect.fn("Guardian.settle")(function*(request: typeof SettleRequest.Type) {
    const transferId = request.transferId.toLowerCase()
    const nowMs = yield* Clock.currentTimeMillis
    let outcome: "confirmed" | "failed" | "keep" = request.outcome
    if (request.outcome === "failed") {
      const found = yield* store.findReservation(transferId, { forUpdate: false }).pipe(Effect.mapError(storageFailure))
      if (found === undefined) return yield* new ReservationNotFound({ transferId })
      // "failed" is the caller's word, and a reverted or unseen attestation stays valid until its
      // deadline: anyone holding its calldata can still get it mined. Releasing the reservation on
      // that word alone would let the sender spend the amount twice. With the chain at hand, a
      // failure counts only once the chain says the attestation can never be mined; before that
      // the reservation stays, and the expiry sweeper decides it from the chain.
      if (found.status === "reserved") {
        const verdict = yield* chainVerdict(found)
        outcome = verdict === "mined" ? "confirmed" : verdict === "undecided" ? "keep" : "failed"
      }
    }
    if (outcome === "keep") {
      yield* Effect.logInfo("failure reported before the attestation's deadline: the reservation stays until the chain decides").pipe(
        Effect.annotateLogs({ transfer_id: transferId })
      )
      return { transferId, status: "reserved" } satisfies SettleResult
    }
    const settled = outcome
    // A confirmation needs no read first (no chain verdict): `settleLocked` reads the
    // reservation under its row lock, in the next group's transaction.
    const status = yield* group.run(settleLocked(transferId, settled, nowMs), { reservations: [transferId] }).pipe(
      Effect.catchTag("SqlError", (error) => Effect.fail(storageFailure(error)))
    )
    yield* Effect.logDebug("settled").pipe(Effect.annotateLogs({ transfer_id: transferId, status }))
    return { transferId, status } satisfies SettleResult
  })

  /**
   * What the chain says about a reservation: mined (its nonce is used), never minable
   * (unused, and the chain's time is past the deadline), or not yet known.
   * Without an endpoint for the chain, the guardian's clock alone decides.
   * Judged at the block `GUARDIAN_CONFIRMATIONS` deep, as credits are booked: a shallower
   * reorganisation must not undo a verdict (a debit the new chain does not carry, or a
   * reservation released for a transfer a replacement block applies).
   */
  const chainVerdict = (reservation: ReservationRow) =>
    Effect.gen(function*() {
      const chainId = BigInt(reservation.chainId)
      if (!chain.knows(chainId)) return "expired_unverified" as const
      const head = yield* chain.headAtDepth(chainId, timing.chainConfirmations)
      const used = yield* chain.isNonceUsed(
        chainId,
        getAddress(reservation.contract),
        getAddress(reservation.fromAccount),
        reservation.nonce,
        head.blockNumber
      )
      if (used) return "mined" as const
      return head.timestampSeconds <= reservation.deadline ? ("undecided" as const) : ("expired" as const)
    })

  const resolveOne = (transferId: string) =>
    Effect.gen(function*() {
      const reservation = yield* store.findReservation(transferId, { forUpdate: false }).pipe(Effect.mapError(storageFailure))
      if (reservation === undefined || reservation.status !== "reserved") return false
      const verdict = yield* chainVerdict(reservation)
      if (verdict === "undecided") return false
      const nowMs = yield* Clock.currentTimeMillis
      const resolved = yield* withAccountLock(
        senderOf(reservation),
        sql.withTransaction(Effect.gen(function*() {
          const current = yield* store.findReservation(transferId, { forUpdate: true })
          if (current === undefined || current.status !== "reserved") return false
          if (verdict === "mined") {
            const applied = yield* applyConfirmed(current, true, nowMs)
            if (applied === "overdraw") return yield* Effect.die(new Error("invariant violated: a held reservation exceeds the confirmed balance"))
          } else {
            yield* release(current, "expired", nowMs)
          }
          return true
        }))
      ).pipe(Effect.mapError(storageFailure))
      if (resolved) {
        const log = verdict === "expired_unverified" ? Effect.logWarning : Effect.logInfo
        yield* log(verdict === "mined" ? "unsettled reservation confirmed from the chain" : "reservation expired").pipe(
          Effect.annotateLogs({ transfer_id: transferId, verdict })
        )
      }
      return resolved
    })

  const resolveDueReservations = Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const due = yield* store.dueReservations(nowMs, sweepBatchMax).pipe(Effect.mapError(storageFailure))
    let resolved = 0
    for (const transferId of due) {
      // One chain failure must not keep the other reservations from expiring.
      const outcome = yield* Effect.result(resolveOne(transferId))
      if (outcome._tag === "Success" && outcome.success) resolved++
    }
    return resolved
  }).pipe(Effect.withSpan("Guardian.resolveDueReservations"))

  // -------------------------------------------------------------------------------------------
  // credit, nonZero, sealedBalance
  // -------------------------------------------------------------------------------------------

  const credit = Effect.fn("Guardian.credit")(function*(request: typeof CreditRequest.Type) {
    // On a chain the guardian follows, the event books the credit: a reported one would
    // count twice, and the books must not take the caller's word for an amount (D39).
    if (chain.knows(request.chainId)) {
      return yield* new CreditRefused({ creditId: request.creditId, reason: "credits_come_from_the_chain" })
    }
    const account = refFor(request.chainId, request.contract, request.account)
    // Keyed for the same reason as `requestDigest`: the amount must not be guessable from a dump.
    const digest = nobleBytesToHex(
      hmac(sha256, keys.atRestKey, utf8ToBytes(["credit/v1", account.chainId, account.contract, account.account, request.amount].join("|")))
    )
    const nowMs = yield* Clock.currentTimeMillis
    const attempt = sql.withTransaction(Effect.gen(function*() {
      const balance = yield* store.lockBalance(account)
      const existing = yield* store.findCredit(request.creditId)
      if (existing !== undefined) return existing === digest ? "duplicate" as const : "conflict" as const
      const inserted = yield* store.insertCredit({ ...account, creditId: request.creditId, amount: request.amount, requestDigest: digest }, nowMs)
      if (!inserted) return "conflict" as const
      yield* store.writeBalance(account, {
        ...balance,
        confirmed: balance.confirmed + request.amount,
        version: balance.version + 1n,
        owned: true
      })
      return "applied" as const
    }))
    const status = yield* withAccountLock(account, attempt).pipe(Effect.mapError(storageFailure))
    if (status === "conflict") return yield* new CreditIdReused({ creditId: request.creditId })
    return { creditId: request.creditId, status }
  })

  const nonZero = Effect.fn("Guardian.nonZero")(function*(request: typeof NonZeroRequest.Type) {
    return yield* Effect.forEach(request.assets, (asset) =>
      store.readBalance(refFor(asset.chainId, asset.contract, request.account)).pipe(
        Effect.map((balance) => ({ chainId: asset.chainId, contract: asset.contract, nonZero: balance.confirmed > 0n }))
      )).pipe(Effect.mapError(storageFailure))
  })

  /**
   * The key to seal an account's figures to. Sealing to any key the caller names would let
   * whoever calls the guardian read any balance or total; with the chain at hand, only the
   * account's registered key is accepted.
   */
  const registeredKeyOf = (request: typeof SealedBalanceRequest.Type) =>
    Effect.gen(function*() {
      const mismatch = new AccountKeyMismatchError({ account: request.account })
      const publicKey = EncryptionKey.parsePublicKey(hexToBytes(request.publicKey as Hex))
      if (!publicKey.ok) return yield* mismatch
      if (chain.knows(request.chainId)) {
        const registered = yield* chain.encryptionKeyOf(request.chainId, getAddress(request.contract), getAddress(request.account))
        if (registered === undefined || bytesToHex(registered) !== bytesToHex(publicKey.value)) return yield* mismatch
      }
      return publicKey.value
    })

  const sealedBalance = Effect.fn("Guardian.sealedBalance")(function*(request: typeof SealedBalanceRequest.Type) {
    const account = getAddress(request.account)
    const publicKey = yield* registeredKeyOf(request)
    const balance = yield* store.readBalance(refFor(request.chainId, request.contract, request.account)).pipe(
      Effect.mapError(storageFailure)
    )
    const sealed = Note.sealBalanceStatement({
      chainId: request.chainId,
      contract: getAddress(request.contract),
      account,
      accountKey: publicKey,
      statement: { amount: balance.confirmed, ciphertextVersion: balance.version }
    })
    return { sealedStatement: hexOf(sealed), version: balance.version }
  })


  const sealedKeyTotals = Effect.fn("Guardian.sealedKeyTotals")(function*(request: typeof SealedBalanceRequest.Type) {
    const account = getAddress(request.account)
    const publicKey = yield* registeredKeyOf(request)
    const totals = yield* store.keyTotals(refFor(request.chainId, request.contract, request.account)).pipe(
      Effect.mapError(storageFailure)
    )
    return totals.map((total) => ({
      apiKeyId: total.apiKeyId,
      sealedTotal: hexOf(Note.sealKeyTotal({
        chainId: request.chainId,
        contract: getAddress(request.contract),
        account,
        apiKeyId: total.apiKeyId,
        accountKey: publicKey,
        total: { amount: total.amount, transfers: total.transfers }
      }))
    })) satisfies typeof SealedKeyTotalsResult.Type
  })

  // -------------------------------------------------------------------------------------------
  // credits from the chain (D39)
  // -------------------------------------------------------------------------------------------

  const signer = getAddress(keys.info.signer)
  const approved = new Set(approvedRotations.map((address) => address.toLowerCase()))
  const signerAccount = privateKeyToAccount(bytesToHex(keys.signerPrivateKey))

  /**
   * A proposal to replace this guardian: a signer the operator approved is let through
   * (logged); any other is vetoed. Without the veto the owner key alone would, after the
   * delay, name a signer of its choosing, which can then sign any debit. The guardian sends
   * nothing (its signer holds no ether): it signs the cancellation, records it (so a
   * restart keeps it listed) and raises an alert that carries it, for anyone to relay.
   */
  const vetoIfUnapproved = (chainId: bigint, proposal: RotationProposal, nowMs: number) =>
    Effect.gen(function*() {
      const annotations = {
        chain_id: chainId.toString(),
        contract: proposal.contract.toLowerCase(),
        proposal_id: proposal.proposalId.toString(),
        new_signer: proposal.newSigner.toLowerCase(),
        tx_hash: proposal.txHash
      }
      if (approved.has(proposal.newSigner.toLowerCase())) {
        return yield* Effect.logWarning("guardian rotation proposed to an approved signer: not vetoed").pipe(
          Effect.annotateLogs(annotations)
        )
      }
      const signature = yield* Effect.promise(() =>
        signerAccount.signTypedData({
          domain: TypedData.domain(Number(chainId), proposal.contract),
          types: TypedData.cancelGuardianRotationTypes,
          primaryType: "CancelGuardianRotation",
          message: { proposalId: proposal.proposalId, newSigner: proposal.newSigner }
        })
      )
      const veto: RotationVetoRow = {
        chainId: chainId.toString(),
        contract: proposal.contract.toLowerCase(),
        proposalId: proposal.proposalId,
        newSigner: proposal.newSigner.toLowerCase(),
        executableAt: proposal.executableAt,
        txHash: proposal.txHash.toLowerCase(),
        blockNumber: proposal.blockNumber,
        signature
      }
      const executableAt = DateTime.formatIso(DateTime.makeUnsafe(Number(proposal.executableAt) * 1000))
      yield* sql.withTransaction(Effect.gen(function*() {
        if (!(yield* store.insertRotationVeto(veto, nowMs))) return
        yield* alert(
          { chainId: veto.chainId, contract: veto.contract, account: veto.newSigner },
          "guardian_rotation_vetoed",
          `rotation ${veto.proposalId} to an unapproved signer vetoed; relay the signed cancellation ` +
            `(its Health alert, or pnpm guardian cancel-rotation) before ${executableAt}`,
          nowMs
        )
      })).pipe(Effect.mapError(storageFailure))
    }).pipe(Effect.withSpan("Guardian.vetoRotation"))

  /** One follower step at a time per chain (the loop and `sync` share it). */
  const followLocks = new Map<bigint, Semaphore.Semaphore>()
  for (const chainId of chain.chainIds) followLocks.set(chainId, Semaphore.makeUnsafe(1))

  /** Books a shield (its amount is public in the event), in the caller's transaction. */
  const bookShield = (chainId: bigint, log: CreditLog & { readonly _tag: "Shielded" }, nowMs: number) => {
    const account = refFor(chainId, log.contract, log.to)
    return Effect.gen(function*() {
      const balance = yield* store.lockBalance(account)
      const inRange = balance.confirmed + log.amount < ElGamal.amountLimit
      const recorded = yield* store.insertChainCredit({
        chainId: account.chainId,
        txHash: log.txHash.toLowerCase(),
        logIndex: log.logIndex,
        contract: account.contract,
        account: account.account,
        kind: "shield",
        transferId: null,
        blockNumber: log.blockNumber,
        outcome: inRange ? "booked" : "out_of_range"
      }, nowMs)
      if (!recorded) return "duplicate" as const
      return yield* addCredit(account, balance, log.amount, `shield in ${log.txHash}:${log.logIndex}`, nowMs)
    })
  }

  /**
   * Books the recipient side of a confidential transfer. Its amount is in the guardian's
   * reservation of the transfer id (it opened the note at authorize). The credit is booked
   * once, by this event or by `settle`, whichever comes first (`recipient_credited`); the
   * sender's debit stays the reservation's (settle, or the expiry sweeper asking the
   * chain), except for a reservation already released, which the chain now contradicts.
   */
  const bookTransferIn = (chainId: bigint, log: CreditLog & { readonly _tag: "ConfidentialTransfer" }, nowMs: number) =>
    Effect.gen(function*() {
      const transferId = log.transferId.toLowerCase()
      const recipient = refFor(chainId, log.contract, log.to)
      const creditRow = (outcome: "booked" | "already_booked" | "unknown_transfer") => ({
        chainId: recipient.chainId,
        txHash: log.txHash.toLowerCase(),
        logIndex: log.logIndex,
        contract: recipient.contract,
        account: recipient.account,
        kind: "transfer_in" as const,
        transferId,
        blockNumber: log.blockNumber,
        outcome
      })
      // A matching reservation is the log's sender's (its parties and kind never change); it is
      // read once, under its row lock.
      const sender = refFor(chainId, log.contract, log.from)
      const booked = yield* Effect.gen(function*() {
        const current = yield* store.findReservation(transferId, { forUpdate: true })
        const matches = current !== undefined && current.chainId === sender.chainId && current.contract === sender.contract &&
          current.fromAccount === sender.account && current.toAccount === recipient.account && current.kind === "confidential"
        if (!matches) return "unmatched" as const
        if (!(yield* store.insertChainCredit(creditRow(current.recipientCredited ? "already_booked" : "booked"), nowMs))) {
          return "duplicate" as const
        }
        if (current.status === "failed" || current.status === "expired") {
          yield* Effect.logWarning("a released reservation's transfer was mined: applied late").pipe(
            Effect.annotateLogs({ transfer_id: transferId, recorded: current.status })
          )
          yield* applyLate(current, nowMs)
          return "booked" as const
        }
        if (current.recipientCredited) return "already_booked" as const
        const balance = yield* store.lockBalance(recipient)
        yield* addCredit(recipient, balance, current.amount, `confidential transfer ${transferId}`, nowMs)
        yield* store.markRecipientCredited(transferId)
        return "booked" as const
      })
      if (booked !== "unmatched") return booked
      // Every debit needs the guardian's signature, so this means a second guardian with its
      // own books, a restored backup, or a leaked signing key: an operator must look.
      return yield* Effect.gen(function*() {
        if (!(yield* store.insertChainCredit(creditRow("unknown_transfer"), nowMs))) return "duplicate" as const
        yield* alert(
          recipient,
          "unknown_transfer",
          `ConfidentialTransfer ${transferId} (${log.txHash}:${log.logIndex}) has no matching reservation; its amount is unknown and not booked`,
          nowMs
        )
        return "unknown_transfer" as const
      })
    })

  /**
   * Books consecutive credit logs of one contract, in block order, as one unit of the group
   * committer (issue 16): one transaction, shared with the decisions and settlements queued
   * beside it, instead of one per log. A failure anywhere rolls all of them back (the group
   * runs again unit by unit), and the caller's cursor stays: the range is read again, its
   * booked logs recognised by (tx hash, log index). Re-runnable, as a unit must be: only SQL.
   */
  const bookLogs = (chainId: bigint, logs: ReadonlyArray<CreditLog>, nowMs: number) =>
    group.run(
      Effect.forEach(logs, (log) => log._tag === "Shielded" ? bookShield(chainId, log, nowMs) : bookTransferIn(chainId, log, nowMs), {
        discard: true
      }),
      {
        reservations: logs.flatMap((log) => (log._tag === "ConfidentialTransfer" ? [log.transferId.toLowerCase()] : [])),
        balances: logs.flatMap((log) => (log._tag === "Shielded" ? [refFor(chainId, log.contract, log.to)] : [])),
        credits: logs.map((log) => ({ chainId: chainId.toString(), txHash: log.txHash.toLowerCase(), logIndex: log.logIndex }))
      }
    ).pipe(Effect.mapError(storageFailure))

  /**
   * One follower step on a chain: find the contracts that name this guardian, then book
   * every followed contract's credit logs up to the confirmed block, in block order, and
   * move each cursor past what was booked. A crash between a booking and its cursor
   * move re-reads those logs, and their recorded (tx hash, log index) keeps them from
   * counting twice.
   */
  const followStep = (chainId: bigint) =>
    Effect.gen(function*() {
      const id = chainId.toString()
      const head = yield* chain.head(chainId)
      const safe = head.blockNumber - BigInt(timing.chainConfirmations)
      if (safe < 0n) return -1n
      const nowMs = yield* Clock.currentTimeMillis
      yield* store.startCursor(id, discoveryScope, 0n, nowMs).pipe(Effect.mapError(storageFailure))
      let from = (yield* store.cursor(id, discoveryScope).pipe(Effect.mapError(storageFailure))) ?? 0n
      while (from <= safe) {
        const to = from + chainBlockRangeMax - 1n < safe ? from + chainBlockRangeMax - 1n : safe
        for (const appointment of yield* chain.appointments(chainId, signer, from, to)) {
          const contract = appointment.contract.toLowerCase()
          // Books kept before credits came from the chain hold the credits the server
          // reported: reading that contract's past again would count them twice, so it is
          // followed from now on (an earlier credit never reported shows as a mismatch).
          const reported = yield* store.hasReportedCredits(id, contract).pipe(Effect.mapError(storageFailure))
          yield* store.startCursor(id, contract, reported ? safe + 1n : appointment.blockNumber, nowMs).pipe(
            Effect.mapError(storageFailure)
          )
          yield* Effect.logInfo("following a ConfidentialToken that names this guardian").pipe(
            Effect.annotateLogs({ chain_id: id, contract, from_block: (reported ? safe + 1n : appointment.blockNumber).toString() })
          )
        }
        yield* store.advanceCursor(id, discoveryScope, to + 1n, nowMs).pipe(Effect.mapError(storageFailure))
        from = to + 1n
      }
      const contracts = yield* store.followedContracts(id).pipe(Effect.mapError(storageFailure))
      for (const followed of contracts) {
        let next = followed.nextBlock
        while (next <= safe) {
          const to = next + chainBlockRangeMax - 1n < safe ? next + chainBlockRangeMax - 1n : safe
          // Before the credits: a veto is the one thing here with a deadline.
          for (const proposal of yield* chain.rotationProposals(chainId, getAddress(followed.contract), signer, next, to)) {
            yield* vetoIfUnapproved(chainId, proposal, nowMs)
          }
          const logs = yield* chain.creditLogs(chainId, getAddress(followed.contract), next, to)
          // A unit holds at most `logsPerUnit` logs: a catch-up after downtime must not hold every
          // row it touches locked in one long transaction.
          for (let start = 0; start < logs.length; start += logsPerUnit) {
            yield* bookLogs(chainId, logs.slice(start, start + logsPerUnit), nowMs)
          }
          yield* store.advanceCursor(id, followed.contract, to + 1n, nowMs).pipe(Effect.mapError(storageFailure))
          next = to + 1n
        }
      }
      return safe
    })

  const followChain = (chainId: bigint) => {
    const lock = followLocks.get(chainId)
    return lock === undefined
      ? Effect.fail(new GuardianError({ reason: "chain", message: `no RPC endpoint for chain ${chainId}` }))
      : Semaphore.withPermit(lock, followStep(chainId)).pipe(Effect.withSpan("Guardian.followChain"))
  }

  const sync = Effect.fn("Guardian.sync")(function*(request: typeof SyncRequest.Type) {
    if (!chain.knows(request.chainId)) {
      return yield* new GuardianError({ reason: "chain", message: `no RPC endpoint for chain ${request.chainId}` })
    }
    const block = yield* chain.blockOfTransaction(request.chainId, request.txHash as Hash)
    if (block === undefined) return { status: "not_found" } satisfies typeof SyncResult.Type
    const through = yield* followChain(request.chainId)
    return { status: block <= through ? "synced" : "pending" } satisfies typeof SyncResult.Type
  })

  // -------------------------------------------------------------------------------------------
  // reconciliation
  // -------------------------------------------------------------------------------------------

  /**
   * The balance the chain should hold at `blockNumber`: the confirmed books, adjusted by
   * the in-flight transfers already mined at that block but not settled yet (a recipient
   * credited by its event already has it), and by the credit logs the follower has not
   * booked yet (past its cursor: the confirmation depth and the poll interval).
   */
  const expectedOnChain = (account: AccountRef, blockNumber: bigint) =>
    Effect.gen(function*() {
      const [balance, inFlight] = yield* Effect.all([
        store.readBalance(account),
        store.openReservationsOf(account, reconcileInFlightMax)
      ]).pipe(Effect.mapError(storageFailure))
      let expected = balance.confirmed
      for (const reservation of inFlight) {
        const mined = yield* chain.isNonceUsed(
          BigInt(reservation.chainId),
          getAddress(reservation.contract),
          getAddress(reservation.fromAccount),
          reservation.nonce,
          blockNumber
        )
        if (!mined) continue
        if (reservation.fromAccount === account.account) expected -= reservation.amount
        if (
          reservation.kind === "confidential" && reservation.toAccount === account.account &&
          reservation.fromAccount !== account.account && !reservation.recipientCredited
        ) {
          expected += reservation.amount
        }
      }
      const cursor = yield* store.cursor(account.chainId, account.contract).pipe(Effect.mapError(storageFailure))
      if (cursor !== undefined && blockNumber - cursor >= chainBlockRangeMax) {
        // Too far behind to count what it has not booked in one read: no verdict rather than a false alarm.
        return yield* new GuardianError({ reason: "chain", message: "the chain follower is too far behind to reconcile" })
      }
      if (cursor !== undefined && cursor <= blockNumber) {
        const unbooked = yield* chain.creditLogs(
          BigInt(account.chainId),
          getAddress(account.contract),
          cursor,
          blockNumber,
          getAddress(account.account)
        )
        for (const log of unbooked) {
          const booked = yield* store.chainCreditRecorded(account.chainId, log.txHash.toLowerCase(), log.logIndex).pipe(
            Effect.mapError(storageFailure)
          )
          if (booked) continue
          if (log._tag === "Shielded") {
            expected += log.amount
            continue
          }
          // A reserved transfer was counted above; a released one the chain applied is not in the books yet.
          const reservation = yield* store.findReservation(log.transferId.toLowerCase(), { forUpdate: false }).pipe(
            Effect.mapError(storageFailure)
          )
          if (reservation !== undefined && !reservation.recipientCredited && (reservation.status === "failed" || reservation.status === "expired")) {
            expected += reservation.amount
          }
        }
      }
      return { expected, frozen: balance.frozenReason !== null }
    })

  const checkOnce = (account: AccountRef) =>
    Effect.gen(function*() {
      const chainId = BigInt(account.chainId)
      const head = yield* chain.head(chainId)
      const { expected, frozen } = yield* expectedOnChain(account, head.blockNumber)
      const onChain = yield* chain.encryptedBalance(chainId, getAddress(account.contract), getAddress(account.account), head.blockNumber)
      const commitment = Point.parse(onChain.commitment, { allowIdentity: true })
      const handle = Point.parse(onChain.guardianHandle, { allowIdentity: true })
      const matched = expected >= 0n && expected < ElGamal.amountLimit && commitment.ok && handle.ok &&
        ElGamal.matches(keys.encryption.secretKey, commitment.value, handle.value, expected)
      return { matched, frozen }
    })

  /**
   * A check and an alarm, never a block (D39): a mismatch that persists over one re-check
   * raises a `reconciliation_mismatch` alert (health, an error log without amounts, the
   * metric); the account's transfers go on. A match clears the account's alerts that a
   * match resolves, and lifts the one freeze there is (`late_confirmation_overdraw`).
   */
  const reconcileAccount = (account: AccountRef) =>
    Effect.gen(function*() {
      if (!chain.knows(BigInt(account.chainId))) {
        return yield* new GuardianError({ reason: "chain", message: `no RPC endpoint for chain ${account.chainId}` })
      }
      let check = yield* checkOnce(account)
      if (!check.matched) {
        yield* Effect.sleep(timing.reconcileRetryDelayMs)
        check = yield* checkOnce(account)
      }
      const nowMs = yield* Clock.currentTimeMillis
      if (check.matched) {
        const cleared = yield* store.clearAlerts(account, alertsClearedByMatch).pipe(Effect.mapError(storageFailure))
        if (check.frozen) {
          yield* store.setFrozen(account, null, nowMs).pipe(Effect.mapError(storageFailure))
        }
        if (cleared > 0 || check.frozen) {
          yield* Effect.logWarning("books and chain agree again: alerts cleared").pipe(
            Effect.annotateLogs({ chain_id: account.chainId, contract: account.contract, account: account.account, unfrozen: check.frozen })
          )
        }
        return { status: "matched", frozen: false } satisfies ReconcileResult
      }
      const raised = yield* alert(
        account,
        "reconciliation_mismatch",
        "the on-chain guardian handle does not decrypt to the booked balance",
        nowMs
      ).pipe(Effect.mapError(storageFailure))
      if (raised) yield* Metric.update(reconciliationMismatches, 1)
      return { status: "mismatched", frozen: check.frozen } satisfies ReconcileResult
    })

  const reconcile = Effect.fn("Guardian.reconcile")(function*(request: typeof ReconcileRequest.Type) {
    return yield* reconcileAccount(refFor(request.chainId, request.contract, request.account))
  })

  const reconcileAll = Effect.gen(function*() {
    let checked = 0
    let mismatched = 0
    let after: AccountRef | undefined
    for (;;) {
      const page = yield* store.ownedAccounts(after, reconcilePageMax).pipe(Effect.mapError(storageFailure))
      for (const account of page) {
        if (!chain.knows(BigInt(account.chainId))) continue
        const outcome = yield* Effect.result(reconcileAccount(account))
        checked++
        if (outcome._tag === "Success" && outcome.success.status === "mismatched") mismatched++
      }
      if (page.length < reconcilePageMax) break
      after = page[page.length - 1]
    }
    return { checked, mismatched }
  }).pipe(Effect.withSpan("Guardian.reconcileAll"))

  const toAlert = (row: AlertRow) =>
    Effect.gen(function*() {
      const base: typeof Alert.Type = {
        chainId: BigInt(row.chainId),
        contract: row.contract,
        account: row.account,
        kind: row.kind as typeof Alert.Type["kind"],
        since: DateTime.formatIso(DateTime.makeUnsafe(row.sinceMs)),
        lastSeen: DateTime.formatIso(DateTime.makeUnsafe(row.lastSeenMs)),
        explanation: row.explanation
      }
      if (row.kind !== "guardian_rotation_vetoed") return base
      // One alert per (contract, proposed signer): it carries the latest proposal's veto,
      // the only one that can still be pending (the contract holds one proposal at a time).
      const veto = yield* store.latestRotationVeto(row.chainId, row.contract, row.account)
      if (veto === undefined) return base
      return {
        ...base,
        veto: {
          proposalId: veto.proposalId,
          newSigner: veto.newSigner,
          executableAt: DateTime.formatIso(DateTime.makeUnsafe(Number(veto.executableAt) * 1000)),
          signature: veto.signature
        }
      } satisfies typeof Alert.Type
    })

  const rotationVeto = Effect.fn("Guardian.rotationVeto")(function*(request: typeof RotationVetoRequest.Type) {
    const veto = yield* store.rotationVetoOf(request.chainId.toString(), request.contract, request.proposalId).pipe(
      Effect.mapError(storageFailure)
    )
    if (veto === undefined) return null
    return {
      proposalId: veto.proposalId,
      newSigner: veto.newSigner,
      executableAt: DateTime.formatIso(DateTime.makeUnsafe(Number(veto.executableAt) * 1000)),
      signature: veto.signature
    } satisfies typeof RotationVetoResult.Type
  })

  // Ready while the storage answers: an alert or a frozen account concerns one balance and
  // must not take the guardian (every account's transfers) out of service.
  const health = Effect.all([store.frozenCount, store.alertCount, store.listAlerts(alertsListedMax)]).pipe(
    Effect.flatMap(([frozenAccounts, alertCount, rows]) =>
      Effect.forEach(rows, toAlert).pipe(Effect.map((alerts) => ({ ready: true, frozenAccounts, alertCount, alerts })))
    ),
    Effect.orElseSucceed(() => ({ ready: false, frozenAccounts: 0, alertCount: 0, alerts: [] }))
  )

  return Guardian.of({
    info,
    authorize,
    settle,
    credit,
    sync,
    nonZero,
    sealedBalance,
    sealedKeyTotals,
    reconcile,
    health,
    rotationVeto,
    resolveDueReservations,
    reconcileAll,
    followChain
  })
})
