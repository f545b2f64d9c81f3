/**
 * The guardian's group committer (issue 16) keeps the guarantees of one transaction per
 * call: when one unit of a group fails, the group is rolled back and every unit runs again
 * alone, so the others still commit exactly once and the failing one leaves no write; and
 * once the committer has stopped, a call is answered as interrupted instead of waiting for
 * ever. Real PGlite, in memory.
 */
import { PGlite } from "@electric-sql/pglite"
import { PgliteClient } from "@effect/sql-pglite"
import { assert, describe, it } from "@effect/vitest"
import { Data, Deferred, Effect, Exit, Fiber, Option, Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as GroupCommit from "../src/internal/groupCommit.ts"

class Refused extends Data.TaggedError("Refused")<{ readonly id: number }> {}

const Sql = PgliteClient.layerFrom(
  Effect.gen(function*() {
    const pglite = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const db = new PGlite()
        await db.waitReady
        return db
      }),
      (db) => Effect.promise(() => db.close()).pipe(Effect.timeoutOption(5_000), Effect.ignore)
    )
    return yield* PgliteClient.fromClient({ liveClient: pglite })
  })
)

/** Counts how often each unit ran, so a test can tell a grouped run from a re-run alone. */
const runs = new Map<number, number>()

/** A unit that writes its row; unit `refusedId` fails after writing (its write must not stay). */
const unit = (sql: SqlClient.SqlClient, id: number, refusedId: number) =>
  Effect.gen(function*() {
    runs.set(id, (runs.get(id) ?? 0) + 1)
    yield* sql`INSERT INTO units (id) VALUES (${id})`
    if (id === refusedId) return yield* new Refused({ id })
    return id
  })

describe("group commit", () => {
  it.live("a failing unit rolls its group back; the others commit once, alone, and it leaves nothing", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE units (id int PRIMARY KEY)`
      runs.clear()
      const committer = yield* GroupCommit.make((body) => body)
      // The first call holds the committer until the next eight are queued, so they form one group.
      const latch = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(committer.run(Deferred.await(latch).pipe(Effect.andThen(unit(sql, 0, -1)))))
      const rest = yield* Effect.forkChild(
        Effect.forEach([1, 2, 3, 4, 5, 6, 7, 8], (id) => Effect.exit(committer.run(unit(sql, id, 5))), { concurrency: "unbounded" })
      )
      yield* Effect.sleep("300 millis")
      yield* Deferred.succeed(latch, undefined)
      assert.deepStrictEqual(yield* Fiber.join(first), 0)
      const exits = yield* Fiber.join(rest)
      for (const [index, exit] of exits.entries()) {
        const id = index + 1
        if (id === 5) assert.deepStrictEqual(Exit.findErrorOption(exit), Option.some(new Refused({ id: 5 })))
        else assert.deepStrictEqual(exit, Exit.succeed(id))
      }
      const rows = yield* sql<{ id: number }>`SELECT id FROM units ORDER BY id`
      assert.deepStrictEqual(rows.map((row) => row.id), [0, 1, 2, 3, 4, 6, 7, 8])
      // Units 1-5 ran in the group (which stopped at 5's failure and was rolled back), then each
      // unit ran alone: 6-8 only alone. Every committed row above was written once.
      assert.deepStrictEqual([1, 2, 3, 4, 5, 6, 7, 8].map((id) => runs.get(id)), [2, 2, 2, 2, 2, 1, 1, 1])
    }).pipe(Effect.scoped, Effect.provide(Sql)), 30_000)

  it.live("a call after the committer stopped is answered as interrupted, not left waiting", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE IF NOT EXISTS units (id int PRIMARY KEY)`
      const scope = yield* Scope.make()
      const committer = yield* GroupCommit.make((body) => body).pipe(Scope.provide(scope))
      assert.deepStrictEqual(yield* committer.run(Effect.succeed("before")), "before")
      yield* Scope.close(scope, Exit.void)
      const after = yield* committer.run(Effect.succeed("after")).pipe(Effect.exit, Effect.timeoutOption(5_000))
      assert.isTrue(after._tag === "Some", "answered within 5 s")
      if (after._tag === "Some") assert.isTrue(Exit.hasInterrupts(after.value), "answered as interrupted")
    }).pipe(Effect.scoped, Effect.provide(Sql)), 30_000)
})
