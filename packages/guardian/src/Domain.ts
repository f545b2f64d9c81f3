/**
 * The guardian's requests, results and errors as Schemas: the wire contract between
 * the api server and the guardian, shared by the RPC group, the in-process client and
 * the HTTP client.
 *
 * Nothing here ever carries a plaintext amount toward the caller. Amounts appear only
 * in requests, and only where they are public anyway (a credit for a shield, the
 * amount of a public transfer) or are the caller's own policy limits. Byte strings are
 * 0x-prefixed hex; integers are decimal strings on the wire (bigint in memory).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

const u64Limit = 1n << 64n

/**
 * A 32-byte value as 0x-prefixed hex (transfer ids, digests).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Bytes32 = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{64}$/))

/**
 * A 20-byte EVM address as 0x-prefixed hex, any case.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AddressHex = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{40}$/))

/**
 * A BN254 G1 point in the EVM encoding (x ‖ y, 64 bytes) as 0x-prefixed hex.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PointHex = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{128}$/))

/**
 * Longest byte string accepted (a guardian note box is 146 bytes; a balance statement box 122).
 *
 * @since 0.1.0
 * @category constants
 */
export const bytesHexLengthMax = 2 + 2 * 1024

/**
 * Arbitrary bytes as 0x-prefixed hex, at most 1 KiB.
 *
 * @since 0.1.0
 * @category schemas
 */
export const BytesHex = Schema.String.check(
  Schema.isPattern(/^0x(?:[0-9a-fA-F]{2})*$/),
  Schema.isMaxLength(bytesHexLengthMax)
)

/**
 * A u64 in base units (an amount or a limit), decimal on the wire.
 *
 * @since 0.1.0
 * @category schemas
 */
export const BaseUnits = Schema.BigIntFromString.check(
  Schema.isGreaterThanOrEqualToBigInt(0n),
  Schema.isLessThanBigInt(u64Limit)
)

/**
 * A chain id, decimal on the wire.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ChainId = Schema.BigIntFromString.check(Schema.isGreaterThanBigInt(0n), Schema.isLessThanBigInt(u64Limit))

/**
 * The asset a balance is kept in: one ConfidentialToken on one chain.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Asset = Schema.Struct({ chainId: ChainId, contract: AddressHex })

/**
 * @since 0.1.0
 * @category models
 */
export type Asset = typeof Asset.Type

/**
 * An agent's spend policy as the server holds it when the agent signs (D22, D25),
 * amounts in base units. `hitlThreshold` null never holds.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PolicySnapshot = Schema.Struct({
  perTransactionLimit: BaseUnits,
  dailyLimit: BaseUnits,
  hitlThreshold: Schema.NullOr(BaseUnits),
  /** IANA zone in which the agent's day is read. */
  timeZone: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64))
})

/**
 * @since 0.1.0
 * @category models
 */
export type PolicySnapshot = typeof PolicySnapshot.Type

/**
 * The agent part of an authorization: the policy in force and whether the owner
 * approved this transfer (an approval skips the threshold check, D27).
 *
 * @since 0.1.0
 * @category schemas
 */
export const AgentContext = Schema.Struct({ policy: PolicySnapshot, approved: Schema.Boolean })

/**
 * What the guardian is asked to attest.
 *
 * - `confidential`: needs `toKey` (the recipient's registered key, looked up on chain
 *   by the server) and `sealedDigest` (over the three boxes).
 * - `public`: needs `amount`, the public amount paid out, which must equal the amount in
 *   the guardian's note; no `toKey`, no `sealedDigest`. An unshield has `to` = `from`.
 *
 * `fromKey` is the key the sender's balance is encrypted to (for an agent, its owner's).
 *
 * @since 0.1.0
 * @category schemas
 */
