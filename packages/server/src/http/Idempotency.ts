/**
 * D6 and D36: `Idempotency-Key` on POST endpoints — one key, one operation, for
 * 24 hours, whatever happens to the process that ran it.
 *
 * The first request with a key claims it: a row keyed by account, mode and a keyed
 * digest of the key, naming the node that runs the request. Its response, whatever
 * the status, is stored and replayed to a request with the same key and the same
 * method, path and body, with `Idempotent-Replayed: true`. The same key with a
 * different request answers 409 `idempotency_key_reused`; while the first still runs
 * on a live node, 409 `idempotency_key_in_progress`.
 *
 * A request that ends without a response (a fault, a client that went away), or
 * whose node died (its heartbeat stopped, see NodeLiveness; for this node's own claims,
 * the set of runs in flight), leaves a claim without a response. Each run holds a
 * fencing token: a run whose claim a retry took over (its node only looked dead) can
 * neither bind a record nor store a response. A retry then looks at what the claim names (`OperationReplay.bind`, written
 * in the same SQL transaction as the operation's record):
 * - a record: the retry is answered from it (OperationReplay), never run again;
 * - nothing: the first request had no durable effect, and the retry runs it.
 * Stripe's design, with the recovery point being the record itself.
 *
 * What is stored cannot be used to test guesses of a transfer's amount or memo: the
 * request's fingerprint is an HMAC keyed by the idempotency key's own value, which
 * is stored only as a digest under the pepper. Whoever holds the database and every
 * secret of the api tier would first have to guess the client's key (128 random bits
 * from our SDK). Rows past 24 hours are treated as absent and swept.
 *
 * @since 0.1.0
 */
import { createHmac, createSecretKey, type KeyObject, randomBytes } from "node:crypto"
import { Cause, Duration, Effect, Exit, Layer, Option, Redacted, Request, type RequestResolver, Schedule, SchemaAST } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { SqlClient, type SqlError } from "effect/sql"
import { Limits } from "../config/AppConfig.ts"
import { unsafeStatementWithoutWaitingForDisk } from "../platform/CommitDurability.ts"
import { CurrentIdempotencyScope, type IdempotencyScope, type OperationKind, OperationReplay } from "../platform/IdempotentOperations.ts"
import { deadAfterMs, NodeLiveness } from "../platform/NodeLiveness.ts"
import { Secrets } from "../platform/Secrets.ts"
import { sharedStatements } from "../platform/SharedStatements.ts"
import { SqlValues } from "@pps/guardian"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable } from "../platform/Unavailable.ts"
import type { Principal } from "@pps/api/ApiKeys"
import { CurrentPrincipal, Idempotency } from "@pps/api/Api"
import { ApprovalInProgress, IdempotencyKeyInProgress, IdempotencyKeyReused, InvalidRequest, PayloadTooLarge } from "@pps/api/Errors"

/** How often expired keys are deleted. */
const sweepEveryMs = 10 * 60_000

type Claim =
  | { readonly _tag: "Run" }
  | { readonly _tag: "Replay"; readonly status: number; readonly body: string }
  | { readonly _tag: "Resolve"; readonly kind: OperationKind; readonly operationId: string }
  | { readonly _tag: "Reused" }
  | { readonly _tag: "InProgress" }

const decoder = new TextDecoder()

/** A run's response to store under its claim; `complete` writes those asked in the same turn together. */
class StoreResponse extends Request.Class<
  { readonly scope: IdempotencyScope; readonly status: number; readonly body: string },
  void,
  SqlError.SqlError
> {}

/** A new key to claim; `claim` inserts the keys asked for in the same turn together. */
class ClaimKey extends Request.Class<
  { readonly scope: IdempotencyScope; readonly requestHash: Uint8Array },
  boolean,
  SqlError.SqlError
> {}

/** Bounds one UPDATE's rows (and the statement shapes it prepares). */
const responsesPerStatementMax = 64

/** Bounds one claiming INSERT's rows, as `responsesPerStatementMax` does an UPDATE's. */
const claimsPerStatementMax = 64

/**
 * The fingerprint of a request under its own idempotency key.
 *
 * @since 0.2.0
 * @category constructors
 */
