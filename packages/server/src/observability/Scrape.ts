/**
 * The gauges read when `/metrics` is scraped, from where their truth lives: the backlogs and
 * the live nodes from the database, the relayers' balances from the chain, admission control's
 * state from memory, and what this process is (`pps_build_info`). Reading them per scrape (every
 * 15 s or so) costs a handful of indexed counts and one balance call per relayer, and nothing on
 * a request's way; a worker keeping them current would cost that all the time.
 *
 * The database's figures are the whole deployment's: every node reports the same values, so
 * dashboards take `max` across nodes, not `sum` (deploy/grafana-dashboard.json does).
 *
 * A source that does not answer within `sourceTimeoutMs` is reported by
 * `pps_scrape_source_up{source} 0` and its gauges keep their last values: a scrape must answer
 * (Prometheus's own timeout is 10 s by default), and a database outage must not hide the rest.
 *
 * Counts are of partial indexes' rows (open submissions, pending deliveries, unpublished events,
 * held transactions): they grow with the backlog, not with history.
 *
 * @since 0.9.0
 */
import { Clock, Effect, Metric, Option } from "effect"
import { SqlClient } from "effect/sql"
import { Mode } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import { Admission } from "../platform/Admission.ts"
import { deadAfterMs } from "../platform/NodeLiveness.ts"
import { type ChainContext, Chains } from "../settlement/Chains.ts"
import { seriesCache } from "./Metrics.ts"

const modes = Mode.literals

/** A source answers within this, or the scrape goes on without it (Prometheus waits 10 s by default). */
const sourceTimeoutMs = 2_000

const gaugeSeries = seriesCache<Metric.Gauge<number>>()

/** The gauge `name` with `attributes`. */
const gaugeOf = (name: string, description: string, attributes: Record<string, string> = {}) =>
  gaugeSeries(`${name} ${JSON.stringify(attributes)}`, () => Metric.gauge(name, { description, attributes }))

const balanceSeries = seriesCache<Metric.Gauge<bigint>>()

const balanceGauge = (mode: Mode, relayer: string) =>
  balanceSeries(`${mode} ${relayer}`, () =>
    Metric.gauge("pps_relayer_balance_wei", {
      description: "A relayer's native balance (wei) as the chain reports it, by mode and relayer address",
      attributes: { mode, relayer },
      bigint: true
    }))

const set = (name: string, description: string, value: number, attributes?: Record<string, string>) =>
  Metric.update(gaugeOf(name, description, attributes), value)

const sourceUp = (source: string, up: boolean) =>
  set("pps_scrape_source_up", "Whether a source of the gauges answered the last scrape (1) or not (0)", up ? 1 : 0, { source })

/** Runs a source's reads, bounded; its gauge `pps_scrape_source_up` says whether it answered. */
const bounded = <E, R>(source: string, read: Effect.Effect<void, E, R>) =>
  read.pipe(
    Effect.timeout(sourceTimeoutMs),
    Effect.matchCauseEffect({
      onSuccess: () => sourceUp(source, true),
      onFailure: (cause) => Effect.andThen(Effect.logWarning("metrics: a source did not answer the scrape", source, cause), sourceUp(source, false))
    })
  )

const submissionStatuses = ["recorded", "sent"] as const

interface CountRow {
  readonly n: string
}
interface AgedRow extends CountRow {
  readonly seconds: string
}

/** Open chain submissions (`recorded`: not yet signed; `sent`: awaiting their receipt), and the oldest one's age. */
const readSettlementBacklog = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const rows = yield* sql<AgedRow & { readonly mode: Mode; readonly status: string }>`
      SELECT mode, status, count(*)::text AS n, COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::text AS seconds
      FROM chain_submissions WHERE status IN ('recorded', 'sent') GROUP BY mode, status`
    for (const mode of modes) {
      const ofMode = rows.filter((row) => row.mode === mode)
      for (const status of submissionStatuses) {
        const count = Number(ofMode.find((row) => row.status === status)?.n ?? 0)
        yield* set("pps_settlement_backlog", "Chain submissions not yet final, by mode and status (recorded: not signed; sent: awaiting a receipt)", count, { mode, status })
      }
      const oldest = Math.max(0, ...ofMode.map((row) => Number(row.seconds)))
      yield* set("pps_settlement_backlog_oldest_seconds", "Age of the oldest chain submission not yet final, by mode", oldest, { mode })
    }
  })