export const AuthorizeRequest = Schema.Struct({
  transferId: Bytes32,
  chainId: ChainId,
  contract: AddressHex,
  kind: Schema.Literals(["confidential", "public"]),
  from: AddressHex,
  to: AddressHex,
  fromKey: PointHex,
  toKey: Schema.optionalKey(PointHex),
  amount: Schema.optionalKey(BaseUnits),
  nonce: Schema.BigIntFromString.check(Schema.isGreaterThanOrEqualToBigInt(0n), Schema.isLessThanBigInt(1n << 256n)),
  /** Unix seconds. */
  deadline: BaseUnits,
  /** The guardian's sealed note {amount, r} (`Note.sealTransfer`'s `guardian` box). */
  guardianNote: BytesHex,
  sealedDigest: Schema.optionalKey(Bytes32),
  /** The API key that asked (an opaque id): its confirmed debits are totalled per key (D40). */
  apiKey: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(64))),
  agent: Schema.optionalKey(AgentContext),
  /**
   * A refund (D43): the transfer id of the confirmed confidential transfer it sends back, from
   * that transfer's recipient to its sender. The guardian refuses it when the refunds of that
   * transfer, this one included, would add up to more than its amount (`RefundExceeded`).
   */
  refundOf: Schema.optionalKey(Bytes32)
})

/**
 * @since 0.1.0
 * @category models
 */
export type AuthorizeRequest = typeof AuthorizeRequest.Type

/**
 * The transfer ciphertext the guardian computed: commitment and handles, EVM encodings.
 * `toHandle` is absent for a public transfer.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TransferCiphertext = Schema.Struct({
  commitment: PointHex,
  fromHandle: PointHex,
  toHandle: Schema.optionalKey(PointHex),
  guardianHandle: PointHex
})

/**
 * @since 0.1.0
 * @category models
 */
export type TransferCiphertext = typeof TransferCiphertext.Type

/**
 * Approved and reserved: the ciphertext to submit and the guardian's EIP-712 signature
 * over it, valid until `deadline` (unix seconds).
 *
 * @since 0.1.0
 * @category results
 */
export class Authorized extends Schema.TaggedClass<Authorized>()("Authorized", {
  transferId: Bytes32,
  ciphertext: TransferCiphertext,
  ciphertextDigest: Bytes32,
  signature: Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{130}$/)),
  deadline: BaseUnits
}) {}

/**
 * The sender's available balance (confirmed minus reserved) is below the amount.
 *
 * @since 0.1.0
 * @category results
 */
export class InsufficientBalance extends Schema.TaggedClass<InsufficientBalance>()("InsufficientBalance", {
  transferId: Bytes32
}) {}

/**
 * Why an agent's transfer breaks its policy (the amount-dependent rules of D25).
 *
 * @since 0.1.0
 * @category models
 */
export const PolicyViolationReason = Schema.Literals(["per_transaction_limit_exceeded", "daily_limit_exceeded"])

/**
 * An agent's transfer exceeds a limit of its policy.
 *
 * @since 0.1.0
 * @category results
 */
export class PolicyViolation extends Schema.TaggedClass<PolicyViolation>()("PolicyViolation", {
  transferId: Bytes32,
  reason: PolicyViolationReason
}) {}

/**
 * A refund (D43) that would take the refunds of its original transfer (confirmed and in flight,
 * this one included) above the original's amount: nothing reserved, nothing signed.
 *
 * @since 0.10.0
 * @category results
 */
export class RefundExceeded extends Schema.TaggedClass<RefundExceeded>()("RefundExceeded", {
  transferId: Bytes32
}) {}

/**
 * An agent's transfer is above its approval threshold: nothing reserved, nothing signed.
 *
 * @since 0.1.0
 * @category results
 */
export class HoldForApproval extends Schema.TaggedClass<HoldForApproval>()("HoldForApproval", {
  transferId: Bytes32,
  /**
   * The amount the guardian read in its box, sealed to `fromKey` (the owner's key for an
   * agent; `Note.sealHeldAmount`): what the owner decides on, whatever the agent's own note says.
   */
  sealedAmount: BytesHex
}) {}

/**
 * Why the guardian refused to consider a transfer at all. These are faults of the
 * request (or a frozen account), never statements about the amount.
 *
 * @since 0.1.0
 * @category models
 */
