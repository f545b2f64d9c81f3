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
 * Concurrency: one decision at a time per sending account in this process (a keyed
 * semaphore), and one SQL transaction per decision that locks the account's balance
 * row (SELECT … FOR UPDATE), so several guardian processes on one PostgreSQL database
 * are safe too. No SQL transaction spans a chain read.
 *
 * @since 0.1.0
 */
import { hmac } from "@noble/hashes/hmac.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex as nobleBytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import { Attestation, ElGamal, EncryptionKey, Note, Point } from "@pps/crypto"
import { Clock, Context, Data, Effect, Layer, Metric, RcMap, Schedule, Schema, Semaphore } from "effect"
import { type SqlError, SqlClient } from "effect/sql"
import { type Address, bytesToHex, getAddress, type Hex, hexToBytes } from "viem"
import { ChainReader } from "./ChainReader.ts"
import {
  type AccountKeyMismatch,
  AccountKeyMismatch as AccountKeyMismatchError,
  Authorized,
  type AuthorizeRequest,
  type AuthorizeResult,
  CreditIdReused,
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
  type SettleRequest,
  type SettleResult
} from "./Domain.ts"
import type { GuardianKeys } from "./GuardianKeys.ts"
import { makeAtRestBox } from "./internal/atRest.ts"
import { bucketOf, bucketRange, dayWindow, isValidTimeZone } from "./internal/dayWindow.ts"
import { type AccountRef, makeStore, type ReservationRow, type Store } from "./internal/store.ts"

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
  /** How often due reservations are resolved. */
  readonly sweepIntervalMs: number
  /** How often every owned account is reconciled with the chain; 0 disables the sweep. */
  readonly reconcileIntervalMs: number
  /**
   * A mismatch is re-checked once after this delay before the account is frozen: a
   * shield lands on chain before the server reports its credit.
   */
  readonly reconcileRetryDelayMs: number
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
  reconcileRetryDelayMs: 5_000
}

/** Reservations resolved per sweep step; the rest wait for the next step. */
const sweepBatchMax = 100
/** In-flight reservations of one account considered by a reconciliation (each costs one chain read). */
const reconcileInFlightMax = 64
/** Accounts read per page by the reconciliation sweep. */
const reconcilePageMax = 200

/**
 * Counts reconciliation mismatches that froze an account.
 *
 * @since 0.1.0
 * @category metrics
 */
