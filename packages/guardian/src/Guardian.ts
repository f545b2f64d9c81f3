/**
 * The guardian: the confidential ledger of the service. It keeps every account's
 * plaintext balance (sealed at rest), decides the amount-dependent predicates (enough
 * balance? within the agent's limits? above its approval threshold?), reserves what it
 * approves, and signs the EIP-712 attestation the ConfidentialToken requires for every
 * debit. It never returns an amount.
 *
 * This module is the service and its wiring. Its work is done by named steps over an explicit
 * context (steps/GuardianContext.ts), each in a module named for it:
 * - the decision path, `authorize` (steps/Authorize.ts): Prepare (validation, the note opened,
 *   the ciphertext, the attestation), PartyKeys (whose keys it encrypts to), Decide (replay,
 *   re-decisions, record), Evaluate (limits, balance, approval threshold), Reserve;
 * - settlement and expiry: Settle, Expiry, over the books' changes in Books;
 * - credits: Credit (reported, on a chain it does not follow), FollowChain and BookCredits
 *   (from the chain, D39), RotationVeto;
 * - Reconcile, and the read-only Statements and Health.
 *
 * Concurrency: decisions, settlements and the chain follower's bookings run in sequence
 * through the group committer (internal/groupCommit.ts): the calls that arrive while one
 * transaction runs share the next one, each caller answered after the commit that holds
 * its effect. Every unit locks the rows it changes (SELECT … FOR UPDATE), so several
 * guardian processes on one PostgreSQL database are safe too; the other writers (reported
 * credits, the expiry sweeper) take the per-account lock of this process
 * (internal/accountLane.ts) and their own transaction. No SQL transaction spans a chain read.
 *
 * Credits come from the chain (D39): the guardian follows the events of every
 * ConfidentialToken that names it as its guardian, in block order, past a confirmation
 * depth, and books each credit exactly once (a row per log, in the transaction that
 * changes the balance). Reconciliation is a check and an alarm: a mismatch raises an
 * alert, it never freezes an account (an outsider's deposit must not block anyone).
 *
 * Failures: an operating failure (storage, chain) is a `GuardianError` that says whether a
 * retry can help; a defect only ever means a broken invariant (internal/Invariant.ts).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Schedule, Semaphore } from "effect"
import { SqlClient } from "effect/sql"
import { type Address, bytesToHex, getAddress } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { ChainReader } from "./ChainReader.ts"
import type {
  AccountKeyMismatch,
  AuthorizeOutcome,
  AuthorizeRequest,
  AuthorizeResult,
  CreditIdReused,
  CreditRefused,
  CreditRequest,
  CreditResult,
  GuardianError,
  HealthResult,
  InfoResult,
  NonZeroRequest,
  NonZeroResult,
  ReconcileRequest,
  ReconcileResult,
  ReservationNotFound,
  RotationVetoRequest,
  RotationVetoResult,
  ForgetKeyRequest,
  KeyRotationBusy,
  KeyRotationNotNeeded,
  KeyRotationRequest,
  KeyRotationResult,
  SealedBalanceRequest,
  SealedBalanceResult,
  SealedKeyTotalsResult,
  SettleRequest,
  SettleResult,
  SyncRequest,
  SyncResult
} from "./Domain.ts"
import type { GuardianKeys } from "./GuardianKeys.ts"
import * as AccountLane from "./internal/accountLane.ts"
import { makeAtRestBox } from "./internal/atRest.ts"
import * as GroupCommit from "./internal/groupCommit.ts"
import { makeStore, type RowHints } from "./internal/store.ts"
import { authorize, authorizeMany } from "./steps/Authorize.ts"
import { credit } from "./steps/Credit.ts"
import { resolveDueReservations } from "./steps/Expiry.ts"
import { followChain, sync } from "./steps/FollowChain.ts"
import type { GuardianContext } from "./steps/GuardianContext.ts"
import { health } from "./steps/Health.ts"
import { makePartyKeyCache } from "./steps/PartyKeys.ts"
import { reconcile, reconcileAll } from "./steps/Reconcile.ts"
import { forgetPartyKey, keyRotation, loadRotationHolds } from "./steps/KeyRotation.ts"
import { rotationVeto } from "./steps/RotationVeto.ts"
import { settle } from "./steps/Settle.ts"
import { nonZero, sealedBalance, sealedKeyTotals } from "./steps/Statements.ts"

/** The reconciliation mismatches metric (defined with reconciliation, steps/Reconcile.ts). */
export { reconciliationMismatches } from "./steps/Reconcile.ts"

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
  /** One sender's transfers of an actor's turn, decided in their order; each answer its own (D73). */
  readonly authorizeMany: (requests: ReadonlyArray<AuthorizeRequest>) => Effect.Effect<ReadonlyArray<AuthorizeOutcome>>
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
  /** D55: the account's balance re-encrypted to a new key, attested (`rotateEncryptionKey`); D68: an agent wallet's too. */
  readonly keyRotation: (
    request: typeof KeyRotationRequest.Type
  ) => Effect.Effect<typeof KeyRotationResult.Type, KeyRotationBusy | KeyRotationNotNeeded | GuardianError>
  /** D55: forgets the account's remembered key once its rotation is mined; D68: moves an agent's pin if it was. */
  readonly forgetKey: (request: typeof ForgetKeyRequest.Type) => Effect.Effect<void, GuardianError>
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
 * The background loops for the layer's life: the expiry sweep, one chain follower per chain,
 * and the reconciliation sweep, each unless its interval is 0. A failed round is logged and
 * the loop goes on.
 */