/** Pending webhook deliveries, how overdue the most overdue is, and the events not yet published. */
const readDeliveryBacklog = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const [deliveries] = yield* sql<AgedRow>`
      SELECT count(*)::text AS n, COALESCE(GREATEST(EXTRACT(EPOCH FROM now() - min(next_attempt_at)), 0), 0)::text AS seconds
      FROM webhook_deliveries WHERE status = 'pending'`
    yield* set("pps_webhook_backlog", "Webhook deliveries pending (due now or scheduled for a retry)", Number(deliveries?.n ?? 0))
    yield* set("pps_webhook_backlog_overdue_seconds", "How long past its time the most overdue pending webhook delivery is", Number(deliveries?.seconds ?? 0))
    const [outbox] = yield* sql<AgedRow>`
      SELECT count(*)::text AS n, COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::text AS seconds
      FROM events WHERE published_at IS NULL`
    yield* set("pps_event_outbox_backlog", "Events recorded but not yet published to the bus", Number(outbox?.n ?? 0))
    yield* set("pps_event_outbox_oldest_seconds", "Age of the oldest event not yet published", Number(outbox?.seconds ?? 0))
  })

/** Held agent transactions awaiting their owner, and the nodes whose heartbeat is fresh. */
const readHeldAndNodes = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const held = yield* sql<CountRow & { readonly mode: Mode }>`
      SELECT mode, count(*)::text AS n FROM agent_transactions WHERE status = 'pending_approval' GROUP BY mode`
    for (const mode of modes) {
      yield* set("pps_held_transactions", "Agent transactions held for their owner's approval, by mode", Number(held.find((row) => row.mode === mode)?.n ?? 0), { mode })
    }
    const [nodes] = yield* sql<CountRow>`
      SELECT count(*)::text AS n FROM node_heartbeats WHERE beat_at > now() - ${`${deadAfterMs} milliseconds`}::interval`
    yield* set("pps_nodes_alive", "Server nodes whose heartbeat is younger than 10 s (this one included)", Number(nodes?.n ?? 0))
  })

/** Every relayer's native balance on a mode's chain: when it nears zero, nothing settles. */
const readRelayerBalances = ({ client, mode, relayers }: ChainContext) =>
  Effect.forEach(relayers, (relayer) =>
    Effect.tryPromise(() => client.getBalance({ address: relayer.address })).pipe(
      Effect.flatMap((wei) => Metric.update(balanceGauge(mode, relayer.address), wei))
    ), { concurrency: 4, discard: true })

const admissionGauges = (admission: Admission["Service"]) =>
  Effect.gen(function*() {
    const state = yield* admission.state
    yield* set("pps_admission_in_flight", "Transfer decisions admitted and not yet ended on this node", state.inFlight)
    yield* set("pps_admission_limit", "Transfer decisions this node admits at once now (adaptive)", Math.floor(state.limit))
    yield* set("pps_admission_retry_after_seconds", "The wait this node tells refused transfer decisions now", state.retryAfterSeconds)
  })

/**
 * What the scrape reads before it formats the registry: every source at once, each bounded.
 *
 * @since 0.9.0
 * @category constructors
 */
export const makeRefresh = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const chains = yield* Chains
  const admission = yield* Admission
  const config = yield* AppConfig
  const buildInfo = {
    role: config.nodeRole ?? "all",
    database: Option.isSome(config.databaseUrl) ? "postgres" : "pglite",
    guardian: Option.isSome(config.guardianUrl) ? "remote" : "embedded",
    node_version: process.version
  }
  const startedSeconds = Math.floor((yield* Clock.currentTimeMillis) / 1000 - process.uptime())
  const configuredChains = modes.flatMap((mode) => Option.toArray(chains.get(mode)))
  return Effect.all([
    bounded("database", Effect.all([readSettlementBacklog(sql), readDeliveryBacklog(sql), readHeldAndNodes(sql)], { concurrency: "unbounded", discard: true })),
    ...configuredChains.map((chain) => bounded(`chain_${chain.mode}`, readRelayerBalances(chain))),
    admissionGauges(admission),
    set("pps_build_info", "This process: its role, database, guardian deployment and Node version (always 1)", 1, buildInfo),
    set("pps_process_start_time_seconds", "When this process started (Unix seconds)", startedSeconds)
  ], { concurrency: "unbounded", discard: true })
})
