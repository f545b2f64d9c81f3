/**
 * The guardian store's rows: what its functions take and answer, the SQL rows they read,
 * and the identities that bind each sealed amount to its row (the at-rest box's associated
 * data) and key the rows a group holds in memory.
 */

/** A balance's identity: decimal chain id, lower-case contract and account addresses. */
export interface AccountRef {
  readonly chainId: string
  readonly contract: string
  readonly account: string
}

/**
 * D55: a key rotation's attestation as a hold judges it: its nonce, the balance it bound, and its
 * deadline (in a hold: the latest deadline of all the account's attestations).
 */
export interface RotationAttestation {
  readonly nonce: bigint
  readonly previousBalanceDigest: string
  readonly deadline: bigint
}

/** D55: an account's rotation hold: its instant, and the latest attestation it took (none: a row from before 0009). */
export interface RotationHold {
  readonly untilMs: number
  readonly latest?: RotationAttestation
}

export interface BalanceRow {
  readonly confirmed: bigint
  readonly reserved: bigint
  readonly version: bigint
  readonly owned: boolean
  readonly frozenReason: string | null
}

export type ReservationStatus = "reserved" | "confirmed" | "failed" | "expired"

/** What is recorded of a transfer id's decision: which request, whether held, how many re-decisions. */
export interface DecisionRow {
  readonly requestDigest: string
  readonly held: boolean
  readonly redecisions: number
}

export interface ReservationRow {
  readonly transferId: string
  readonly chainId: string
  readonly contract: string
  readonly fromAccount: string
  readonly toAccount: string
  readonly kind: "confidential" | "public"
  readonly nonce: bigint
  readonly deadline: bigint
  readonly expiresAtMs: number
  readonly amount: bigint
  readonly spendBucket: number | null
  readonly requestDigest: string
  readonly result: string
  readonly status: ReservationStatus
  /** A confidential transfer's recipient was credited (by its event or by settle). */
  readonly recipientCredited: boolean
  /** The API key the server says asked for the transfer (D40); null for older rows. */
  readonly apiKeyId: string | null
  /** For a refund (D43), the transfer id of the transfer it sends back; null otherwise. */
  readonly refundOf: string | null
}

/** An open alert as stored (docs/guardian.md, "Alerts"). */
export interface AlertRow extends AccountRef {
  readonly kind: string
  readonly sinceMs: number
  readonly lastSeenMs: number
  readonly explanation: string
}

/** A signed veto of a rotation proposal (docs/guardian.md, "Rotation vetoes"). */
export interface RotationVetoRow {
  readonly chainId: string
  readonly contract: string
  readonly proposalId: bigint
  readonly newSigner: string
  readonly executableAt: bigint
  readonly txHash: string
  readonly blockNumber: bigint
  readonly signature: string
}

/** The identity of a credit log, and what the guardian did with it. */
export interface ChainCreditRow {
  readonly chainId: string
  readonly txHash: string
  readonly logIndex: number
  readonly contract: string
  readonly account: string
  readonly kind: "shield" | "transfer_in"
  readonly transferId: string | null
  readonly blockNumber: bigint
  readonly outcome: "booked" | "already_booked" | "out_of_range" | "unknown_transfer"
}

/** What identifies a credit log: the chain, its transaction and its index there (the table's key). */
export type ChainCreditKey = Pick<ChainCreditRow, "chainId" | "txHash" | "logIndex">

/**
 * What a group's units will lock (the throughput work): the group reads these rows first, all of a kind in
 * one statement, instead of one statement per unit and row. A hint only saves statements: a row
 * it misses (or one that does not exist yet) is read by the unit as it would be without one.
 */
export interface RowHints {
  /** Reservations the units read under their row lock (settlements, booked credits). */
  readonly reservations?: ReadonlyArray<string>
  /** Balances the units lock besides those of the hinted reservations' parties. */
  readonly balances?: ReadonlyArray<AccountRef>
  /** New decisions the units will check for earlier records (`recordedBefore`), each under its sender's lock. */
  readonly decisions?: ReadonlyArray<DecisionHint>
  /** Credit logs the units will record (`insertChainCredit`), once each. */
  readonly credits?: ReadonlyArray<ChainCreditKey>
}

/** A decision to come: its transfer id, and the sender and nonce its reservation would take. */
export interface DecisionHint {
  readonly transferId: string
  readonly sender: AccountRef
  readonly nonce: bigint
}

/** The scope of the chain-wide cursor that finds the contracts naming this guardian. */
export const discoveryScope = "discovery"

const prefix = "pps/guardian/v1"
export const ref = (account: AccountRef) => `${account.chainId}/${account.contract}/${account.account}`
export const confirmedBinding = (account: AccountRef) => `${prefix}/balance/confirmed/${ref(account)}`
export const reservedBinding = (account: AccountRef) => `${prefix}/balance/reserved/${ref(account)}`
export const reservationBinding = (transferId: string) => `${prefix}/reservation/${transferId}`
export const spendBinding = (agent: AccountRef, bucket: number) => `${prefix}/spend/${ref(agent)}/${bucket}`
export const creditBinding = (creditId: string) => `${prefix}/credit/${creditId}`
export const keyTotalBinding = (account: AccountRef, apiKeyId: string) => `${prefix}/key-total/${ref(account)}/${apiKeyId}`
/** A held API-key total's key (HeldRows.keyTotals). */
export const keyTotalId = (account: AccountRef, apiKeyId: string) => `${ref(account)}/${apiKeyId}`
/** A sender's nonce's key (HeldRows.noncesTaken). */
export const nonceId = (sender: AccountRef, nonce: bigint) => `${ref(sender)}/${nonce}`
/** A credit log's key (HeldRows.creditsRecorded). */
export const creditId = (credit: ChainCreditKey) => `${credit.chainId}/${credit.txHash}/${credit.logIndex}`

export interface BalanceSqlRow {
  readonly confirmed_sealed: Uint8Array
  readonly reserved_sealed: Uint8Array
  readonly version: string
  readonly owned: boolean
  readonly frozen_reason: string | null
}

export interface ReservationSqlRow {
  readonly transfer_id: string
  readonly chain_id: string
  readonly contract: string
  readonly from_account: string
  readonly to_account: string
  readonly kind: "confidential" | "public"
  readonly nonce: string
  readonly deadline: string
  readonly expires_at_ms: string
  readonly amount_sealed: Uint8Array
  readonly spend_bucket: string | null
  readonly request_digest: string
  readonly result: string
  readonly status: ReservationStatus
  readonly recipient_credited: boolean
  readonly api_key_id: string | null
  readonly refund_of: string | null
}

/** The columns of a `BalanceSqlRow`. */
export const balanceColumns = "confirmed_sealed, reserved_sealed, version::text AS version, owned, frozen_reason"

export const reservationColumns = `transfer_id, chain_id, contract, from_account, to_account, kind, nonce,
  deadline::text AS deadline, expires_at_ms::text AS expires_at_ms, amount_sealed, spend_bucket::text AS spend_bucket,
  request_digest, result, status, recipient_credited, api_key_id, refund_of`


/** What a balance write sets (the frozen reason has its own statement). */
export type BalanceWrite = Pick<BalanceRow, "confirmed" | "reserved" | "version" | "owned">

/** A reservation as recorded new: the status and the recipient's credit come later. */
export type NewReservationRow = Omit<ReservationRow, "status" | "recipientCredited">
