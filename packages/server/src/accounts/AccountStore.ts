/**
 * The accounts table.
 *
 * @since 0.1.0
 */
import { Context, Effect, Exit, Layer, Option, Request, Schema } from "effect"
import { SqlClient, SqlError, SqlSchema } from "effect/sql"
import { type Account, AccountType, KycStatus } from "@pps/api/Accounts"
import { sharedStatements } from "../platform/SharedStatements.ts"

const AccountRow = Schema.Struct({
  account_id: Schema.String,
  handle: Schema.String,
  type: AccountType,
  owner_account_id: Schema.NullOr(Schema.String),
  wallet_address: Schema.String,
  kyc_status: KycStatus,
  created_at: Schema.String
})

const toAccount = (row: typeof AccountRow.Type): Account => ({
  accountId: row.account_id,
  handle: row.handle,
  type: row.type,
  ownerAccountId: row.owner_account_id,
  walletAddress: row.wallet_address,
  kycStatus: row.kyc_status,
  createdAt: row.created_at
})

/**
 * The handle is already taken (unique, case-insensitively).
 *
 * @since 0.1.0
 * @category errors
 */
export class HandleConflict extends Schema.TaggedError<HandleConflict>()("HandleConflict", {
  handle: Schema.String
}) {}

/**
 * @since 0.1.0
 * @category models
 */
export interface NewAccount {
  readonly accountId: string
  readonly handle: string
  readonly type: AccountType
  readonly ownerAccountId: string | null
  readonly walletAddress: string
  readonly walletKeySealed: Uint8Array
  readonly kycStatus: KycStatus
  readonly createdAt: string
}

/**
 * An account as the operator's console shows it (D60): the account record's fields, its owner
 * (agents) and whether it is suspended.
 *
 * @since 0.11.0
 * @category models
 */
export const OperatorAccount = Schema.Struct({
  account_id: Schema.String,
  handle: Schema.String,
  type: AccountType,
  kyc_status: KycStatus,
  status: Schema.Literals(["active", "suspended"]),
  owner_account_id: Schema.NullOr(Schema.String),
  public_key: Schema.String,
  created_at: Schema.String,
  suspended_at: Schema.NullOr(Schema.String)
})
export type OperatorAccount = typeof OperatorAccount.Type

/**
 * The operator's account search (D60): `handle` matches a part of the handle, case-insensitively.
 *
 * @since 0.11.0
 * @category models
 */
export interface AccountSearch {
  readonly handle?: string | undefined
  readonly type?: AccountType | undefined
  readonly kycStatus?: KycStatus | undefined
  readonly status?: "active" | "suspended" | undefined
  readonly limit: number
  readonly offset: number
}

