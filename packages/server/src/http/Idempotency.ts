/**
 * D6: `Idempotency-Key` on POST endpoints.
 *
 * The first request with a key claims it (a row keyed by account, mode and key,
 * holding a keyed hash — HMAC under the server pepper — of the request) and runs; its response, whatever the status, is
 * stored and replayed for 24 hours to a request with the same key and the same
 * method, path and body, with `Idempotent-Replayed: true`. The same key with a
 * different request answers 409 `idempotency_key_reused`; while the first still
 * runs, 409 `idempotency_key_in_progress`.
 *
 * A claim carries a lease: a request that ends without a response (a fault, an
 * interruption) releases its key at once, and a process that dies mid-request
 * leaves a claim that a retry may take over once the lease has run out. Rows
 * past 24 hours are treated as absent and swept.
 *
 * @since 0.1.0
 */
import { createHmac } from "node:crypto"
import { Duration, Effect, Exit, Layer, Redacted, Schedule } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { SqlClient } from "effect/sql"
import { Limits } from "../config/AppConfig.ts"
import { Secrets } from "../platform/Secrets.ts"
import { CurrentPrincipal, Idempotency } from "./Api.ts"
import { IdempotencyKeyInProgress, IdempotencyKeyReused, InvalidRequest } from "./errors.ts"

/** Longer than any request may run (the transfer create timeout is 5 s by default). */
const leaseMs = 60_000
/** How often expired keys are deleted. */
const sweepEveryMs = 10 * 60_000

type Claim =
  | { readonly _tag: "Run" }
  | { readonly _tag: "Replay"; readonly status: number; readonly body: string }
  | { readonly _tag: "Reused" }
  | { readonly _tag: "InProgress" }

const decoder = new TextDecoder()

/**
 * @since 0.1.0
 * @category layers
 */
export const IdempotencyLive = Layer.effect(
  Idempotency,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Keyed: a plain hash of a transfer's body could be inverted from a database dump by
    // trying candidate amounts (the other fields are in the stored response).
    const hashKey = Redacted.value((yield* Secrets).apiKeyPepper)

    yield* Effect.forkScoped(
      sql`DELETE FROM idempotency_keys WHERE expires_at < now()`.pipe(
        Effect.catch((error) => Effect.logWarning("idempotency sweep failed", error)),
        Effect.repeat(Schedule.spaced(Duration.millis(sweepEveryMs)))
      )
    )

    const claim = (scope: { accountId: string; mode: string; key: string }, requestHash: Uint8Array) =>
      sql.withTransaction(Effect.gen(function*() {
        const { accountId, key, mode } = scope
        yield* sql`
          DELETE FROM idempotency_keys
          WHERE account_id = ${accountId} AND mode = ${mode} AND idempotency_key = ${key} AND expires_at < now()`
        const inserted = yield* sql`
          INSERT INTO idempotency_keys (account_id, mode, idempotency_key, request_hash, lease_until, created_at, expires_at)
          VALUES (${accountId}, ${mode}, ${key}, ${requestHash},
                  now() + ${`${leaseMs} milliseconds`}::interval, now(), now() + ${`${Limits.idempotencyTtlMs} milliseconds`}::interval)
          ON CONFLICT DO NOTHING RETURNING 1 AS claimed`
        if (inserted.length > 0) return { _tag: "Run" } as Claim
        const rows = yield* sql<{ request_hash: Uint8Array; response_status: number | null; response_body: string | null; lease_expired: boolean }>`
          SELECT request_hash, response_status, response_body, (lease_until < now()) AS lease_expired
          FROM idempotency_keys
          WHERE account_id = ${accountId} AND mode = ${mode} AND idempotency_key = ${key}
          FOR UPDATE`
        const row = rows[0]
        if (row === undefined) return { _tag: "InProgress" } as Claim
        if (!Buffer.from(row.request_hash).equals(Buffer.from(requestHash))) return { _tag: "Reused" } as Claim
        if (row.response_status !== null) {
          return { _tag: "Replay", status: row.response_status, body: row.response_body ?? "" } as Claim
        }
        if (!row.lease_expired) return { _tag: "InProgress" } as Claim
        // The first request's process died mid-request: take the claim over.
        yield* sql`
          UPDATE idempotency_keys SET lease_until = now() + ${`${leaseMs} milliseconds`}::interval
          WHERE account_id = ${accountId} AND mode = ${mode} AND idempotency_key = ${key}`
        return { _tag: "Run" } as Claim
      }))

    const complete = (scope: { accountId: string; mode: string; key: string }, status: number, body: string) =>
      sql`
        UPDATE idempotency_keys SET response_status = ${status}, response_body = ${body}
        WHERE account_id = ${scope.accountId} AND mode = ${scope.mode} AND idempotency_key = ${scope.key}`

    const release = (scope: { accountId: string; mode: string; key: string }) =>
      sql`
        DELETE FROM idempotency_keys
        WHERE account_id = ${scope.accountId} AND mode = ${scope.mode} AND idempotency_key = ${scope.key}
          AND response_status IS NULL`

    return (httpEffect) =>
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
        const body = yield* Effect.orDie(request.text)
        const requestHash = new Uint8Array(
          createHmac("sha256", hashKey).update(`pps/idempotency/v1\n${request.method}\n${request.url.split("?")[0]}\n`)
            .update(body).digest()
        )
        const scope = { accountId: principal.accountId, mode: principal.mode, key }
        const decision = yield* Effect.orDie(claim(scope, requestHash))
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
          case "Run":
            break
        }
        return yield* httpEffect.pipe(
          Effect.onExit((exit) =>
            Exit.isSuccess(exit)
              ? complete(scope, exit.value.status, exit.value.body._tag === "Uint8Array" ? decoder.decode(exit.value.body.body) : "")
              : release(scope)
          ),
          Effect.catchTag("SqlError", Effect.die)
        )
      })
  })
)
