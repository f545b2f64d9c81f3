/**
 * Admission control for the transfer decision (issue 16: past capacity, shed early
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
}

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

  return {
    /** A release function when admitted, undefined when refused. */
    admit: (nowMs: number): ((endMs: number) => void) | undefined => {
      adjust(nowMs)
      if (settings.targetMs > 0 && inFlight >= Math.floor(limit)) return undefined
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
    state: (): AdmissionState => ({ inFlight, limit: Math.floor(limit) })
  }
}

/**
 * Seconds a refused client is asked to wait: long enough for the queue ahead of it
 * to drain, short enough not to idle a node that recovered.
 *
 * @since 0.6.0
 */
export const admissionRetryAfterSeconds = 1

/**
 * @since 0.6.0
 * @category services
 */
export class Admission extends Context.Service<Admission, {
  /** Runs `effect` admitted, with its `AdmissionTicket`; `onRefused` when the node is at its limit. */
  readonly gate: <A, E, R, A2, E2, R2>(
    effect: Effect.Effect<A, E, R>,
    onRefused: Effect.Effect<A2, E2, R2>
  ) => Effect.Effect<A | A2, E | E2, Exclude<R, AdmissionTicket> | R2>
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
        gate: <A, E, R, A2, E2, R2>(effect: Effect.Effect<A, E, R>, onRefused: Effect.Effect<A2, E2, R2>) =>
          Effect.suspend((): Effect.Effect<A | A2, E | E2, Exclude<R, AdmissionTicket> | R2> => {
            const release = controller.admit(Date.now())
            if (release === undefined) return onRefused
            const ticket = AdmissionTicket.of({ release: Effect.sync(() => release(Date.now())) })
            return effect.pipe(Effect.provideService(AdmissionTicket, ticket), Effect.ensuring(ticket.release))
          }),
        state: Effect.sync(controller.state)
      })
    })
  )
}
