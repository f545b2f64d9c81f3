/**
 * Admission control for the transfer decision (past capacity, shed early
 * and cheaply instead of letting latency grow without bound).
 *
 * What is limited is the number of transfer decisions in flight on this node: from
 * the moment a `POST /v1/transfers` (or an approval) is admitted, before its key,
 * body or idempotency claim is looked at, until its transfer is authorized and
 * recorded (or refused). The wait for the chain afterwards holds nothing: it costs
 * no CPU, and a slow block must not shed new work.
 *
 * The limit adapts to what this node can do now (additive increase, multiplicative
 * decrease on the decisions' own latency, as TCP and Netflix's concurrency-limits
 * do): every `windowMs`, if the decisions that ended in the window took longer than
 * `targetMs` on average, the limit shrinks by a tenth; if the window used the whole
 * limit and stayed under the target, it grows by a twentieth (at least one). By
 * Little's law the limit settles near throughput × target, so an admitted request
 * waits about `targetMs` at most for its decision and the rest are answered at once
 * with 503 `service_unavailable` and `Retry-After`: a refusal costs the parsing of a
 * request line and nothing else. Never below `minInFlight`, so a burst a client
 * could reasonably send is never shed.
 *
 * A refused client is told when to come back (`Retry-After`), and that wait follows the
 * overload: the clients refused over the last wait return over the next one, so each second the
 * wait is set to how long this node took to admit as many (wait × refused ÷ admitted over the
 * last wait, at most doubled or halved a second, 1 to 10 s), and each refusal is told a wait
 * spread from half to one and a half times it, in turn, so clients refused together do not
 * return together. A node twenty times over capacity thus answers about as many refusals as
 * admissions instead of twenty times as many: the refusals stop eating the capacity they
 * protect (each costs a parsed request and a socket write). Once a whole wait passes without a
 * refusal, the wait halves each second back to 1 s; two seconds without any request reset it.
 *
 * A refusal is not stored under an idempotency key (it happens before the claim): a
 * retry with the same key runs.
 *
 * @since 0.6.0
 */
import { Context, Effect, Layer, Option } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/**
 * The admitted request's place: released when its decision ends (by the transfer
 * path, early) and in any case when its response is sent. Releasing twice is a no-op.
 *
 * @since 0.6.0
 * @category services
 */
export class AdmissionTicket extends Context.Service<AdmissionTicket, {
  readonly release: Effect.Effect<void>
}>()("server/platform/AdmissionTicket") {}

/**
 * Ends the current request's decision stage, if it was admitted through the gate.
 *
 * @since 0.6.0
 * @category combinators
 */
export const releaseAdmission: Effect.Effect<void> = Effect.serviceOption(AdmissionTicket).pipe(
  Effect.flatMap(Option.match({ onNone: () => Effect.void, onSome: (ticket) => ticket.release }))
)

/**
 * @since 0.6.0
 * @category models
 */
export interface AdmissionSettings {
  /** The average decision latency the limit is kept under; 0 turns shedding off. */
  readonly targetMs: number
  readonly minInFlight: number
  readonly maxInFlight: number
  readonly windowMs: number
}

/**
 * @since 0.6.0
 * @category models
 */
export interface AdmissionState {
  readonly inFlight: number
  readonly limit: number
  /** The wait refused clients are told now, in seconds (each is told a wait around it). */
  readonly retryAfterSeconds: number
}

/**
 * The wait refused clients are told, in seconds: at least `min` (the queue ahead of them needs
 * that long to move), at most `max` (a node that recovered must not idle its clients long),
 * before the spread.
 *
 * @since 0.6.0
 */
export const admissionRetryAfterSeconds = { min: 1, max: 10 } as const

/** How often the wait told to refused clients is re-estimated. */
const retryAfterPeriodMs = 1_000

/**
 * The controller, free of Effect and clocks so its rule can be tested step by step.
 *
 * @since 0.6.0
 * @category constructors
 */
