/**
 * Accounts: the record SPEC.md shows at `GET /v1/accounts/me`, and its rules.
 *
 * Pure: no HTTP, no SQL.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export const AccountType = Schema.Literals(["personal", "business", "agent"]).annotate({ identifier: "AccountType" })
export type AccountType = typeof AccountType.Type

/**
 * @since 0.1.0
 * @category models
 */
export const KycStatus = Schema.Literals(["unverified", "pending", "verified", "enhanced"]).annotate({
  identifier: "KycStatus",
  description: "D11: balances and transfers need `verified` or `enhanced`."
})
export type KycStatus = typeof KycStatus.Type

/**
 * D11: reading balances and creating transfers need one of these.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isKycSufficient = (status: KycStatus): boolean => status === "verified" || status === "enhanced"

/**
 * D10: 3-30 characters of `a-z 0-9 _ - .`, compared case-insensitively; a leading
 * `@` is accepted on input. Returns the canonical (lower-case, no `@`) form, or
 * undefined when the text is not a valid handle.
 *
 * @since 0.1.0
 * @category constructors
 */
export const canonicalHandle = (text: string): string | undefined => {
  const lowered = (text.startsWith("@") ? text.slice(1) : text).toLowerCase()
  return /^[a-z0-9_.-]{3,30}$/.test(lowered) ? lowered : undefined
}

/**
 * D21: an agent name is 1-32 characters of `a-z 0-9 -`.
 *
 * @since 0.1.0
 * @category constants
 */
export const agentNamePattern = /^[a-z0-9-]{1,32}$/

/**
 * Any account's handle: an account handle (D10) or an agent's `owner/name`
 * (D21), case-insensitive, leading `@` optional. The canonical form, or
 * undefined when the text is neither.
 *
 * @since 0.1.0
 * @category constructors
 */
export const canonicalAccountHandle = (text: string): string | undefined => {
  const lowered = (text.startsWith("@") ? text.slice(1) : text).toLowerCase()
  const [owner = "", name, ...rest] = lowered.split("/")
  if (rest.length > 0 || canonicalHandle(owner) !== owner) return undefined
  return name === undefined || agentNamePattern.test(name) ? lowered : undefined
}

/**
 * How a handle is shown: with its leading `@`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const displayHandle = (canonical: string): string => `@${canonical}`

/**
 * An account as stored (everything but the sealed wallet key).
 *
 * @since 0.1.0
 * @category models
 */
export interface Account {
  readonly accountId: string
  /** Canonical form, without `@`. */
  readonly handle: string
  readonly type: AccountType
  readonly ownerAccountId: string | null
  /** The custodial wallet's address, 0x-prefixed, EIP-55 checksummed. */
  readonly walletAddress: string
  readonly kycStatus: KycStatus
  /** D5 form. */
  readonly createdAt: string
}

/**
 * The account record of SPEC.md (`GET /v1/accounts/me`).
 *
 * @since 0.1.0
 * @category models
 */
export const AccountRecord = Schema.Struct({
  account_id: Schema.String.annotate({ description: "The account's id (`acct_` + ULID)." }),
  handle: Schema.String.annotate({ description: "`@handle`, or `@owner/name` for an agent (D10, D21)." }),
  type: AccountType,
  public_key: Schema.String.annotate({ description: "The custodial wallet's address (EIP-55)." }),
  kyc_status: KycStatus,
  created_at: Schema.String.annotate({ description: "ISO 8601 UTC (D5)." })
}).annotate({
  identifier: "Account",
  description: "The account of the API key's holder.",
  examples: [{
    account_id: "acct_01JAZ3Y8X6Q4M2N7P5R9S0T1V2",
    handle: "@alice",
    type: "personal",
    public_key: "0x8ba1f109551bD432803012645Ac136ddd64DBA72",
    kyc_status: "verified",
    created_at: "2026-11-25T01:00:00.000Z"
  }]
})
export type AccountRecord = typeof AccountRecord.Type

/**
 * @since 0.1.0
 * @category constructors
 */
export const toAccountRecord = (account: Account): AccountRecord => ({
  account_id: account.accountId,
  handle: displayHandle(account.handle),
  type: account.type,
  public_key: account.walletAddress,
  kyc_status: account.kycStatus,
  created_at: account.createdAt
})
