/**
 * D36: the link between an `Idempotency-Key` and the durable record of what its
 * request did, and the way a retry is answered from that record.
 *
 * The idempotency middleware puts the request's key in `CurrentIdempotencyScope`.
 * Code that writes an operation's durable record (a transfer, a held transaction, an
 * approval, a faucet grant, an agent, a webhook) calls `OperationReplay.bind` inside the
 * same SQL transaction: either both are committed or neither, so a key whose claim
 * names no operation had no durable effect, and one that names an operation is
 * answered from it, never run again.
 *
 * The bind is fenced: it names the claim's current run (its token), so a run whose claim
 * was taken over by a retry elsewhere cannot commit a second record.
 *
 * Each concern registers, once, how to answer for its kind of record
 * (`OperationReplay.register`): its first response's status and body as they would
 * be now (a transfer still `pending` waits as D14 says).
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import type { Principal } from "@pps/api/ApiKeys"

/**
 * The request's idempotency key, as stored (account, mode, keyed digest of the key).
 *
 * @since 0.2.0
 * @category models
 */
export interface IdempotencyScope {
  readonly accountId: string
  readonly mode: string
  readonly keyDigest: Uint8Array
  /** This run's fencing token: only the run holding the claim's current token may write to it. */
  readonly claimToken: string
  /**
   * Whether the answer may be stored for replay (D6). An answer that shows a secret once (an API
   * key's value, D8, D44) may not: `bindShownOnce` turns this off, and a retry is answered from
   * the operation's record instead, which knows no value.
   */
  readonly answer: { storable: boolean }
}

/**
 * The kinds of durable record an idempotency key can name.
 *
 * @since 0.2.0
 * @category models
 */
export type OperationKind =
  | "transfer"
  | "agent_transaction"
  | "approval"
  | "rejection"
  | "faucet_grant"
  | "agent"
  | "webhook"
  | "webhook_replay"
  | "api_key"

/**
 * The current request's idempotency key, when it has one.
 *
 * @since 0.2.0
 * @category references
 */
export const CurrentIdempotencyScope = Context.Reference<Option.Option<IdempotencyScope>>(
  "server/platform/CurrentIdempotencyScope",
  { defaultValue: () => Option.none() }
)

/**
 * A response as the first request would give it now.
 *
 * @since 0.2.0
 * @category models
 */
export interface ReplayedResponse {
  readonly status: number
  readonly body: unknown
}

/**
 * How a concern answers a retry from its record.
 *
 * @since 0.2.0
 * @category models
 */
export type OperationResolver = (operationId: string, principal: Principal) => Effect.Effect<ReplayedResponse>

/**
 * One record to bind: its operation's id, under its request's key (none: nothing to bind).
 *
 * @since 0.16.0
 * @category models
 */
export interface Binding {
  readonly scope: Option.Option<IdempotencyScope>
  readonly operationId: string
}

/**
 * A bind's statement and the check of how many rows it bound (see `OperationReplay.bindStatement`).
 *
 * @since 0.16.0
 * @category models
 */
export interface BindStatement {
  readonly statement: Statement.Fragment
  readonly check: (bound: number) => Effect.Effect<void>
}

/**
 * The UPDATE that binds each keyed request's record to its operation, matched on its own claim's
 * token (the fence), and the check of how many rows it bound; undefined when no request had a key.
 */