const runSweepers = Effect.fnUntraced(function*(guardian: GuardianShape, timing: Timing) {
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
})

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
        const timing = { ...defaultTiming, ...options.timing }
        const guardian = yield* make(options.keys, timing, options.approvedRotations ?? [])
        yield* runSweepers(guardian, timing)
        return guardian
      })
    )
}

/**
 * The guardian's context: its services and the state its steps share, built once. Every
 * step reads it; none looks a service up per call.
 */
const makeContext = Effect.fnUntraced(function*(keys: GuardianKeys, timing: Timing, approvedRotations: ReadonlyArray<Address>) {
  const sql = yield* SqlClient.SqlClient
  const chain = yield* ChainReader
  const store = makeStore(sql, makeAtRestBox(keys.atRestKey))
  const group = yield* GroupCommit.make<RowHints>(store.withHeldRows, store.prefetch)
  const accountLane = yield* AccountLane.make
  return {
    keys,
    timing,
    sql,
    chain,
    store,
    group,
    accountLane,
    partyKeys: makePartyKeyCache(),
    rotationsPending: new Map(),
    followLocks: new Map(chain.chainIds.map((chainId) => [chainId, Semaphore.makeUnsafe(1)] as const)),
    signer: getAddress(keys.info.signer),
    signerAccount: privateKeyToAccount(bytesToHex(keys.signerPrivateKey)),
    approvedRotations: new Set(approvedRotations.map((address) => address.toLowerCase()))
  } satisfies GuardianContext
})

/** The service: each operation one step over the context. */
const make = Effect.fnUntraced(function*(keys: GuardianKeys, timing: Timing, approvedRotations: ReadonlyArray<Address>) {
  const context: GuardianContext = yield* makeContext(keys, timing, approvedRotations)
  // D55: a rotation's hold outlives a restart inside its window.
  yield* loadRotationHolds(context)
  return Guardian.of({
    info: { signer: keys.info.signer, encryptionKey: keys.info.encryptionKey },
    authorize: (request) => authorize(context, request),
    authorizeMany: (requests) => authorizeMany(context, requests),
    settle: (request) => settle(context, request),
    credit: (request) => credit(context, request),
    sync: (request) => sync(context, request),
    nonZero: (request) => nonZero(context, request),
    sealedBalance: (request) => sealedBalance(context, request),
    sealedKeyTotals: (request) => sealedKeyTotals(context, request),
    reconcile: (request) => reconcile(context, request),
    health: health(context),
    rotationVeto: (request) => rotationVeto(context, request),
    keyRotation: (request) => keyRotation(context, request),
    forgetKey: (request) => forgetPartyKey(context, request),
    resolveDueReservations: resolveDueReservations(context),
    reconcileAll: reconcileAll(context),
    followChain: (chainId) => followChain(context, chainId)
  })
})