export const RefusedReason = Schema.Literals([
  "note_invalid",
  "amount_zero",
  "public_amount_mismatch",
  "inputs_inconsistent",
  "sender_key_invalid",
  "recipient_key_invalid",
  "sender_key_not_registered",
  "recipient_key_not_registered",
  "self_transfer",
  "deadline_out_of_range",
  "time_zone_invalid",
  "transfer_id_reused",
  "nonce_reused",
  "account_frozen",
  /**
   * An owner's approval of a held transfer asked under a new request (a fresh deadline) while
   * the attestation of an earlier approval of it can still be mined (`liveUntil`, its deadline):
   * the guardian attests the transfer again only once that one is dead (D45).
   */
  "earlier_attestation_live",
  /** An owner's approvals of a held transfer were decided under as many different requests as allowed (D45). */
  "redecisions_exhausted",
  // A refund (D43) of a transfer the guardian never attested as confidential between these two
  // parties (reversed), on this chain and contract; or of one it has not settled as confirmed yet.
  "refund_original_unknown",
  "refund_original_unsettled"
])

/**
 * @since 0.1.0
 * @category models
 */
export type RefusedReason = typeof RefusedReason.Type

/**
 * The request is malformed or inconsistent, the sender's account is frozen, or an approval
 * cannot be decided again (now, or at all).
 *
 * @since 0.1.0
 * @category results
 */
export class Refused extends Schema.TaggedClass<Refused>()("Refused", {
  transferId: Bytes32,
  reason: RefusedReason,
  /** With `earlier_attestation_live`: the deadline (unix seconds) until which the earlier attestation can be mined. */
  liveUntil: Schema.optionalKey(BaseUnits)
}) {}

/**
 * Every answer to `authorize`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AuthorizeResult = Schema.Union([Authorized, InsufficientBalance, PolicyViolation, RefundExceeded, HoldForApproval, Refused])

/**
 * @since 0.1.0
 * @category models
 */
export type AuthorizeResult = typeof AuthorizeResult.Type

/**
 * What the chain did with an attested transfer.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SettleRequest = Schema.Struct({
  transferId: Bytes32,
  outcome: Schema.Literals(["confirmed", "failed"])
})

/**
 * The state of a reservation after `settle`. It may differ from the outcome asked for
 * when the reservation was already final (see docs/guardian.md, expiry), when the chain
 * shows a transfer reported failed was mined (`confirmed`), or when a failure is reported
 * before the attestation's deadline while the chain cannot rule it out yet (`reserved`:
 * the expiry sweeper decides it from the chain).
 *
 * @since 0.1.0
 * @category schemas
 */
export const SettleResult = Schema.Struct({
  transferId: Bytes32,
  status: Schema.Literals(["confirmed", "failed", "expired", "reserved"])
})

/**
 * @since 0.1.0
 * @category models
 */
export type SettleResult = typeof SettleResult.Type

/**
 * A public amount that entered an account, reported by the caller. Only for a chain the
 * guardian has no endpoint for (tests, chain-free deployments): on a chain it follows,
 * every credit is booked from the contract's events (D39) and `Credit` answers
 * `CreditRefused`. `creditId` makes it idempotent.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CreditRequest = Schema.Struct({
  chainId: ChainId,
  contract: AddressHex,
  account: AddressHex,
  amount: BaseUnits.check(Schema.isGreaterThanBigInt(0n)),
  creditId: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200))
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const CreditResult = Schema.Struct({
  creditId: Schema.String,
  status: Schema.Literals(["applied", "duplicate"])
})

/**
 * Asks the guardian to book the credits of the chain up to the block a transaction was
 * mined in, now rather than at its next poll (the faucet calls it once its grant is
 * mined, so the grant is spendable when the faucet answers). It carries no amount: the
 * guardian reads the chain.
 *
 * @since 0.2.0
 * @category schemas
 */
export const SyncRequest = Schema.Struct({ chainId: ChainId, txHash: Bytes32 })

/**
 * `synced`: every credit up to the transaction's block is booked; `pending`: the block is
 * not yet as deep as the guardian's confirmation depth (it is booked once it is);
 * `not_found`: no receipt for the transaction (yet).
 *
 * @since 0.2.0
 * @category schemas
 */
export const SyncResult = Schema.Struct({ status: Schema.Literals(["synced", "pending", "not_found"]) })

/**
 * @since 0.1.0
 * @category schemas
 */
export const NonZeroRequest = Schema.Struct({
  account: AddressHex,
  assets: Schema.Array(Asset).check(Schema.isMaxLength(16))
})

/**
 * Per asset, whether the account's confirmed balance is non-zero (D19), in request order.
 *
 * @since 0.1.0
 * @category schemas
 */