export const reconciliationMismatches = Metric.counter("guardian_reconciliation_mismatches_total", {
  description: "Accounts frozen because the on-chain guardian handle did not decrypt to the booked balance",
  incremental: true
})

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
  readonly credit: (request: typeof CreditRequest.Type) => Effect.Effect<typeof CreditResult.Type, CreditIdReused | GuardianError>
  readonly nonZero: (request: typeof NonZeroRequest.Type) => Effect.Effect<typeof NonZeroResult.Type, GuardianError>
  readonly sealedBalance: (
    request: typeof SealedBalanceRequest.Type
  ) => Effect.Effect<typeof SealedBalanceResult.Type, AccountKeyMismatch | GuardianError>
  readonly reconcile: (request: typeof ReconcileRequest.Type) => Effect.Effect<ReconcileResult, GuardianError>
  readonly health: Effect.Effect<typeof HealthResult.Type>
  /** Resolves every reservation past its expiry (the sweeper runs it periodically). */
  readonly resolveDueReservations: Effect.Effect<number, GuardianError>
  /** Reconciles every owned account on every chain it has an endpoint for. */
  readonly reconcileAll: Effect.Effect<{ readonly checked: number; readonly mismatched: number }, GuardianError>
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
  static readonly layer = (options: { readonly keys: GuardianKeys; readonly timing?: Partial<Timing> }) =>
    Layer.effect(
      Guardian,
      Effect.gen(function*() {
        const guardian = yield* make(options.keys, { ...defaultTiming, ...options.timing })
        const timing = { ...defaultTiming, ...options.timing }
        yield* guardian.resolveDueReservations.pipe(
          Effect.catch((error) => Effect.logWarning("reservation sweep failed").pipe(Effect.annotateLogs("reason", error.message))),
          Effect.repeat(Schedule.spaced(timing.sweepIntervalMs)),
          Effect.forkScoped
        )
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
          request.sealedDigest ?? ""
        ].map((part) => String(part).toLowerCase()).join("|")
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
  const signature = Attestation.sign(keys.signerPrivateKey, typedData)
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

/** A concurrent twin inserted the same transfer id first: roll back and answer from its row. */
class TransferIdRace extends Data.TaggedError("TransferIdRace")<{}> {}

const encodeAuthorized = Schema.encodeSync(Authorized)
const decodeAuthorized = Schema.decodeUnknownSync(Authorized)

const make = Effect.fnUntraced(function*(keys: GuardianKeys, timing: Timing) {
  const sql = yield* SqlClient.SqlClient
  const chain = yield* ChainReader
  const store: Store = makeStore(sql, makeAtRestBox(keys.atRestKey))
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
  // authorize
  // -------------------------------------------------------------------------------------------

  const decide = (
    request: AuthorizeRequest,
    prepared: Prepared | RefusedReason,
    digest: string,
    nowMs: number
  ): Effect.Effect<AuthorizeResult, SqlError.SqlError | TransferIdRace> =>
    Effect.gen(function*() {
      const transferId = request.transferId.toLowerCase()
      const existing = yield* store.findReservation(transferId, { forUpdate: false })
      if (existing !== undefined) {
        // Idempotent per transfer id: the same request replays the recorded decision.
        return existing.requestDigest === digest
          ? decodeAuthorized(JSON.parse(existing.result))
          : new Refused({ transferId, reason: "transfer_id_reused" })
      }
      if (typeof prepared === "string") return new Refused({ transferId, reason: prepared })
      const { amount, sender } = prepared
      const balance = yield* store.lockBalance(sender)
      if (balance.frozenReason !== null) return new Refused({ transferId, reason: "account_frozen" })
      if (yield* store.nonceTaken(sender, request.nonce)) return new Refused({ transferId, reason: "nonce_reused" })

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
        return new HoldForApproval({ transferId })
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
        result: JSON.stringify(encodeAuthorized(prepared.authorized))
      }, nowMs)
      if (!inserted) return yield* new TransferIdRace()
      yield* store.writeBalance(sender, { ...balance, reserved: balance.reserved + amount, owned: true })
      if (spendBucket !== null) yield* store.addSpend(sender, spendBucket, amount)
      return prepared.authorized
    })

  const authorize = Effect.fn("Guardian.authorize")(function*(request: AuthorizeRequest) {
    const nowMs = yield* Clock.currentTimeMillis
    const prepared = prepare(request, keys, nowMs, timing)
    const digest = requestDigest(keys.atRestKey, request)
    const sender = refFor(request.chainId, request.contract, request.from)
    const result = yield* withAccountLock(sender, sql.withTransaction(decide(request, prepared, digest, nowMs))).pipe(
      // The twin committed first (another sender's lock): its row now answers.
      Effect.catchTag("TransferIdRace", () => sql.withTransaction(decide(request, prepared, digest, nowMs))),
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
   * Applies a mined transfer to the books: debit the sender's confirmed balance (and its
   * reservation when still held), credit the recipient of a confidential transfer.
   * `held` is false for a confirmation that arrives after the reservation expired.
   */
  const applyConfirmed = (reservation: ReservationRow, held: boolean, nowMs: number) =>
    Effect.gen(function*() {
      const sender = senderOf(reservation)
      const credited = reservation.kind === "confidential" && reservation.toAccount !== reservation.fromAccount
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
        yield* store.writeBalance(recipient, {
          ...recipientBalance,
          confirmed: recipientBalance.confirmed + reservation.amount,
          version: recipientBalance.version + 1n
        })
      }
      // An expired reservation gave its daily spend back; the mined transfer takes it again.
      if (!held && reservation.spendBucket !== null) yield* store.addSpend(sender, reservation.spendBucket, reservation.amount)
      yield* store.setReservationStatus(reservation.transferId, "confirmed", nowMs)
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

  const freeze = (account: AccountRef, reason: string, nowMs: number) =>
    Effect.gen(function*() {
      yield* store.lockBalance(account)
      yield* store.setFrozen(account, reason, nowMs)
      yield* Metric.update(reconciliationMismatches, 1)
      yield* Effect.logError("account frozen: the guardian refuses to attest for it").pipe(
        Effect.annotateLogs({ chain_id: account.chainId, contract: account.contract, account: account.account, reason })
      )
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
        const applied = yield* applyConfirmed(reservation, false, nowMs)
        if (applied === "overdraw") {
          yield* freeze(senderOf(reservation), "late_confirmation_overdraw", nowMs)
          return "expired" as const
        }
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
    const found = yield* store.findReservation(transferId, { forUpdate: false }).pipe(Effect.mapError(storageFailure))
    if (found === undefined) return yield* new ReservationNotFound({ transferId })
    const status = yield* withAccountLock(senderOf(found), sql.withTransaction(settleLocked(transferId, request.outcome, nowMs))).pipe(
      Effect.catchTag("SqlError", (error) => Effect.fail(storageFailure(error)))
    )
    yield* Effect.logDebug("settled").pipe(Effect.annotateLogs({ transfer_id: transferId, status }))
    return { transferId, status } satisfies SettleResult
  })

  /**
   * What the chain says about a due reservation: mined (its nonce is used), never
   * minable (unused, and the chain's time is past the deadline), or not yet known.
   * Without an endpoint for the chain, the guardian's clock alone decides.
   */
  const chainVerdict = (reservation: ReservationRow) =>
    Effect.gen(function*() {
      const chainId = BigInt(reservation.chainId)
      if (!chain.knows(chainId)) return "expired_unverified" as const
      const head = yield* chain.head(chainId)
      if (head.timestampSeconds <= reservation.deadline) return "undecided" as const
      const used = yield* chain.isNonceUsed(
        chainId,
        getAddress(reservation.contract),
        getAddress(reservation.fromAccount),
        reservation.nonce,
        head.blockNumber
      )
      return used ? ("mined" as const) : ("expired" as const)
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

  const sealedBalance = Effect.fn("Guardian.sealedBalance")(function*(request: typeof SealedBalanceRequest.Type) {
    const account = getAddress(request.account)
    const mismatch = new AccountKeyMismatchError({ account: request.account })
    const publicKey = EncryptionKey.parsePublicKey(hexToBytes(request.publicKey as Hex))
    if (!publicKey.ok) return yield* mismatch
    // Sealing to any key the caller names would let whoever calls the guardian read any
    // balance; with the chain at hand, only the account's registered key is accepted.
    if (chain.knows(request.chainId)) {
      const registered = yield* chain.encryptionKeyOf(request.chainId, getAddress(request.contract), account)
      if (registered === undefined || bytesToHex(registered) !== bytesToHex(publicKey.value)) return yield* mismatch
    }
    const balance = yield* store.readBalance(refFor(request.chainId, request.contract, request.account)).pipe(
      Effect.mapError(storageFailure)
    )
    const sealed = Note.sealBalanceStatement({
      chainId: request.chainId,
      contract: getAddress(request.contract),
      account,
      accountKey: publicKey.value,
      statement: { amount: balance.confirmed, ciphertextVersion: balance.version }
    })
    return { sealedStatement: hexOf(sealed), version: balance.version }
  })

  // -------------------------------------------------------------------------------------------
  // reconciliation
  // -------------------------------------------------------------------------------------------

  /**
   * The balance the chain should hold at `blockNumber`: the confirmed books, adjusted by
   * the in-flight transfers already mined at that block but not settled yet.
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
        if (reservation.kind === "confidential" && reservation.toAccount === account.account && reservation.fromAccount !== account.account) {
          expected += reservation.amount
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

  const reconcileAccount = (account: AccountRef) =>
    Effect.gen(function*() {
      if (!chain.knows(BigInt(account.chainId))) {
        return yield* new GuardianError({ reason: "chain", message: `no RPC endpoint for chain ${account.chainId}` })
      }
      let check = yield* checkOnce(account)
      if (!check.matched && !check.frozen) {
        yield* Effect.sleep(timing.reconcileRetryDelayMs)
        check = yield* checkOnce(account)
      }
      const nowMs = yield* Clock.currentTimeMillis
      if (check.matched) {
        if (check.frozen) {
          // The books and the chain agree again (e.g. the missing credit was recorded).
          yield* store.setFrozen(account, null, nowMs).pipe(Effect.mapError(storageFailure))
          yield* Effect.logWarning("account unfrozen: books and chain agree again").pipe(
            Effect.annotateLogs({ chain_id: account.chainId, contract: account.contract, account: account.account })
          )
        }
        return { status: "matched", frozen: false } satisfies ReconcileResult
      }
      if (!check.frozen) {
        yield* withAccountLock(account, sql.withTransaction(freeze(account, "reconciliation_mismatch", nowMs))).pipe(
          Effect.mapError(storageFailure)
        )
      }
      return { status: "mismatched", frozen: true } satisfies ReconcileResult
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

  const health = store.frozenCount.pipe(
    Effect.map((frozenAccounts) => ({ ready: frozenAccounts === 0, frozenAccounts })),
    Effect.orElseSucceed(() => ({ ready: false, frozenAccounts: 0 }))
  )

  return Guardian.of({
    info,
    authorize,
    settle,
    credit,
    nonZero,
    sealedBalance,
    reconcile,
    health,
    resolveDueReservations,
    reconcileAll
  })
})
