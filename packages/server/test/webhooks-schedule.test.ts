/**
 * The delivery worker on virtual time: D32's retry schedule driven by
 * TestClock (no test sleeps through a backoff), against a real HTTPS receiver
 * on loopback whose certificate comes from a throwaway CA the server trusts
 * through WEBHOOK_CA_FILE.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Clock, Context, Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import { retryDelaysMs, retryWindowMs } from "../src/webhooks/RetrySchedule.ts"
import { serviceSignature } from "../src/webhooks/Signature.ts"
import { Webhooks } from "../src/webhooks/Webhooks.ts"
import { eventually, makeTestCa, receiverResource, removeTestCa } from "./support/webhooks-receiver.ts"
import {
  append,
  attemptsOf,
  buildServices,
  confirmedEvent,
  deliveriesOf,
  newAccount,
  newWebhook,
  type Services
} from "./support/webhooks-services.ts"

const ca = makeTestCa()
afterAll(() => removeTestCa(ca))
// Long polls: on virtual time every poll is a real database round trip, and the
// worker sleeps until the next due delivery anyway (commits and fan-out wake it).
const baseConfig = {
  webhookCaFile: Option.some(ca.caFile),
  databaseUrl: Option.none(),
  eventRelayPollMs: 600_000,
  webhookDispatchPollMs: 600_000
}
/** Virtual time that passes per real poll while a test waits. */
const tick = TestClock.adjust(100)
/**
 * Delays run from the end of an attempt, and virtual time ticks on while the
 * test waits for the real HTTP exchange: bounds get this much slack.
 */
const slackMs = 500

/**
 * How long (real time) a wait for attempts may take: on CI's two cores, two test files at a
 * time, a series' real HTTP exchanges and the database thread's statements once took longer than
 * the default 15 s (a run of 2026-11-26 timed out waiting for two second attempts).
 */
const waitRealMs = 40_000

/** Waits until the only delivery of the subscription has made `count` attempts; returns its row. */
const afterAttempts = (services: Services, webhookId: string, count: number) =>
  eventually(
    deliveriesOf(services, webhookId).pipe(Effect.map((rows) => rows[0]?.attempt_count === count ? rows[0] : undefined)),
    `attempt ${count}`,
    { tick, timeoutMs: waitRealMs }
  )

/** Moves the clock to one second before `dueMs`, then lets it run on until the next attempt is recorded. */
const throughNextAttempt = (services: Services, webhookId: string, dueMs: number, attemptsSoFar: number, seen: () => number) =>
  Effect.gen(function*() {
    yield* TestClock.adjust(dueMs - 1_000 - (yield* Clock.currentTimeMillis))
    // Run the clock up to just before the due time: nothing may go out early.
    while ((yield* Clock.currentTimeMillis) < dueMs - 100) {
      yield* tick
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
    }
    assert.strictEqual(seen(), attemptsSoFar, "no attempt before its due time")
    return yield* afterAttempts(services, webhookId, attemptsSoFar + 1)
  })

/**
 * Waits until both deliveries of the subscription have made at least `count` attempts, ticking
 * virtual time only while it is below `tickUntilMs`; a timeout names the rows last seen.
 */
const bothAfterAttempts = (services: Services, webhookId: string, count: number, tickUntilMs: number) => {
  let lastRows: ReadonlyArray<{ readonly attempt_count: number; readonly status: string }> = []
  return eventually(
    deliveriesOf(services, webhookId).pipe(
      Effect.map((rows) => {
        lastRows = rows
        return rows.length === 2 && rows.every((r) => r.attempt_count >= count) ? rows : undefined
      })
    ),
    `both deliveries' attempt ${count}`,
    {
      tick: Effect.gen(function*() {
        if ((yield* Clock.currentTimeMillis) + 100 < tickUntilMs) yield* tick
      }),
      timeoutMs: waitRealMs,
      lastSeen: () => JSON.stringify(lastRows.map((r) => [r.status, r.attempt_count]))
    }
  )
}