export const NonZeroResult = Schema.Array(Schema.Struct({ chainId: ChainId, contract: AddressHex, nonZero: Schema.Boolean }))

/**
 * Asks for the account's balance sealed to its key. `publicKey` must be the account's
 * registered key; the guardian checks it on chain when it has the chain.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SealedBalanceRequest = Schema.Struct({
  chainId: ChainId,
  contract: AddressHex,
  account: AddressHex,
  publicKey: PointHex
})

/**
 * The balance statement {amount, version} sealed to the account's key
 * (`Note.openBalanceStatement` opens it), and the version of the guardian's books it
 * states (the count of changes to the confirmed balance).
 *
 * @since 0.1.0
 * @category schemas
 */
export const SealedBalanceResult = Schema.Struct({
  sealedStatement: BytesHex,
  version: Schema.BigIntFromString
})

/**
 * Every API key's total (D40), sealed to the account's key (`Note.openKeyTotal` opens it).
 * Asked with a `SealedBalanceRequest`: the same key check applies.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SealedKeyTotalsResult = Schema.Array(Schema.Struct({ apiKeyId: Schema.String, sealedTotal: BytesHex }))

/**
 * @since 0.1.0
 * @category schemas
 */
export const ReconcileRequest = Schema.Struct({ chainId: ChainId, contract: AddressHex, account: AddressHex })

/**
 * `mismatched` raises (or keeps) a `reconciliation_mismatch` alert; it never freezes.
 * `frozen` is whether the account is frozen at all (only `late_confirmation_overdraw`
 * freezes; a later match lifts it).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ReconcileResult = Schema.Struct({
  status: Schema.Literals(["matched", "mismatched"]),
  frozen: Schema.Boolean
})

/**
 * @since 0.1.0
 * @category models
 */
export type ReconcileResult = typeof ReconcileResult.Type

/**
 * What an alert is about (docs/guardian.md, "Alerts"):
 *
 * - `reconciliation_mismatch`: the on-chain guardian handle does not decrypt to the books;
 * - `credit_out_of_range`: a credit the chain recorded would take the booked balance out of u64;
 * - `unknown_transfer`: a `ConfidentialTransfer` with no reservation (its amount is unknown);
 * - `late_confirmation_overdraw`: a transfer confirmed after its reservation expired, for more
 *   than the sender has left (the only freeze);
 * - `decision_conflict`: a transfer id already decided was asked about with a different request
 *   (another policy, amount box or party): refused, since only a caller testing amounts against
 *   the guardian's answers does that (`account` is the sender);
 * - `guardian_rotation_vetoed`: the owner proposed to replace this guardian by a signer the
 *   operator did not approve (`account` is that signer); the guardian signed the cancellation,
 *   which the alert carries for anyone to relay before the proposal becomes executable.
 *
 * @since 0.2.0
 * @category schemas
 */
export const AlertKind = Schema.Literals([
  "reconciliation_mismatch",
  "credit_out_of_range",
  "unknown_transfer",
  "late_confirmation_overdraw",
  "guardian_rotation_vetoed",
  "decision_conflict"
])

/**
 * The guardian's signed veto of one rotation proposal: `signature` is its EIP-712
 * `CancelGuardianRotation(proposalId, newSigner)`, the argument of the contract's
 * `cancelGuardianRotationBySignature`. Public by nature: whoever submits it only cancels
 * that one proposal.
 *
 * @since 0.3.0
 * @category schemas
 */
export const RotationVeto = Schema.Struct({
  proposalId: Schema.BigIntFromString,
  newSigner: AddressHex,
  /** When the proposal becomes executable (ISO 8601, UTC): the veto must be mined before. */
  executableAt: Schema.String,
  signature: BytesHex
})

/**
 * An open alert, for an operator: which balance, since when, why. Never an amount.
 *
 * @since 0.2.0
 * @category schemas
 */
export const Alert = Schema.Struct({
  chainId: ChainId,
  contract: AddressHex,
  account: AddressHex,
  kind: AlertKind,
  /** When the alert was first raised (ISO 8601, UTC). */
  since: Schema.String,
  /** When it was last confirmed. */
  lastSeen: Schema.String,
  explanation: Schema.String,
  /** `guardian_rotation_vetoed` only: the latest vetoed proposal to `account`, ready to relay. */
  veto: Schema.optionalKey(RotationVeto)
})