export const requestFingerprint = (idempotencyKey: string, method: string, path: string, body: string): Uint8Array =>
  new Uint8Array(
    createHmac("sha256", idempotencyKey).update(`pps/idempotency/v2\n${method}\n${path}\n`).update(body).digest()
  )

/**
 * What the middleware's steps share: built once by the layer. `running` holds the tokens of this
 * process's runs in flight: whether one of our own claims is still running is known here exactly;
 * the heartbeat only tells about other nodes.
 */
interface IdempotencyContext {
  readonly sql: SqlClient.SqlClient
  readonly nodeId: string
  /** A KeyObject: Node checks and copies raw key bytes on every `createHmac` (webhooks/Signature.ts). */
  readonly pepper: KeyObject
  readonly replay: OperationReplay["Service"]
  readonly running: Set<string>
  readonly claimsTogether: RequestResolver.RequestResolver<ClaimKey>
  readonly responsesTogether: RequestResolver.RequestResolver<StoreResponse>
}

const ttl = `${Limits.idempotencyTtlMs} milliseconds`

const keyDigest = (context: IdempotencyContext, key: string) =>
  new Uint8Array(createHmac("sha256", context.pepper).update("pps/idempotency-key/v2\n").update(key).digest())

const where = (sql: SqlClient.SqlClient, scope: IdempotencyScope) =>
  sql`account_id = ${scope.accountId} AND mode = ${scope.mode} AND key_digest = ${scope.keyDigest}`

/** The same row, while this run still holds it. */
const held = (sql: SqlClient.SqlClient, scope: IdempotencyScope) => sql`${where(sql, scope)} AND claim_token = ${scope.claimToken}`

const insertClaim = (context: IdempotencyContext, scope: IdempotencyScope, requestHash: Uint8Array) =>
  context.sql`
    INSERT INTO idempotency_keys (account_id, mode, key_digest, request_hash, owner_node, claim_token, created_at, expires_at)
    VALUES (${scope.accountId}, ${scope.mode}, ${scope.keyDigest}, ${requestHash}, ${context.nodeId}, ${scope.claimToken}, now(),
            now() + ${ttl}::interval)
    ON CONFLICT DO NOTHING RETURNING 1 AS claimed`.pipe(Effect.map((inserted) => inserted.length > 0))

/**
 * The claims asked for in one turn, inserted by one statement; each is answered by whether
 * its row went in (its token returned). Two requests of one turn with the same key: the
 * first row goes in, the second conflicts with it and is not claimed, as one after the other.
 *
 * D80: the commit does not wait for the disk. A claim lost in a crash is a claim that names no
 * operation, which a retry runs anyway: whatever the run records binds the claim in a commit
 * that does wait, and the WAL is one sequence, so that commit makes the claim durable first;
 * a run whose claim is gone cannot bind (the fence), as if a retry had taken it over.
 */
const claimColumns = ["", "", "", "", "", ""]
const insertClaims = (sql: SqlClient.SqlClient, nodeId: string) => (entries: ReadonlyArray<Request.Entry<ClaimKey>>) =>
  unsafeStatementWithoutWaitingForDisk(sql, (commitSetting) =>
    sql.unsafe<{ readonly claim_token: string }>(
      `INSERT INTO idempotency_keys (account_id, mode, key_digest, request_hash, owner_node, claim_token, created_at, expires_at)
       VALUES ${SqlValues.valuesPlaceholders(entries.length, claimColumns, `, now(), now() + $${entries.length * claimColumns.length + 1}::interval`)}
       ON CONFLICT DO NOTHING RETURNING claim_token, ${commitSetting} AS commit_setting`,
      [
        ...entries.flatMap(({ request: { requestHash, scope } }) =>
          [scope.accountId, scope.mode, scope.keyDigest, requestHash, nodeId, scope.claimToken]
        ),
        ttl
      ]
    ))

const answerClaims = (entries: ReadonlyArray<Request.Entry<ClaimKey>>, exit: Exit.Exit<ReadonlyArray<{ readonly claim_token: string }>, SqlError.SqlError>) => {
  const claimed = Exit.map(exit, (rows) => new Set(rows.map((row) => row.claim_token)))
  for (const entry of entries) {
    entry.completeUnsafe(Exit.map(claimed, (tokens) => tokens.has(entry.request.scope.claimToken)))
  }
}