// On both threadings of the embedded database: on its own thread every statement takes real
// time while the test moves the clock, which showed that the dispatcher measured its sleep from a
// clock read before its query (hours late here; on a real clock, late by the query's duration).
for (const embeddedDatabaseThread of ["caller", "own"] as const) {
  describe(`webhook retry schedule (TestClock, database on the ${embeddedDatabaseThread} thread)`, () => {
    const config = { ...baseConfig, embeddedDatabaseThread }
    it.effect("a receiver failing 3 times then answering 2xx gets 4 attempts on D32's schedule and exactly one success", () =>
      Effect.gen(function*() {
        let calls = 0
        const receiver = yield* receiverResource(ca, () => (++calls <= 3 ? { status: 503 } : { status: 204 }))
        const { services } = yield* buildServices(config)
        const account = yield* newAccount(services, "sched-alice")
        const webhook = yield* newWebhook(services, { accountId: account.accountId, mode: "test" }, `${receiver.url}/hook`)
        yield* append(services, [confirmedEvent(account.accountId, account.handle)])

        let row = yield* afterAttempts(services, webhook.webhook_id, 1)
        for (let attempt = 1; attempt <= 3; attempt++) {
          assert.strictEqual(row.status, "pending")
          const attempts = yield* attemptsOf(services, row.delivery_id)
          const delayMs = row.next_attempt_ms! - attempts[attempt - 1]!.started_ms
          const base = retryDelaysMs[attempt - 1]!
          assert.isTrue(delayMs >= base * 0.8 && delayMs <= base * 1.2 + slackMs, `delay ${delayMs} after attempt ${attempt}`)
          const dueMs = row.next_attempt_ms!
          row = yield* throughNextAttempt(services, webhook.webhook_id, dueMs, attempt, () => receiver.requests.length)
          const next = (yield* attemptsOf(services, row.delivery_id))[attempt]!
          assert.isTrue(next.started_ms >= dueMs && next.started_ms <= dueMs + 1_000, "attempt at its due time")
        }
        assert.strictEqual(row.status, "succeeded")
        assert.isNull(row.next_attempt_ms)
        const attempts = yield* attemptsOf(services, row.delivery_id)
        assert.deepStrictEqual(attempts.map((a) => a.response_status_code), [503, 503, 503, 204])
        assert.strictEqual(attempts.filter((a) => a.response_status_code !== null && a.response_status_code < 300).length, 1)
        assert.strictEqual(receiver.requests.length, 4)
        // Every attempt sends the same bytes, signed with the subscription's secret.
        for (const request of receiver.requests) {
          assert.strictEqual(request.headers["x-service-signature"], serviceSignature(webhook.secret, request.body))
          assert.isTrue(request.body.equals(receiver.requests[0]!.body))
        }
        // Nothing more, ever.
        yield* TestClock.adjust("25 hours")
        for (let i = 0; i < 5; i++) {
          yield* tick
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        }
        assert.strictEqual(receiver.requests.length, 4)
      }), { timeout: 60_000 })

    it.effect("a receiver that never succeeds gets 8 attempts within 24 hours, then the delivery is failed", () =>
      Effect.gen(function*() {
        const receiver = yield* receiverResource(ca, () => ({ status: 500 }))
        const { services } = yield* buildServices(config)
        const account = yield* newAccount(services, "sched-bob")
        const webhook = yield* newWebhook(services, { accountId: account.accountId, mode: "test" }, `${receiver.url}/hook`)
        yield* append(services, [confirmedEvent(account.accountId, account.handle)])
        let row = yield* afterAttempts(services, webhook.webhook_id, 1)
        const dues: Array<number> = []
        for (let attempt = 2; attempt <= retryDelaysMs.length + 1; attempt++) {
          dues.push(row.next_attempt_ms!)
          row = yield* throughNextAttempt(services, webhook.webhook_id, row.next_attempt_ms!, attempt - 1, () => receiver.requests.length)
        }
        assert.strictEqual(row.status, "failed")
        assert.isNull(row.next_attempt_ms)
        const attempts = yield* attemptsOf(services, row.delivery_id)
        assert.strictEqual(attempts.length, 8)
        for (let index = 1; index < attempts.length; index++) {
          const scheduledGap = dues[index - 1]! - attempts[index - 1]!.started_ms
          const base = retryDelaysMs[index - 1]!
          assert.isTrue(
            scheduledGap >= base * 0.8 && scheduledGap <= base * 1.2 + slackMs,
            `gap ${scheduledGap} before attempt ${index + 1}`
          )
          assert.isTrue(attempts[index]!.started_ms - dues[index - 1]! <= 1_000, "no attempt starts long after it falls due")
        }
        assert.isTrue(attempts[7]!.started_ms - row.created_ms <= retryWindowMs)
        yield* TestClock.adjust("25 hours")
        for (let i = 0; i < 5; i++) {
          yield* tick
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        }
        assert.strictEqual(receiver.requests.length, 8)
      }), { timeout: 60_000 })

    it.effect("deleting the subscription during a retry series cancels it: no attempt after the delete", () =>
      Effect.gen(function*() {
        const receiver = yield* receiverResource(ca, () => ({ status: 502 }))
        const { services } = yield* buildServices(config)
        const account = yield* newAccount(services, "sched-carol")
        const owner = { accountId: account.accountId, mode: "test" as const }
        const webhook = yield* newWebhook(services, owner, `${receiver.url}/hook`)
        yield* append(services, [
          confirmedEvent(account.accountId, account.handle, "test", "tr_1"),
          confirmedEvent(account.accountId, account.handle, "test", "tr_2")
        ])
        // Each wait ticks virtual time only up to the earliest moment either delivery's next attempt
        // can fall due (D32's delay less its 20 % jitter, after an attempt made at or after the
        // wait's start): the waits are for real work (HTTP, the database thread), and slow polls
        // must not carry one delivery into its next attempt while the other's is still to come. A
        // run on CI's loaded cores once timed out in the second wait, ticking all the while.
        const first = yield* bothAfterAttempts(services, webhook.webhook_id, 1, (yield* Clock.currentTimeMillis) + retryDelaysMs[0]! * 0.8 - slackMs)
        yield* TestClock.adjust(Math.max(...first.map((r) => r.next_attempt_ms!)) - (yield* Clock.currentTimeMillis))
        yield* bothAfterAttempts(services, webhook.webhook_id, 2, (yield* Clock.currentTimeMillis) + retryDelaysMs[1]! * 0.8 - slackMs)
        yield* Context.get(services, Webhooks).remove(owner, webhook.webhook_id).pipe(Effect.orDie)
        const rows = yield* deliveriesOf(services, webhook.webhook_id)
        assert.deepStrictEqual(rows.map((r) => [r.status, r.attempt_count]), [["cancelled", 2], ["cancelled", 2]])
        const seen = receiver.requests.length
        assert.strictEqual(seen, 4)
        yield* TestClock.adjust("25 hours")
        for (let i = 0; i < 5; i++) {
          yield* tick
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        }
        assert.strictEqual(receiver.requests.length, seen)
        const after = yield* deliveriesOf(services, webhook.webhook_id)
        assert.deepStrictEqual(after.map((r) => r.status), ["cancelled", "cancelled"])
      }), { timeout: 60_000 })
  })
}