/**
 * Asks for the guardian's veto of one rotation proposal of one contract: the relay asks for
 * exactly the proposal its own contract holds, so no alert list (which anyone can crowd with
 * contracts of their own) stands between a veto and its relay.
 *
 * @since 0.3.0
 * @category schemas
 */
export const RotationVetoRequest = Schema.Struct({
  chainId: ChainId,
  contract: AddressHex,
  proposalId: Schema.BigIntFromString
})

/**
 * The signed cancellation, or null when the guardian has not vetoed that proposal (an
 * approved signer, or a proposal its follower has not seen yet).
 *
 * @since 0.3.0
 * @category schemas
 */
export const RotationVetoResult = Schema.NullOr(RotationVeto)

/**
 * D55: the guardian's re-encryption of an account's balance to a new key. `nonce` is one of the
 * account's replay nonces (the contract's bitmap, shared with its transfers); `deadline` in
 * seconds since the epoch.
 *
 * @since 0.12.0
 * @category schemas
 */
export const KeyRotationRequest = Schema.Struct({
  chainId: ChainId,
  contract: AddressHex,
  account: AddressHex,
  newKey: PointHex,
  nonce: Schema.BigIntFromString,
  deadline: Schema.BigIntFromString,
  /**
   * D68: set for an agent wallet (an account with no registered key, its balance encrypted to
   * the key pinned for it): its owner's wallet, whose key registered on chain must be `newKey`.
   */
  keyOwner: Schema.optionalKey(AddressHex)
})

/**
 * The balance encrypted to the new key and the guardian's (three 64-byte points), the digests of
 * the balance it replaces and of the new one, and the guardian's EIP-712 `KeyRotation` signature.
 *
 * @since 0.12.0
 * @category schemas
 */
export const KeyRotationResult = Schema.Struct({
  commitment: PointHex,
  ownerHandle: PointHex,
  guardianHandle: PointHex,
  previousBalanceDigest: Bytes32,
  balanceDigest: Bytes32,
  guardianSignature: BytesHex
})

/**
 * D55: after a rotation was mined, the account's remembered key is forgotten and its hold lifted.
 * `nonce`: the mined rotation's attestation (none: the server did not attest it in this request);
 * the hold is lifted at once only if it is the latest the guardian attested for the account.
 * `failed`: the server saw the rotation's transaction fail (a revert, or not mined in its wait);
 * its attestation (`nonce`, `deadline`, the `previousBalanceDigest` it bound) may still be mined by
 * anyone holding its calldata. Any report but a mined one of the latest lifts the hold only once
 * the chain shows the latest attestation dead (a later one may be live: D55).
 *
 * @since 0.12.0
 * @category schemas
 */
export const ForgetKeyRequest = Schema.Struct({
  chainId: ChainId,
  contract: AddressHex,
  account: AddressHex,
  nonce: Schema.optionalKey(Schema.BigIntFromString),
  failed: Schema.optionalKey(Schema.Struct({
    nonce: Schema.BigIntFromString,
    deadline: Schema.BigIntFromString,
    previousBalanceDigest: Bytes32
  }))
})

/**
 * The guardian's health. `ready`: its storage answers (alerts and frozen accounts never
 * take it out of service: each concerns one balance). `alertCount` and `frozenAccounts`
 * count; `alerts` lists the oldest open alerts (at most `alertsListedMax`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const HealthResult = Schema.Struct({
  ready: Schema.Boolean,
  frozenAccounts: Schema.Int,
  alertCount: Schema.Int,
  alerts: Schema.Array(Alert)
})

/**
 * At most this many alerts are listed by `Health`.
 *
 * @since 0.2.0
 * @category constants
 */
export const alertsListedMax = 100

/**
 * The guardian's public identity.
 *
 * @since 0.1.0
 * @category schemas
 */
export const InfoResult = Schema.Struct({ signer: AddressHex, encryptionKey: PointHex })

/**
 * `settle` for a transfer id the guardian never reserved.
 *
 * @since 0.1.0
 * @category errors
 */
export class ReservationNotFound extends Schema.TaggedError<ReservationNotFound>()("ReservationNotFound", {
  transferId: Bytes32
}) {}

/**
 * A credit id seen before with a different account, asset or amount.
 *
 * @since 0.1.0
 * @category errors
 */