/**
 * Stores responses under their claims in one statement, each only while its run still holds
 * the claim (its token): the responses of transfers that end together (one completion batch
 * answers their requests in the same turn) cost one UPDATE, not one each.
 */
const storeResponses = (sql: SqlClient.SqlClient) => (entries: ReadonlyArray<Request.Entry<StoreResponse>>) => {
  const values = SqlValues.valuesPlaceholders(entries.length, ["", "", "::bytea", "", "::integer", ""])
  return sql.unsafe(
    `UPDATE idempotency_keys k SET response_status = v.status, response_body = v.body, owner_node = NULL
     FROM (VALUES ${values}) AS v (account_id, mode, key_digest, claim_token, status, body)
     WHERE k.account_id = v.account_id AND k.mode = v.mode AND k.key_digest = v.key_digest AND k.claim_token = v.claim_token`,
    entries.flatMap(({ request: { body, scope, status } }) => [scope.accountId, scope.mode, scope.keyDigest, scope.claimToken, status, body])
  ).pipe(Effect.asVoid)
}

// A new key (almost every request) is claimed by one statement, outside a transaction and
// shared with the other claims of its turn: the row it inserts is the whole claim. Only a
// key seen before takes the transaction.
const claim = (context: IdempotencyContext, scope: IdempotencyScope, requestHash: Uint8Array) =>
  Effect.flatMap(Effect.request(new ClaimKey({ scope, requestHash }), context.claimsTogether), (claimed) =>
    claimed ? Effect.succeed<Claim>({ _tag: "Run" }) : claimSeen(context, scope, requestHash))

interface SeenRow {
  readonly request_hash: Uint8Array
  readonly response_status: number | null
  readonly response_body: string | null
  readonly operation_kind: OperationKind | null
  readonly operation_id: string | null
  readonly owner_node: string | null
  readonly claim_token: string | null
  readonly owner_alive: boolean
}

/** What a key's existing row (locked) says about a request with the same key. */
const seenClaim = (context: IdempotencyContext, row: SeenRow, requestHash: Uint8Array): Claim | undefined => {
  if (!Buffer.from(row.request_hash).equals(Buffer.from(requestHash))) return { _tag: "Reused" }
  if (row.response_status !== null) return { _tag: "Replay", status: row.response_status, body: row.response_body ?? "" }
  const ownerAlive = row.owner_node === context.nodeId
    ? row.claim_token !== null && context.running.has(row.claim_token)
    : row.owner_alive
  if (ownerAlive) return { _tag: "InProgress" }
  if (row.operation_kind !== null && row.operation_id !== null) {
    return { _tag: "Resolve", kind: row.operation_kind, operationId: row.operation_id }
  }
  return undefined
}

const claimSeen = (context: IdempotencyContext, scope: IdempotencyScope, requestHash: Uint8Array) => {
  const { sql } = context
  return sql.withTransaction(Effect.gen(function*() {
    // An expired row is absent (D6: 24 hours): removed, and the key claimed anew.
    yield* sql`DELETE FROM idempotency_keys WHERE ${where(sql, scope)} AND expires_at < now()`
    if (yield* insertClaim(context, scope, requestHash)) return { _tag: "Run" } as Claim
    const rows = yield* sql<SeenRow>`
      SELECT request_hash, response_status, response_body, operation_kind, operation_id, owner_node, claim_token,
        (owner_node IS NOT NULL AND EXISTS (
          SELECT 1 FROM node_heartbeats h
          WHERE h.node_id = idempotency_keys.owner_node
            AND h.beat_at > now() - ${`${deadAfterMs} milliseconds`}::interval
        )) AS owner_alive
      FROM idempotency_keys WHERE ${where(sql, scope)}
      FOR UPDATE`
    const row = rows[0]
    if (row === undefined) return { _tag: "InProgress" } as Claim
    const seen = seenClaim(context, row, requestHash)
    if (seen !== undefined) return seen
    // The first request ended, or its node died, before its operation left any record: run it.
    yield* sql`
      UPDATE idempotency_keys SET owner_node = ${context.nodeId}, claim_token = ${scope.claimToken} WHERE ${where(sql, scope)}`
    return { _tag: "Run" } as Claim
  }))
}

