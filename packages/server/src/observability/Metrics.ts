/**
 * The server's instruments, as Effect `Metric`s: what operators read on the admin listener's
 * `/metrics` (Prometheus text, observability/http.ts) and, when an OTLP endpoint is configured,
 * in their collector (observability/Otlp.ts). docs/operations.md ("Metrics") lists them.
 *
 * Labels are closed sets (a route template, a status code, a stage, a mode, an operation), never
 * a raw path, an id, an address a client chose, an amount, a memo, a key or a secret (D47): a
 * label's values are the series Prometheus keeps, and they leave the service.
 *
 * The hot path pays a counter's or a histogram's update and nothing else: each label set's
 * metric is built once and kept (`seriesOf`), so an update is a map lookup and an addition, with
 * no object built per request. What is read from the stores or the chain (backlogs, balances)
 * is read when scraped (observability/Scrape.ts), not on the way of a request.
 *
 * Each server keeps its own registry (`MetricsRegistryLive`): a process holding two (the tests)
 * reports each one's own counts.
 *
 * @since 0.9.0
 */
import { Clock, Effect, Exit, Layer, Metric } from "effect"
import { Mode } from "@pps/api/ApiKeys"


/** Request latency buckets, in seconds: a read answers in milliseconds, a create waits up to 5 s (D14). */
const requestSecondsBoundaries = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** Guardian call buckets, in seconds: a decision takes milliseconds, a reconciliation reads the chain. */
const guardianSecondsBoundaries = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30]

/**
 * The route label of a request that matched no route: scanners' paths must not become series.
 *
 * @since 0.9.0
 * @category constants
 */
export const unmatchedRoute = "unmatched"

interface RequestSeries {
  readonly requests: Metric.Counter<number>
  readonly seconds: Metric.Histogram<number>
}

/**
 * A metric per label set, built at its first use and kept: an update then costs a map lookup,
 * not a metric (and its registry key) built per call.
 *
 * @since 0.9.0
 * @category constructors
 */
export const seriesCache = <M>() => {
  const series = new Map<string, M>()
  return (key: string, make: () => M): M => {
    let found = series.get(key)
    if (found === undefined) {
      found = make()
      series.set(key, found)
    }
    return found
  }
}

/** The sets are bounded: routes × methods × statuses. */
const requestSeries = seriesCache<RequestSeries>()

const seriesOf = (method: string, route: string, status: number): RequestSeries =>
  requestSeries(`${method} ${status} ${route}`, () => {
    const attributes = { method, route, status: String(status) }
    return {
      requests: Metric.counter("pps_http_requests_total", {
        description: "HTTP requests answered, by method, route template and status",
        attributes,
        incremental: true
      }),
      seconds: Metric.histogram("pps_http_request_duration_seconds", {
        description: "HTTP request latency (received to answered), by method, route template and status",
        attributes,
        boundaries: requestSecondsBoundaries
      })
    }
  })

/**
 * Counts an answered request and its latency. `route` is the route's template
 * (`/v1/transfers/:transfer_id`), or `unmatchedRoute`.
 *
 * @since 0.9.0
 * @category recording
 */
export const observeRequest = (method: string, route: string, status: number, durationMs: number): Effect.Effect<void> =>
  Effect.contextWith((context) => {
    const series = seriesOf(method, route, status)
    series.requests.updateUnsafe(1, context)
    series.seconds.updateUnsafe(durationMs / 1000, context)
    return Effect.void
  })

/**
 * The stages a transfer passes on this node:
 * - `created`: a transfer asked of the guardian (a new one, or a held one its owner approved);
 * - `authorized`: the guardian attested it and its row is recorded (`pending`);
 * - `held`: the guardian held it for its owner's approval (D26);
 * - `refused`: the guardian refused it (insufficient balance, an agent's policy);
 * - `submitted`: its call signed and sent to the chain the first time;
 * - `confirmed` / `failed`: its outcome written (once per transfer, by whichever node wrote it).
 *
 * @since 0.9.0
 * @category models
 */
export type TransferStage = "created" | "authorized" | "held" | "refused" | "submitted" | "confirmed" | "failed"

const transferStages: ReadonlyArray<TransferStage> = ["created", "authorized", "held", "refused", "submitted", "confirmed", "failed"]
const modes = Mode.literals

const transferSeries = new Map(
  transferStages.flatMap((stage) =>
    modes.map((mode) =>
      [
        `${stage} ${mode}`,
        Metric.counter("pps_transfers_total", {
          description: "Transfers that reached a stage on this node, by stage and mode",
          attributes: { stage, mode },
          incremental: true
        })
      ] as const
    )
  )
)

/**
 * Counts a transfer reaching `stage`.
 *
 * @since 0.9.0
 * @category recording
 */
export const transferReached = (stage: TransferStage, mode: Mode): Effect.Effect<void> =>
  Metric.update(transferSeries.get(`${stage} ${mode}`)!, 1)

const shedRequests = Metric.counter("pps_transfer_requests_shed_total", {
  description: "Transfer decisions (creates, approvals) refused with 503 by admission control",
  incremental: true
})

/**
 * Counts a transfer decision refused by admission control (platform/Admission.ts).
 *
 * @since 0.9.0
 * @category recording
 */
export const requestShed: Effect.Effect<void> = Metric.update(shedRequests, 1)

/**
 * The guardian's operations, as its client names them.
 *
 * @since 0.9.0
 * @category models
 */
export type GuardianOperation =
  | "info"
  | "authorize"
  | "authorizeMany"
  | "settle"
  | "credit"
  | "sync"
  | "nonZero"
  | "sealedBalance"
  | "sealedKeyTotals"
  | "keyRotation"
  | "forgetKey"
  | "rotationVeto"
  | "reconcile"
  | "health"

const guardianSeries = seriesCache<Metric.Histogram<number>>()

const guardianHistogram = (operation: GuardianOperation, outcome: "ok" | "error") =>
  guardianSeries(`${operation} ${outcome}`, () =>
    Metric.histogram("pps_guardian_call_duration_seconds", {
      description: "Guardian calls from this node (asked to answered), by operation and outcome",
      attributes: { operation, outcome },
      boundaries: guardianSecondsBoundaries
    }))

/**
 * Times a guardian call: its latency under its operation, `ok` or `error` (a typed failure,
 * an outage, or an interruption).
 *
 * @since 0.9.0
 * @category recording
 */
export const timeGuardianCall = (operation: GuardianOperation) => <A, E, R>(call: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Clock.currentTimeNanos, (startedNs) =>
    Effect.onExit(call, (exit) =>
      Effect.flatMap(Clock.currentTimeNanos, (endedNs) =>
        Metric.update(guardianHistogram(operation, Exit.isSuccess(exit) ? "ok" : "error"), Number(endedNs - startedNs) / 1e9)
      )))

/**
 * A fresh registry for one server (Effect's default is one per process), with the counters of
 * closed label sets already at 0: a counter Prometheus first sees at 1 loses that first
 * increase to `rate()`, and an alert on a series that does not exist yet cannot fire.
 *
 * @since 0.9.0
 * @category layers
 */
export const MetricsRegistryLive = Layer.effect(
  Metric.MetricRegistry,
  Effect.gen(function*() {
    const registry: Metric.MetricRegistry = new Map()
    yield* Effect.forEach([...transferSeries.values(), shedRequests], (counter) => Metric.update(counter, 0), { discard: true }).pipe(
      Effect.provideService(Metric.MetricRegistry, registry)
    )
    return registry
  })
)