export class CreditIdReused extends Schema.TaggedError<CreditIdReused>()("CreditIdReused", {
  creditId: Schema.String
}) {}

/**
 * `credit` for a chain the guardian follows: there, credits come from the chain's events
 * only (D39), so a reported one would be booked twice.
 *
 * @since 0.2.0
 * @category errors
 */
export class CreditRefused extends Schema.TaggedError<CreditRefused>()("CreditRefused", {
  creditId: Schema.String,
  reason: Schema.Literals(["credits_come_from_the_chain"])
}) {}

/**
 * D55: the balance could change under a key rotation (an open reservation, books behind the
 * chain), or the new key does not parse, or (D68, an agent wallet) is not its owner's registered
 * key: nothing was signed; retry once it settles. Also refused for good: an account with no
 * registered key named without `keyOwner`, or a registered one named with it (D68).
 *
 * @since 0.12.0
 * @category errors
 */
export class KeyRotationBusy extends Schema.TaggedError<KeyRotationBusy>()("KeyRotationBusy", {
  account: AddressHex,
  reason: Schema.Literals([
    "reservations_open",
    "books_behind_chain",
    "new_key_invalid",
    "new_key_not_owners",
    "account_not_registered",
    "account_registered"
  ])
}) {}

/**
 * D68: an agent wallet's rotation with nothing to do: its balance is encrypted to the new key
 * already (a retry after the rotation was mined), or no key is pinned for it in this contract
 * (it never took part in a transfer there: the next one pins the owner's key then).
 *
 * @since 0.14.0
 * @category errors
 */
export class KeyRotationNotNeeded extends Schema.TaggedError<KeyRotationNotNeeded>()("KeyRotationNotNeeded", {
  account: AddressHex,
  reason: Schema.Literals(["key_current", "no_pinned_key"])
}) {}

/**
 * `sealedBalance` with a key that is not the account's registered key.
 *
 * @since 0.1.0
 * @category errors
 */
export class AccountKeyMismatch extends Schema.TaggedError<AccountKeyMismatch>()("AccountKeyMismatch", {
  account: AddressHex
}) {}

/**
 * The guardian could not answer (an operating failure, never a decision): its storage or the
 * chain failed, it is unreachable, or the caller is not authenticated. `storage`, `chain` and
 * `unavailable` are worth a retry unless `retryable` says otherwise (a storage failure carries
 * its database driver's verdict: a lost connection is retryable, a refused statement is not);
 * `unauthorized` is a configuration error. `retryable` is optional on the wire, so a guardian and
 * a server of different versions still understand each other.
 *
 * @since 0.1.0
 * @category errors
 */
export class GuardianError extends Schema.TaggedError<GuardianError>()("GuardianError", {
  reason: Schema.Literals(["storage", "chain", "unavailable", "unauthorized"]),
  message: Schema.String,
  retryable: Schema.optionalKey(Schema.Boolean)
}) {
  /** Whether the same call can succeed later: `retryable` when set, else by `reason`. */
  get isRetryable(): boolean {
    return this.retryable ?? this.reason !== "unauthorized"
  }
}

/**
 * The most requests one `AuthorizeMany` carries: an actor's turn at most (D73), as many as one
 * group commit runs.
 *
 * @since 0.11.0
 * @category constants
 */
export const authorizeManyMax = 64

/**
 * One sender's transfers of an actor's turn (D73), in the order the guardian decides them.
 *
 * @since 0.11.0
 * @category schemas
 */
export const AuthorizeManyRequest = Schema.Struct({
  requests: Schema.Array(AuthorizeRequest).check(Schema.isMinLength(1), Schema.isMaxLength(authorizeManyMax))
})

/**
 * Each request's answer, in the requests' order: its decision, or the failure of that request
 * alone (a rotation hold, storage), which is what `Authorize` would have failed with.
 *
 * @since 0.11.0
 * @category schemas
 */
export const AuthorizeManyResult = Schema.Struct({
  results: Schema.Array(Schema.Union([Authorized, InsufficientBalance, PolicyViolation, RefundExceeded, HoldForApproval, Refused, GuardianError]))
})

/**
 * @since 0.11.0
 * @category models
 */
export type AuthorizeOutcome = AuthorizeResult | GuardianError
