/**
 * The api_keys table. Keys are found by their keyed hash, never by their value.
 *
 * @since 0.1.0
 */
import * as Invariant from "../platform/Invariant.ts"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { SqlValues } from "@pps/guardian"
import { AccountType } from "@pps/api/Accounts"
import { type ApiKeyRecord, Mode } from "@pps/api/ApiKeys"

const KeyWithAccountRow = Schema.Struct({
  key_id: Schema.String,
  account_id: Schema.String,
  mode: Mode,
  key_hash: Schema.Uint8Array,
  revoked: Schema.Boolean,
  account_type: AccountType,
  owner_account_id: Schema.NullOr(Schema.String),
  /** D60: the key's account, or the owner of the agent it is, is suspended. */
  suspended: Schema.Boolean
})
export type KeyWithAccount = typeof KeyWithAccountRow.Type

const KeyRow = Schema.Struct({
  key_id: Schema.String,
  name: Schema.String,
  mode: Mode,
  key_hint: Schema.String,
  created_at: Schema.String,
  last_used_at: Schema.NullOr(Schema.String),
  request_count: Schema.NumberFromString,
  revoked_at: Schema.NullOr(Schema.String)
})

/**
 * The account and mode a key must belong to for a holder's revocation (dashboard, owner of an
 * agent): an id of another account's key, or of the other mode, is not found.
 *
 * @since 0.9.0
 * @category models
 */
export interface KeyHolder {
  readonly accountId: string
  readonly mode: Mode
}

/** Requests counted against one key since the last flush, and the latest of them (ISO 8601). */
export interface KeyUsage {
  readonly keyId: string
  readonly requests: number
  readonly lastUsedAt: string
}

/**
 * @since 0.1.0
 * @category services
 */
export class ApiKeyStore extends Context.Service<ApiKeyStore, {
  readonly insert: (key: {
    readonly keyId: string
    readonly accountId: string
    readonly name: string
    readonly mode: Mode
    readonly keyHash: Uint8Array
    readonly keyHint: string
    readonly createdAt: string
  }) => Effect.Effect<void, SqlError.SqlError>
  readonly findByHash: (keyHash: Uint8Array) => Effect.Effect<Option.Option<KeyWithAccount>, SqlError.SqlError>
  readonly listByAccount: (accountId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, SqlError.SqlError>
  /**
   * Marks the key revoked; the key's account id when it existed and was active (and, given
   * `holder`, is that account's key of that mode).
   */
  readonly revoke: (keyId: string, revokedAt: string, holder?: KeyHolder) => Effect.Effect<Option.Option<string>, SqlError.SqlError>
  readonly exists: (keyId: string) => Effect.Effect<boolean, SqlError.SqlError>
  /** Adds each key's requests and moves its `last_used_at` forward: one statement for all of them. */
  readonly addUsage: (usage: ReadonlyArray<KeyUsage>) => Effect.Effect<void, SqlError.SqlError>
}>()("server/apikeys/ApiKeyStore") {
  static readonly layer = Layer.effect(
    ApiKeyStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const decode = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) => (rows: ReadonlyArray<unknown>) =>
        Schema.decodeUnknownEffect(Schema.Array(schema))(rows).pipe(Invariant.orDie("an api_keys row decodes as the key it stores"))
      return ApiKeyStore.of({
        insert: (key) =>
          sql`
            INSERT INTO api_keys (key_id, account_id, name, mode, key_hash, key_hint, created_at)
            VALUES (${key.keyId}, ${key.accountId}, ${key.name}, ${key.mode}, ${key.keyHash}, ${key.keyHint}, ${key.createdAt}::timestamptz)
          `.pipe(Effect.asVoid),
        findByHash: (keyHash) =>
          sql`
            SELECT k.key_id, k.account_id, k.mode, k.key_hash, (k.revoked_at IS NOT NULL) AS revoked,
                   a.type AS account_type, a.owner_account_id,
                   (a.suspended_at IS NOT NULL OR o.suspended_at IS NOT NULL) AS suspended
            FROM api_keys k JOIN accounts a ON a.account_id = k.account_id
            LEFT JOIN accounts o ON o.account_id = a.owner_account_id
            WHERE k.key_hash = ${keyHash}
          `.pipe(Effect.flatMap(decode(KeyWithAccountRow)), Effect.map((rows) => Option.fromNullishOr(rows[0]))),
        listByAccount: (accountId) =>
          sql`
            SELECT key_id, name, mode, key_hint, iso_utc(created_at) AS created_at, iso_utc(last_used_at) AS last_used_at,
                   request_count::text AS request_count, iso_utc(revoked_at) AS revoked_at
            FROM api_keys WHERE account_id = ${accountId} ORDER BY created_at, key_id
          `.pipe(Effect.flatMap(decode(KeyRow))),
        revoke: (keyId, revokedAt, holder) =>
          (holder === undefined
            ? sql<{ account_id: string }>`
              UPDATE api_keys SET revoked_at = ${revokedAt}::timestamptz
              WHERE key_id = ${keyId} AND revoked_at IS NULL RETURNING account_id`
            : sql<{ account_id: string }>`
              UPDATE api_keys SET revoked_at = ${revokedAt}::timestamptz
              WHERE key_id = ${keyId} AND revoked_at IS NULL AND account_id = ${holder.accountId} AND mode = ${holder.mode}
              RETURNING account_id`).pipe(Effect.map((rows) => Option.fromNullishOr(rows[0]?.account_id))),
        exists: (keyId) =>
          sql`SELECT 1 FROM api_keys WHERE key_id = ${keyId}`.pipe(Effect.map((rows) => rows.length > 0)),
        addUsage: (usage) =>
          usage.length === 0 ? Effect.void : sql.unsafe(
            `UPDATE api_keys k SET request_count = k.request_count + v.requests,
               last_used_at = GREATEST(COALESCE(k.last_used_at, v.last_used_at), v.last_used_at)
             FROM (VALUES ${SqlValues.valuesPlaceholders(usage.length, ["", "::integer", "::timestamptz"])}) AS v (key_id, requests, last_used_at)
             WHERE k.key_id = v.key_id`,
            usage.flatMap((entry) => [entry.keyId, entry.requests, entry.lastUsedAt])
          ).pipe(Effect.asVoid)
      })
    })
  )
}
