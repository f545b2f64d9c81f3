/**
 * Chain submissions name the node that drives them (distributed mode): when that node dies, a
 * survivor adopts its open submissions (its heartbeat went stale, NodeLiveness) and
 * finishes them, instead of leaving them until some node restarts. Rows from before this
 * migration have no owner and are adopted by the first node that looks.
 *
 * @since 0.4.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const submissionOwner = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE chain_submissions ADD COLUMN owner_node text`
  yield* sql`CREATE INDEX chain_submissions_open_owner ON chain_submissions (mode, owner_node) WHERE status IN ('recorded', 'sent')`
})