/** `%` and `_` (and the escape itself) match literally in a LIKE pattern. */
const likeLiteral = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`)

/**
 * A custodial wallet as stored: its key sealed under `WALLET_KEK`.
 *
 * @since 0.12.0
 * @category models
 */
export interface SealedWallet {
  readonly accountId: string
  readonly walletAddress: string
  readonly walletKeySealed: Uint8Array
}

/**
 * D60: the operator console's reads and the suspension switch, over the same table.
 */
const operatorQueries = (
  sql: SqlClient.SqlClient
): Pick<AccountStore["Service"], "isSuspended" | "setSuspended" | "operatorView" | "search"> => {
  const operatorColumns = sql`account_id, '@' || handle AS handle, type, kyc_status,
    CASE WHEN suspended_at IS NULL THEN 'active' ELSE 'suspended' END AS status, owner_account_id,
    wallet_address AS public_key, iso_utc(created_at) AS created_at, iso_utc(suspended_at) AS suspended_at`
  const decodeOperator = (rows: ReadonlyArray<unknown>) =>
    Schema.decodeUnknownEffect(Schema.Array(OperatorAccount))(rows).pipe(Effect.catchTag("SchemaError", Effect.die))
  const operatorView = (accountId: string) =>
    sql`SELECT ${operatorColumns} FROM accounts WHERE account_id = ${accountId}`.pipe(
      Effect.flatMap(decodeOperator),
      Effect.map((rows) => Option.fromNullishOr(rows[0]))
    )
  return {
    isSuspended: (accountId) =>
      sql<{ suspended: boolean }>`
        SELECT (a.suspended_at IS NOT NULL OR o.suspended_at IS NOT NULL) AS suspended
        FROM accounts a LEFT JOIN accounts o ON o.account_id = a.owner_account_id
        WHERE a.account_id = ${accountId}`.pipe(Effect.map((rows) => rows[0]?.suspended === true)),
    setSuspended: (accountId, suspendedAt) =>
      Effect.gen(function*() {
        const updated = yield* (suspendedAt === null
          ? sql`UPDATE accounts SET suspended_at = NULL
              WHERE account_id = ${accountId} AND suspended_at IS NOT NULL RETURNING ${operatorColumns}`
          : sql`UPDATE accounts SET suspended_at = ${suspendedAt}::timestamptz
              WHERE account_id = ${accountId} AND suspended_at IS NULL RETURNING ${operatorColumns}`).pipe(
            Effect.flatMap(decodeOperator)
          )
        if (updated[0] !== undefined) return { account: Option.some(updated[0]), changed: true }
        return { account: yield* operatorView(accountId), changed: false }
      }),
    operatorView,
    search: (query) =>
      sql`
        SELECT ${operatorColumns} FROM accounts
        WHERE ${query.handle === undefined ? sql`TRUE` : sql`handle LIKE ${`%${likeLiteral(query.handle.toLowerCase())}%`}`}
          AND ${query.type === undefined ? sql`TRUE` : sql`type = ${query.type}`}
          AND ${query.kycStatus === undefined ? sql`TRUE` : sql`kyc_status = ${query.kycStatus}`}
          AND ${query.status === undefined ? sql`TRUE` : query.status === "suspended" ? sql`suspended_at IS NOT NULL` : sql`suspended_at IS NULL`}
        ORDER BY created_at, account_id
        LIMIT ${query.limit} OFFSET ${query.offset}`.pipe(Effect.flatMap(decodeOperator))
  }
}

/**
 * A point read by primary key, by handle, or by wallet address (its lower-case form: stored
 * checksummed, matched ignoring case); those asked in the same turn share one SELECT.
 */
class FindAccount extends Request.Class<
  { readonly key: AccountKey; readonly value: string },
  Option.Option<Account>,
  SqlError.SqlError
> {}

/** What a point read matches an account by, in the order a shared read's conditions list them. */
const accountKeys = ["account_id", "handle", "wallet_address"] as const
type AccountKey = typeof accountKeys[number]

/**
 * The WHERE conditions of a shared point read: one `IN` list a key asked for, the keys in a
 * fixed order (so that each shape is one prepared statement). An address is matched through
 * `lower(wallet_address)`, which migration 0027 indexes.
 */
const findConditions = (sql: SqlClient.SqlClient, entries: ReadonlyArray<Request.Entry<FindAccount>>) =>
  accountKeys.flatMap((key) => {
    const values = [...new Set(entries.flatMap((entry) => entry.request.key === key ? [entry.request.value] : []))]
    if (values.length === 0) return []
    return [key === "wallet_address" ? sql`lower(wallet_address) IN ${sql.in(values)}` : sql.in(key, values)]
  })

/** The value of `key` a row is found by: its id, its handle, or its address in lower case. */
const keyValue = (account: Account, key: AccountKey): string =>
  key === "account_id" ? account.accountId : key === "handle" ? account.handle : account.walletAddress.toLowerCase()

/** The rows read together, by each key's value, for each asker to find its own by the key it asked. */
const byKey = (accounts: ReadonlyArray<Account>): ReadonlyMap<AccountKey, ReadonlyMap<string, Account>> =>
  new Map(accountKeys.map((key) => [
    key,
    new Map(accounts.map((account) => [keyValue(account, key), account]))
  ]))

/** One account's sealed custodial wallet key, asked for each transfer's co-signature (D51). */
class FindSealedWalletKey extends Request.Class<{ readonly accountId: string }, Option.Option<Uint8Array>, SqlError.SqlError> {}

/** Bounds one SELECT's parameters (and the statement shapes it prepares). */
const readBatchMax = 64

const isUniqueViolation = (error: SqlError.SqlError): boolean =>
  error.reason._tag === "UniqueViolation" || /duplicate key|unique constraint/i.test(String(error.cause ?? error.message))

/**
 * @since 0.1.0
 * @category services
 */
export class AccountStore extends Context.Service<AccountStore, {
  readonly insert: (account: NewAccount) => Effect.Effect<Account, HandleConflict | SqlError.SqlError>
  readonly findById: (accountId: string) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
  readonly findByHandle: (handle: string) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
  /** Wallet addresses are stored checksummed; the lookup ignores case. */
  readonly findByWalletAddress: (address: string) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
  readonly setKycStatus: (accountId: string, status: KycStatus) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
  /** D60: whether the account, or the owner of the agent it is, is suspended. */
  readonly isSuspended: (accountId: string) => Effect.Effect<boolean, SqlError.SqlError>
  /**
   * D60: sets (a time) or clears (null) the account's own suspension; the account as the operator
   * sees it (None if unknown), and whether this call changed it (a suspended account suspended
   * again keeps its first time). The row's lock orders concurrent calls: one of them changes it.
   */
  readonly setSuspended: (
    accountId: string,
    suspendedAt: string | null
  ) => Effect.Effect<{ readonly account: Option.Option<OperatorAccount>; readonly changed: boolean }, SqlError.SqlError>
  /** D60: one account as the operator sees it. */
  readonly operatorView: (accountId: string) => Effect.Effect<Option.Option<OperatorAccount>, SqlError.SqlError>
  /** D60: the operator's listing, oldest first; `limit` rows at most. */
  readonly search: (query: AccountSearch) => Effect.Effect<ReadonlyArray<OperatorAccount>, SqlError.SqlError>
  /** The sealed custodial wallet key; opened only by settlement, never returned by the API. */
  readonly walletKeySealed: (accountId: string) => Effect.Effect<Option.Option<Uint8Array>, SqlError.SqlError>
  /** D54: every custodial wallet as sealed (for the operator's backup), in account id order. */
  readonly sealedWallets: Effect.Effect<ReadonlyArray<SealedWallet>, SqlError.SqlError>
}>()("server/accounts/AccountStore") {
  static readonly layer = Layer.effect(
    AccountStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`account_id, handle, type, owner_account_id, wallet_address, kyc_status, iso_utc(created_at) AS created_at`
      // A row that does not decode is a broken invariant of our own schema: a defect.
      const findOne = <A>(execute: (request: A) => Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>, request: A) =>
        SqlSchema.findOneOption({ Request: Schema.Any, Result: AccountRow, execute })(request).pipe(
          Effect.map(Option.map(toAccount)),
          Effect.catchTag("SchemaError", Effect.die)
        )
      // Every create reads its sender by id and its recipient by handle or address, the two at
      // once (transfers/resolve.ts): one SELECT answers all the reads asked in the same turn, of
      // every kind, so that a transfer alone costs one round trip for its parties, not two.
      const findTogether = sharedStatements(
        sql,
        (entries: ReadonlyArray<Request.Entry<FindAccount>>) =>
          sql`SELECT ${columns} FROM accounts WHERE ${sql.or(findConditions(sql, entries))}`.pipe(
            Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(AccountRow))),
            Effect.catchTag("SchemaError", Effect.die)
          ),
        (entries, exit) => {
          const found = Exit.map(exit, (rows) => byKey(rows.map(toAccount)))
          for (const entry of entries) {
            entry.completeUnsafe(Exit.map(found, (index) => Option.fromNullishOr(index.get(entry.request.key)?.get(entry.request.value))))
          }
        },
        readBatchMax,
        false
      )
      // Every transfer's co-signature opens its sender's wallet key: one SELECT a transfer was
      // the server's most frequent statement under load (docs/benchmarks/notes/2026-11-29-cpu-profile.md),
      // so the keys asked for in the same turn are read together.
      const sealedKeys = sharedStatements(
        sql,
        (entries: ReadonlyArray<Request.Entry<FindSealedWalletKey>>) =>
          sql<{ account_id: string; wallet_key_sealed: Uint8Array }>`SELECT account_id, wallet_key_sealed FROM accounts WHERE ${
            sql.in("account_id", [...new Set(entries.map((entry) => entry.request.accountId))])
          }`,
        (entries, exit) => {
          const found = Exit.map(exit, (rows) => new Map(rows.map((row) => [row.account_id, row.wallet_key_sealed])))
          for (const entry of entries) {
            entry.completeUnsafe(Exit.map(found, (byId) =>
              Option.fromNullishOr(byId.get(entry.request.accountId)).pipe(Option.map((bytes) => new Uint8Array(bytes)))
            ))
          }
        },
        readBatchMax,
        false
      )
      return AccountStore.of({
        insert: Effect.fn("AccountStore.insert")(function*(account) {
          yield* sql`
            INSERT INTO accounts (account_id, handle, type, owner_account_id, wallet_address, wallet_key_sealed, kyc_status, created_at)
            VALUES (${account.accountId}, ${account.handle}, ${account.type}, ${account.ownerAccountId},
                    ${account.walletAddress}, ${account.walletKeySealed}, ${account.kycStatus}, ${account.createdAt}::timestamptz)
          `.pipe(
            Effect.catchIf(isUniqueViolation, () => Effect.fail(new HandleConflict({ handle: account.handle })))
          )
          const { walletKeySealed: _sealed, ...stored } = account
          return stored
        }),
        findById: (accountId) => Effect.request(new FindAccount({ key: "account_id", value: accountId }), findTogether),
        findByHandle: (handle) => Effect.request(new FindAccount({ key: "handle", value: handle }), findTogether),
        findByWalletAddress: (address) =>
          Effect.request(new FindAccount({ key: "wallet_address", value: address.toLowerCase() }), findTogether),
        setKycStatus: (accountId, status) =>
          findOne(
            (id: string) => sql`UPDATE accounts SET kyc_status = ${status} WHERE account_id = ${id} RETURNING ${columns}`,
            accountId
          ),
        ...operatorQueries(sql),
        walletKeySealed: (accountId) => Effect.request(new FindSealedWalletKey({ accountId }), sealedKeys),
        sealedWallets: sql<{ account_id: string; wallet_address: string; wallet_key_sealed: Uint8Array }>`
          SELECT account_id, wallet_address, wallet_key_sealed FROM accounts ORDER BY account_id`.pipe(
          Effect.map((rows) =>
            rows.map((row) => ({
              accountId: row.account_id,
              walletAddress: row.wallet_address,
              walletKeySealed: new Uint8Array(row.wallet_key_sealed)
            }))
          )
        )
      })
    })
  )
}