const bindStatement = (sql: SqlClient.SqlClient, kind: OperationKind, bindings: ReadonlyArray<Binding>) => {
  const keyed = bindings.flatMap(({ operationId, scope }) => Option.isSome(scope) ? [{ operationId, scope: scope.value }] : [])
  if (keyed.length === 0) return undefined
  // Each row matched on its own claim's token (the fence); one row per claim.
  const statement = sql<{ readonly operation_id: string }>`
    UPDATE idempotency_keys k SET operation_kind = v.operation_kind, operation_id = v.operation_id
    FROM (VALUES ${
    sql.csv(keyed.map(({ operationId, scope }) =>
      sql`(${scope.accountId}, ${scope.mode}, ${scope.keyDigest}::bytea, ${scope.claimToken}, ${kind}, ${operationId})`
    ))
  }) AS v (account_id, mode, key_digest, claim_token, operation_kind, operation_id)
    WHERE k.account_id = v.account_id AND k.mode = v.mode AND k.key_digest = v.key_digest
      AND k.claim_token = v.claim_token
    RETURNING k.operation_id`
  // A claim named twice is one row.
  const claims = new Set(keyed.map(({ scope }) =>
    `${scope.accountId}\n${scope.mode}\n${Buffer.from(scope.keyDigest).toString("hex")}\n${scope.claimToken}`
  ))
  return {
    statement,
    // Another run took a claim over (this node looked dead to it): this run's record must
    // not be committed beside the other's. Dying here rolls the transaction back (and a
    // shared one is written again one record at a time, so only that record fails).
    check: (bound: number) =>
      bound === claims.size ? Effect.void : Effect.die(new Error("the idempotency claim was taken over by another run"))
  }
}

/** Runs `bindStatement`'s UPDATE and its check. */
const bindEach = (sql: SqlClient.SqlClient, kind: OperationKind, bindings: ReadonlyArray<Binding>) =>
  Effect.gen(function*() {
    const bind = bindStatement(sql, kind, bindings)
    if (bind === undefined) return
    const bound = yield* bind.statement
    yield* bind.check(bound.length)
  })

/**
 * @since 0.2.0
 * @category services
 */
export class OperationReplay extends Context.Service<OperationReplay, {
  /**
   * Names the operation's durable record on the request's idempotency key. Call it in
   * the SQL transaction that writes the record; without a key it does nothing.
   */
  readonly bind: (kind: OperationKind, operationId: string) => Effect.Effect<void, SqlError.SqlError>
  /**
   * `bind` for an operation whose answer shows a secret once (D44): the answer is not stored,
   * so a retry with the key is answered from the record by its resolver, never with the secret.
   */
  readonly bindShownOnce: (kind: OperationKind, operationId: string) => Effect.Effect<void, SqlError.SqlError>
  /**
   * `bind` for records written together in one SQL transaction, each under its own request's
   * key (a record whose request had none binds nothing): one statement for all of them.
   */
  readonly bindEach: (
    kind: OperationKind,
    bindings: ReadonlyArray<Binding>
  ) => Effect.Effect<void, SqlError.SqlError>
  /**
   * `bindEach`'s statement, not run, for a caller that writes it within a larger statement
   * (transfers/record.ts), with the check of the rows it bound (a defect when another run took a
   * claim over); undefined when no request had a key.
   */
  readonly bindStatement: (
    kind: OperationKind,
    bindings: ReadonlyArray<Binding>
  ) => BindStatement | undefined
  readonly register: (kind: OperationKind, resolver: OperationResolver) => Effect.Effect<void>
  /** None when no concern answers for the kind (a defect the caller reports). */
  readonly resolve: (
    kind: OperationKind,
    operationId: string,
    principal: Principal
  ) => Effect.Effect<Option.Option<ReplayedResponse>>
}>()("server/platform/OperationReplay") {
  static readonly layer = Layer.effect(OperationReplay, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const resolvers = new Map<OperationKind, OperationResolver>()
    return OperationReplay.of({
      bind: (kind, operationId) =>
        Effect.gen(function*() {
          const scope = yield* CurrentIdempotencyScope
          yield* bindEach(sql, kind, [{ scope, operationId }])
        }),
      bindShownOnce: (kind, operationId) =>
        Effect.gen(function*() {
          const scope = yield* CurrentIdempotencyScope
          yield* bindEach(sql, kind, [{ scope, operationId }])
          // After the bind: an answer is kept back only when a record answers for it.
          if (Option.isSome(scope)) scope.value.answer.storable = false
        }),
      bindEach: (kind, bindings) => bindEach(sql, kind, bindings),
      bindStatement: (kind, bindings) => bindStatement(sql, kind, bindings),
      register: (kind, resolver) => Effect.sync(() => void resolvers.set(kind, resolver)),
      resolve: (kind, operationId, principal) => {
        const resolver = resolvers.get(kind)
        return resolver === undefined
          ? Effect.succeed(Option.none())
          : resolver(operationId, principal).pipe(Effect.map(Option.some))
      }
    })
  }))
}