const complete = (context: IdempotencyContext, scope: IdempotencyScope, status: number, body: string) =>
  Effect.request(new StoreResponse({ scope, status, body }), context.responsesTogether)

/**
 * A refusal is stored as the key's answer only when no operation took effect under the
 * key; if one did (its record committed, then something failed), the claim is left for a
 * retry to resolve from that record, as after a fault.
 */
const refuse = (sql: SqlClient.SqlClient, scope: IdempotencyScope, status: number, body: string) =>
  sql`
    UPDATE idempotency_keys SET response_status = ${status}, response_body = ${body}, owner_node = NULL
    WHERE ${held(sql, scope)} AND operation_id IS NULL`.pipe(Effect.andThen(abandon(sql, scope)))

/**
 * A typed error of the catalogue (http/errors.ts) with a 4xx status: its status and its D1
 * body as the client receives it (the envelope middleware adds `request_id` on the way out,
 * and again, the retry's own, on a replay).
 */
const typedRefusal = (cause: Cause.Cause<unknown>): { readonly status: number; readonly body: string } | undefined => {
  const error = Option.getOrUndefined(Cause.findErrorOption(cause))
  if (typeof error !== "object" || error === null || !("error" in error)) return undefined
  const schema = (error.constructor as { readonly ast?: SchemaAST.AST }).ast
  const status = schema === undefined ? undefined : SchemaAST.resolve(schema)?.["httpApiStatus"]
  // 429, and 409 `approval_in_progress` (D45: decided once an earlier attestation is dead),
  // say "later", not "no": a retry must run.
  if (typeof status !== "number" || status < 400 || status > 499 || status === 429) return undefined
  const { request_id: _, ...body } = (error as { readonly error: Record<string, unknown> }).error
  if (body["code"] === ApprovalInProgress.code) return undefined
  return { status, body: JSON.stringify({ error: body }) }
}

/**
 * No response: a claim that names no operation had no durable effect and is
 * released; one that does is kept, without an owner, for a retry to resolve.
 */
const abandon = (sql: SqlClient.SqlClient, scope: IdempotencyScope) =>
  sql.withTransaction(Effect.gen(function*() {
    yield* sql`
      DELETE FROM idempotency_keys
      WHERE ${held(sql, scope)} AND response_status IS NULL AND operation_id IS NULL`
    yield* sql`UPDATE idempotency_keys SET owner_node = NULL WHERE ${held(sql, scope)} AND response_status IS NULL`
  }))

/**
 * D6: the first response is replayed, an error (402, 403, 404, 422...) too: a retry after
 * the balance was topped up must not pay what the first request was refused. A 5xx (and
 * a 4xx that says "later", see `typedRefusal`) says the request did not complete:
 * abandoned, so a retry runs (or resolves) it. An answer that shows a secret once (D44) is
 * not stored either: its claim, bound to the record, is left for a retry to resolve from
 * that record, as after a fault.
 */
const settleClaim = (context: IdempotencyContext, scope: IdempotencyScope, exit: Exit.Exit<HttpServerResponse.HttpServerResponse, unknown>) => {
  const refusal = Exit.isFailure(exit) ? typedRefusal(exit.cause) : undefined
  return (Exit.isSuccess(exit) && !scope.answer.storable
    ? abandon(context.sql, scope)
    : Exit.isSuccess(exit)
    ? complete(context, scope, exit.value.status, exit.value.body._tag === "Uint8Array" ? decoder.decode(exit.value.body.body) : "")
    : refusal !== undefined
    ? refuse(context.sql, scope, refusal.status, refusal.body)
    : abandon(context.sql, scope)).pipe(Effect.ensuring(Effect.sync(() => context.running.delete(scope.claimToken))))
}

/** The body, read already by the envelope (the read is cached); a failed read is answered as the envelope does. */
const requestBody = (request: HttpServerRequest.HttpServerRequest) =>
  request.text.pipe(Effect.mapError((error) =>
    error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
      ? PayloadTooLarge.of()
      : InvalidRequest.of("The request body could not be read.")
  ))

