/**
 * D87: the outbox relay waits `EVENT_RELAY_LINGER_MS` after a commit on its node wakes it, so that
 * the commits of the next moment share its round (one read, one publish, one mark) instead of each
 * making one.
 * A round marks all its events with one `published_at`, which is how the test tells rounds apart:
 * two commits 250 ms apart are published by one round with a linger, by two without.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { makeWakeup } from "../src/events/Wakeup.ts"
import { eventually } from "./support/webhooks-receiver.ts"
import { append, buildServices, confirmedEvent, newAccount } from "./support/webhooks-services.ts"

/** The distinct publication times of the account's events once all are published, else undefined. */
const rounds = (sql: SqlClient.SqlClient, accountId: string, expected: number) =>
  sql<{ readonly published_at: string | null }>`SELECT published_at::text AS published_at FROM events WHERE account_id = ${accountId}`.pipe(
    Effect.map((rows) =>
      rows.length === expected && rows.every((row) => row.published_at !== null)
        ? new Set(rows.map((row) => row.published_at)).size
        : undefined
    ),
    Effect.orDie
  )

const twoCommitsApart = (eventRelayLingerMs: number, handle: string) =>
  Effect.gen(function*() {
    const { services } = yield* buildServices({ eventRelayPollMs: 5_000, eventRelayLingerMs })
    const sql = Context.get(services, SqlClient.SqlClient)
    const account = yield* newAccount(services, handle)
    // Whatever the set-up committed is published first, so that the two commits below start from a
    // relay that is waiting.
    yield* Effect.sleep(eventRelayLingerMs + 300)
    yield* append(services, [confirmedEvent(account.accountId, account.handle, "test", "tr_linger_1")])
    yield* Effect.sleep(250)
    yield* append(services, [confirmedEvent(account.accountId, account.handle, "test", "tr_linger_2")])
    return yield* eventually(rounds(sql, account.accountId, 2), "both events published", { timeoutMs: 15_000 })
  }).pipe(Effect.scoped)

describe("the outbox relay's linger (D87)", () => {
  it.live("two commits 250 ms apart are published by one round when the relay lingers", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* twoCommitsApart(500, "linger-on"), 1)
    }), { timeout: 60_000 })

  it.live("and by two rounds when it does not (the check above can fail)", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* twoCommitsApart(0, "linger-off"), 2)
    }), { timeout: 60_000 })
})

describe("the wake-up signal the relay lingers on", () => {
  it.effect("wait says whether a wake ended it; discard drops a pending wake", () =>
    Effect.gen(function*() {
      const wakeup = yield* makeWakeup
      yield* wakeup.wake
      assert.isTrue(yield* wakeup.wait(1_000), "a pending wake ends the wait at once")
      const polled = yield* Effect.forkChild(wakeup.wait(1_000))
      yield* TestClock.adjust(1_000)
      assert.isFalse(yield* Fiber.join(polled), "the poll interval ended it")
      yield* wakeup.wake
      yield* wakeup.discard
      const afterDiscard = yield* Effect.forkChild(wakeup.wait(1_000))
      yield* TestClock.adjust(1_000)
      assert.isFalse(yield* Fiber.join(afterDiscard), "a discarded wake does not end the next wait")
    }))
})
