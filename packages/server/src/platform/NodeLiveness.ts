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
 * The row also says whether the node acts on control messages now (`hears_control`:
 * its control-channel subscription is registered and reliable), so a node that waits
 * for every other node's answer to one waits only for those (ApiKeys' revocation).
 *
 * @since 0.2.0
 */
import { Context, Duration, Effect, Layer, Option, Schedule, Semaphore } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { AppConfig } from "../config/AppConfig.ts"
import { statementWithoutWaitingForDisk } from "./CommitDurability.ts"
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
  /**
   * The other nodes alive now (their heartbeat younger than `deadAfterMs`) whose row says
   * they act on control messages.
   */
  readonly otherNodesHearingControl: Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
  /**
   * Records whether this node acts on control messages now. Writes are serialized and each
   * writes the latest value asked for, so the row ends as the last call said, whatever the
   * order in which calls reach the database; succeeds once a write after this call committed.
   */
  readonly hearsControl: (hears: boolean) => Effect.Effect<void, SqlError.SqlError>
}>()("server/platform/NodeLiveness") {
  static readonly layer = Layer.effect(
    NodeLiveness,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const sql = yield* SqlClient.SqlClient
      const nodeId = `node_${ulid()}`
      let hears = false
      /** Set once the row is deleted at stop: a beat or a write in flight must not bring it back. */
      let stopped = false
      const writes = yield* Semaphore.make(1)
      // A row found missing is written again whole, with what this node hears now. A beat does not
      // wait for the disk (D80): it is liveness, not a record, and one lost in a crash is written
      // again by the next (every 2 s, dead only after 10 s); embedded, a crash is this node's death.
      const beat = writes.withPermits(1)(Effect.suspend(() =>
        stopped ? Effect.void : statementWithoutWaitingForDisk(sql, (commitSetting) =>
          sql`
            INSERT INTO node_heartbeats (node_id, started_at, beat_at, hears_control) VALUES (${nodeId}, now(), now(), ${hears})
            ON CONFLICT (node_id) DO UPDATE SET beat_at = now() RETURNING ${commitSetting} AS commit_setting`).pipe(Effect.asVoid)
      ))
      const hearsControl = (value: boolean) =>
        Effect.suspend(() => {
          hears = value
          return writes.withPermits(1)(Effect.suspend(() =>
            stopped ? Effect.void : sql`UPDATE node_heartbeats SET hears_control = ${hears} WHERE node_id = ${nodeId}`.pipe(Effect.asVoid)
          ))
        }).pipe(Effect.asVoid)
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
      // After a beat in flight (the same lock), which would otherwise insert the row again.
      yield* Effect.addFinalizer(() =>
        writes.withPermits(1)(Effect.suspend(() => {
          stopped = true
          return sql`DELETE FROM node_heartbeats WHERE node_id = ${nodeId}`
        })).pipe(Effect.ignore)
      )
      const otherNodesHearingControl = sql<{ readonly node_id: string }>`
        SELECT node_id FROM node_heartbeats
        WHERE node_id <> ${nodeId} AND hears_control AND beat_at > now() - ${`${deadAfterMs} milliseconds`}::interval`.pipe(
        Effect.map((rows) => rows.map((row) => row.node_id))
      )
      return NodeLiveness.of({ nodeId, otherNodesHearingControl, hearsControl })
    })
  )
}
