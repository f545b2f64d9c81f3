/** An SqlClient over a fresh in-memory PGlite, closed with the scope: for store-level tests. */
import { PGlite } from "@electric-sql/pglite"
import { PgliteClient } from "@effect/sql-pglite"
import { Effect } from "effect"

export const MemoryPglite = PgliteClient.layerFrom(
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
