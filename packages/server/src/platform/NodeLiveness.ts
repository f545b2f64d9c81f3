/**
 * Which server processes are alive, so that work claimed by a dead one is taken
 * over within seconds (D36) instead of after a lease of a minute.
 *
 * Each process is a node with an id of its own for its lifetime and a heartbeat row
 * it refreshes every `beatEveryMs`; a node whose heartbeat is older than
 * `deadAfterMs` is dead. In the embedded mode the data-directory lock already proves
 * that every earlier process is gone, so at start every other heartbeat is deleted:
 * their claims resolve on the first retry. A node that stops gracefully deletes its
 * own row.
 *
 * @since 0.2.0
 */
import { Context, Duration, Effect, Layer, Option, Schedule } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { AppConfig } from "../config/AppConfig.ts"
import { ulid } from "./Ids.ts"

/** How often a node refreshes its heartbeat. */
export const beatEveryMs = 2_000
/** A heartbeat older than this is a dead node's (several missed beats, so a slow database is not death). */
export const deadAfterMs = 10_000

/**
 * @since 0.2.0
 * @category services
 */
export class NodeLiveness extends Context.Service<NodeLiveness, {
  /** This process's node id. */
  readonly nodeId: string
  /** The other nodes alive now (their heartbeat younger than `deadAfterMs`). */
  readonly otherLiveNodes: Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
}>()("server/platform/NodeLiveness") {
  static readonly layer = Layer.effect(
    NodeLiveness,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const sql = yield* SqlClient.SqlClient
      const nodeId = `node_${ulid()}`
      const beat = sql`
        INSERT INTO node_heartbeats (node_id, started_at, beat_at) VALUES (${nodeId}, now(), now())
        ON CONFLICT (node_id) DO UPDATE SET beat_at = now()`
      yield* beat
      if (Option.isNone(config.databaseUrl)) {
        // Embedded: we hold the data directory's lock, so no other process runs on this database.
        yield* sql`DELETE FROM node_heartbeats WHERE node_id <> ${nodeId}`
      }
      yield* Effect.forkScoped(
        beat.pipe(
          Effect.catch((error) => Effect.logWarning("node heartbeat failed", error)),
          Effect.repeat(Schedule.spaced(Duration.millis(beatEveryMs)))
        )
      )
      yield* Effect.addFinalizer(() => sql`DELETE FROM node_heartbeats WHERE node_id = ${nodeId}`.pipe(Effect.ignore))
      const otherLiveNodes = sql<{ readonly node_id: string }>`
        SELECT node_id FROM node_heartbeats
        WHERE node_id <> ${nodeId} AND beat_at > now() - ${`${deadAfterMs} milliseconds`}::interval`.pipe(
        Effect.map((rows) => rows.map((row) => row.node_id))
      )
      return NodeLiveness.of({ nodeId, otherLiveNodes })
    })
  )
}