/** Not stored: each retry answers the operation's state at that moment. */
const resolveFromRecord = Effect.fn("Idempotency.resolve")(function*(
  context: IdempotencyContext,
  decision: Extract<Claim, { readonly _tag: "Resolve" }>,
  principal: Principal
) {
  const answer = yield* context.replay.resolve(decision.kind, decision.operationId, principal)
  if (Option.isNone(answer)) {
    yield* Effect.logError("no resolver for an idempotent operation").pipe(
      Effect.annotateLogs({ operation_kind: decision.kind })
    )
    return yield* Effect.fail(IdempotencyKeyInProgress.of())
  }
  return yield* HttpServerResponse.json(answer.value.body, {
    status: answer.value.status,
    headers: { "idempotent-replayed": "true" }
  }).pipe(Invariant.orDie("an operation's answer, read from its own record, encodes as JSON"))
})

/** Claims the request's key; the run, or the answer a claim already has. */
const claimed = <E, R>(
  context: IdempotencyContext,
  httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const key = request.headers["idempotency-key"]
    if (request.method !== "POST" || key === undefined) return yield* httpEffect
    if (key.length < 1 || key.length > Limits.idempotencyKeyLengthMax) {
      return yield* Effect.fail(
        InvalidRequest.of("The Idempotency-Key header must be 1-255 characters.", { param: "Idempotency-Key" })
      )
    }
    const principal = yield* CurrentPrincipal
    const body = yield* requestBody(request)
    const requestHash = requestFingerprint(key, request.method, request.url.split("?")[0] ?? "", body)
    const scope: IdempotencyScope = {
      accountId: principal.accountId,
      mode: principal.mode,
      keyDigest: keyDigest(context, key),
      claimToken: randomBytes(16).toString("base64url"),
      answer: { storable: true }
    }
    // In the set of runs in flight before the claim commits: a second request with the same key
    // landing in between must see this node's claim as alive, not take it over.
    context.running.add(scope.claimToken)
    const decision = yield* claim(context, scope, requestHash).pipe(
      Unavailable.database("Idempotency.claim"),
      Effect.onExit((exit) =>
        Exit.isSuccess(exit) && exit.value._tag === "Run" ? Effect.void : Effect.sync(() => context.running.delete(scope.claimToken))
      )
    )
    switch (decision._tag) {
      case "Reused":
        return yield* Effect.fail(IdempotencyKeyReused.of())
      case "InProgress":
        return yield* Effect.fail(IdempotencyKeyInProgress.of())
      case "Replay":
        return HttpServerResponse.text(decision.body, {
          status: decision.status,
          contentType: "application/json",
          headers: { "idempotent-replayed": "true" }
        })
      case "Resolve":
        return yield* resolveFromRecord(context, decision, principal)
      case "Run":
        break
    }
    return yield* httpEffect.pipe(
      Effect.provideService(CurrentIdempotencyScope, Option.some(scope)),
      Effect.onExit((exit) => settleClaim(context, scope, exit)),
      Unavailable.database("Idempotency.settle")
    )
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const IdempotencyLive = Layer.effect(
  Idempotency,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { nodeId } = yield* NodeLiveness
    const context: IdempotencyContext = {
      sql,
      nodeId,
      pepper: createSecretKey(Redacted.value((yield* Secrets).apiKeyPepper)),
      replay: yield* OperationReplay,
      running: new Set<string>(),
      claimsTogether: sharedStatements(sql, insertClaims(sql, nodeId), answerClaims, claimsPerStatementMax),
      responsesTogether: sharedStatements(
        sql,
        storeResponses(sql),
        (entries, exit) => entries.forEach((entry) => entry.completeUnsafe(exit)),
        responsesPerStatementMax
      )
    }
    yield* Effect.forkScoped(
      sql`DELETE FROM idempotency_keys WHERE expires_at < now()`.pipe(
        Effect.catch((error) => Effect.logWarning("idempotency sweep failed", error)),
        Effect.repeat(Schedule.spaced(Duration.millis(sweepEveryMs)))
      )
    )
    return (httpEffect) => claimed(context, httpEffect).pipe(answerServiceUnavailable)
  })
)