export const makeAdmissionController = (settings: AdmissionSettings) => {
  let inFlight = 0
  let limit = settings.minInFlight
  let windowStartMs = 0
  let windowLatencySumMs = 0
  let windowEnded = 0
  let windowPeakInFlight = 0
  // The wait's estimate: per-second counts of the last `max` seconds (newest last), and how many
  // refusals were told a wait, to spread those waits (see `retryAfterFor`).
  let retryAfterSeconds: number = admissionRetryAfterSeconds.min
  let periodStartMs = 0
  let lastArrivalMs = Number.NEGATIVE_INFINITY
  const periods: Array<{ admitted: number; refused: number }> = [{ admitted: 0, refused: 0 }]
  let refusalsTold = 0

  const adjust = (nowMs: number) => {
    if (nowMs - windowStartMs < settings.windowMs) return
    if (windowEnded > 0) {
      const averageMs = windowLatencySumMs / windowEnded
      if (averageMs > settings.targetMs) {
        limit = Math.max(settings.minInFlight, limit * 0.9)
      } else if (windowPeakInFlight >= Math.floor(limit)) {
        limit = Math.min(settings.maxInFlight, limit + Math.max(1, limit / 20))
      }
    }
    windowStartMs = nowMs
    windowLatencySumMs = 0
    windowEnded = 0
    windowPeakInFlight = inFlight
  }

  // The clients refused over the last wait come back over the next one: ask them to wait as
  // long as this node took to admit as many (the admissions include the returning clients, so
  // the rule settles where about as many are refused as admitted). Counted over the whole last
  // wait, not its last second: refused clients told the same wait come back together, and the
  // quiet seconds between their returns are not the end of the overload.
  const pace = (nowMs: number) => {
    // A quiet gap (no request at all for two periods): whatever overload was measured is over.
    const quiet = nowMs - lastArrivalMs >= 2 * retryAfterPeriodMs
    lastArrivalMs = nowMs
    if (!quiet && nowMs - periodStartMs < retryAfterPeriodMs) return
    if (quiet) {
      retryAfterSeconds = admissionRetryAfterSeconds.min
      periods.length = 0
    } else {
      const recent = periods.slice(-Math.ceil(retryAfterSeconds))
      const admitted = recent.reduce((sum, period) => sum + period.admitted, 0)
      const refused = recent.reduce((sum, period) => sum + period.refused, 0)
      const wanted = retryAfterSeconds * refused / Math.max(1, admitted)
      retryAfterSeconds = Math.min(
        admissionRetryAfterSeconds.max,
        Math.max(admissionRetryAfterSeconds.min, retryAfterSeconds / 2, Math.min(wanted, retryAfterSeconds * 2))
      )
    }
    periodStartMs = nowMs
    periods.push({ admitted: 0, refused: 0 })
    if (periods.length > admissionRetryAfterSeconds.max) periods.shift()
  }

  // Refusals are told waits spread evenly around the estimate (from half of it to one and a half
  // times it, in turn), so clients refused together do not all come back in the same second.
  const retryAfterFor = () => {
    const low = Math.max(admissionRetryAfterSeconds.min, Math.round(retryAfterSeconds / 2))
    const high = Math.max(low, Math.round(retryAfterSeconds * 1.5))
    return low + (refusalsTold++ % (high - low + 1))
  }

  /** True, counted as a refusal, when a request arriving now would be refused. */
  const refuseEarly = (nowMs: number): boolean => {
    adjust(nowMs)
    pace(nowMs)
    if (settings.targetMs <= 0 || inFlight < Math.floor(limit)) return false
    periods.at(-1)!.refused += 1
    return true
  }

  return {
    /**
     * The early answer, before a request's body is read: true (a refusal) while the node is
     * full. One that passes is admitted, or refused if the node filled up meanwhile, by `admit`.
     */
    refuseEarly,
    /** A release function when admitted, undefined when refused. */
    admit: (nowMs: number): ((endMs: number) => void) | undefined => {
      if (refuseEarly(nowMs)) return undefined
      periods.at(-1)!.admitted += 1
      inFlight += 1
      windowPeakInFlight = Math.max(windowPeakInFlight, inFlight)
      let released = false
      return (endMs) => {
        if (released) return
        released = true
        inFlight -= 1
        windowLatencySumMs += Math.max(0, endMs - nowMs)
        windowEnded += 1
        adjust(endMs)
      }
    },
    /** The wait to tell the client just refused, in seconds. */
    retryAfterSeconds: retryAfterFor,
    state: (): AdmissionState => ({ inFlight, limit: Math.floor(limit), retryAfterSeconds: Math.ceil(retryAfterSeconds) })
  }
}

/**
 * @since 0.6.0
 * @category services
 */
export class Admission extends Context.Service<Admission, {
  /**
   * Runs `effect` admitted, with its `AdmissionTicket`; when the node is at its limit,
   * `onRefused` with the seconds the client is to wait.
   */
  readonly gate: <A, E, R, A2, E2, R2>(
    effect: Effect.Effect<A, E, R>,
    onRefused: (retryAfterSeconds: number) => Effect.Effect<A2, E2, R2>
  ) => Effect.Effect<A | A2, E | E2, Exclude<R, AdmissionTicket> | R2>
  /**
   * Some(seconds to wait) when a request arriving now would be refused: answered before its
   * body is read, which must not hold a place (a slow upload would hold it as long as it lasts).
   */
  readonly refuseEarly: Effect.Effect<Option.Option<number>>
  readonly state: Effect.Effect<AdmissionState>
}>()("server/platform/Admission") {
  static readonly layer = Layer.effect(
    Admission,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const controller = makeAdmissionController({
        targetMs: config.transferAdmissionTargetMs,
        minInFlight: Math.min(64, config.transferAdmissionMaxInFlight),
        maxInFlight: config.transferAdmissionMaxInFlight,
        windowMs: 100
      })
      return Admission.of({
        gate: <A, E, R, A2, E2, R2>(
          effect: Effect.Effect<A, E, R>,
          onRefused: (retryAfterSeconds: number) => Effect.Effect<A2, E2, R2>
        ) =>
          Effect.suspend((): Effect.Effect<A | A2, E | E2, Exclude<R, AdmissionTicket> | R2> => {
            // A monotonic clock: the wall clock may step back, and the windows would stall.
            const release = controller.admit(performance.now())
            if (release === undefined) return onRefused(controller.retryAfterSeconds())
            const ticket = AdmissionTicket.of({ release: Effect.sync(() => release(performance.now())) })
            return effect.pipe(Effect.provideService(AdmissionTicket, ticket), Effect.ensuring(ticket.release))
          }),
        refuseEarly: Effect.sync(() =>
          controller.refuseEarly(performance.now()) ? Option.some(controller.retryAfterSeconds()) : Option.none()
        ),
        state: Effect.sync(controller.state)
      })
    })
  )
}
