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
 * `targetMs` on average **and the CPU is saturated** (the machine's CPUs, or this
 * process's event loop, at least `saturatedShare` busy over the window), or longer than
 * `waitCeilingFactor` times the target however idle this machine is (a bound on the wait;
 * and a guardian or database on another host is saturated out of this machine's sight),
 * the limit shrinks by a tenth; otherwise, if the window used the whole limit, it grows
 * by a twentieth (at least one). Slow decisions on a CPU with time to spare are waits (the
 * guardian's round trip, a group commit, a block), not work: more decisions in flight
 * are what use that time (Little's law), and shedding them would leave the machine idle
 * (issue 49). Under saturation the limit settles near throughput × target, so an
 * admitted request waits about `targetMs` at most for its decision and the rest are
 * answered at once with 503 `service_unavailable` and `Retry-After`: a refusal costs the
 * parsing of a request line and nothing else. Never below `minInFlight`, so a burst a
 * client could reasonably send is never shed, nor above `maxInFlight`.
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
import * as os from "node:os"
import { performance } from "node:perf_hooks"
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
  /**
   * How busy the CPU was since the last call, 0-1: the busier of the machine's CPUs and this
   * process's event loop (`cpuBusyShare`). Read once a window.
   */
  readonly busyShare: () => number
  /**
   * Decisions this slow on average shrink the limit even with CPU to spare (a bound on the wait).
   */
  readonly waitCeilingMs: number
}

/**
 * The share of the CPU above which slow decisions are the CPU's work, and shed.
 *
 * @since 0.11.0
 */
export const saturatedShare = 0.9

/**
 * How many times the target decisions may take on average, with CPU to spare, before the limit
 * shrinks all the same.
 *
 * @since 0.11.0
 */
export const waitCeilingFactor = 4

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
 * The controller's mutable state: the adaptive limit and its window, and the wait's estimate.
 */
interface ControllerState {
  readonly settings: AdmissionSettings
  inFlight: number
  limit: number
  windowStartMs: number
  windowLatencySumMs: number
  windowEnded: number
  windowPeakInFlight: number
  /** The wait told to refused clients, in seconds, before the spread. */
  retryAfterSeconds: number
  periodStartMs: number
  lastArrivalMs: number
  /** Per-second counts of the last `max` seconds (newest last). */
  readonly periods: Array<{ admitted: number; refused: number }>
  /** How many refusals were told a wait, to spread those waits (see `retryAfterFor`). */
  refusalsTold: number
}

const adjust = (state: ControllerState, nowMs: number) => {
  const { settings } = state
  if (nowMs - state.windowStartMs < settings.windowMs) return
  // Read every window, so that each reading covers the window it judges.
  const saturated = settings.busyShare() >= saturatedShare
  if (state.windowEnded > 0) {
    const averageMs = state.windowLatencySumMs / state.windowEnded
    // Far past the target, the limit shrinks whatever this machine shows (`waitCeilingMs`).
    if (averageMs > settings.targetMs && (saturated || averageMs > settings.waitCeilingMs)) {
      state.limit = Math.max(settings.minInFlight, state.limit * 0.9)
    } else if (state.windowPeakInFlight >= Math.floor(state.limit)) {
      state.limit = Math.min(settings.maxInFlight, state.limit + Math.max(1, state.limit / 20))
    }
  }
  state.windowStartMs = nowMs
  state.windowLatencySumMs = 0
  state.windowEnded = 0
  state.windowPeakInFlight = state.inFlight
}

// The clients refused over the last wait come back over the next one: ask them to wait as
// long as this node took to admit as many (the admissions include the returning clients, so
// the rule settles where about as many are refused as admitted). Counted over the whole last
// wait, not its last second: refused clients told the same wait come back together, and the
// quiet seconds between their returns are not the end of the overload.
const pace = (state: ControllerState, nowMs: number) => {
  // A quiet gap (no request at all for two periods): whatever overload was measured is over.
  const quiet = nowMs - state.lastArrivalMs >= 2 * retryAfterPeriodMs
  state.lastArrivalMs = nowMs
  if (!quiet && nowMs - state.periodStartMs < retryAfterPeriodMs) return
  const { periods } = state
  if (quiet) {
    state.retryAfterSeconds = admissionRetryAfterSeconds.min
    periods.length = 0
  } else {
    const current = state.retryAfterSeconds
    const recent = periods.slice(-Math.ceil(current))
    const admitted = recent.reduce((sum, period) => sum + period.admitted, 0)
    const refused = recent.reduce((sum, period) => sum + period.refused, 0)
    const wanted = current * refused / Math.max(1, admitted)
    state.retryAfterSeconds = Math.min(
      admissionRetryAfterSeconds.max,
      Math.max(admissionRetryAfterSeconds.min, current / 2, Math.min(wanted, current * 2))
    )
  }
  state.periodStartMs = nowMs
  periods.push({ admitted: 0, refused: 0 })
  if (periods.length > admissionRetryAfterSeconds.max) periods.shift()
}

// Refusals are told waits spread evenly around the estimate (from half of it to one and a half
// times it, in turn), so clients refused together do not all come back in the same second.
const retryAfterFor = (state: ControllerState) => {
  const low = Math.max(admissionRetryAfterSeconds.min, Math.round(state.retryAfterSeconds / 2))
  const high = Math.max(low, Math.round(state.retryAfterSeconds * 1.5))
  return low + (state.refusalsTold++ % (high - low + 1))
}

/** True, counted as a refusal, when a request arriving now would be refused. */
const refuseEarly = (state: ControllerState, nowMs: number): boolean => {
  adjust(state, nowMs)
  pace(state, nowMs)
  if (state.settings.targetMs <= 0 || state.inFlight < Math.floor(state.limit)) return false
  state.periods.at(-1)!.refused += 1
  return true
}

const admit = (state: ControllerState, nowMs: number): ((endMs: number) => void) | undefined => {
  if (refuseEarly(state, nowMs)) return undefined
  state.periods.at(-1)!.admitted += 1
  state.inFlight += 1
  state.windowPeakInFlight = Math.max(state.windowPeakInFlight, state.inFlight)
  let released = false
  return (endMs) => {
    if (released) return
    released = true
    state.inFlight -= 1
    state.windowLatencySumMs += Math.max(0, endMs - nowMs)
    state.windowEnded += 1
    adjust(state, endMs)
  }
}

/**
 * The controller, free of Effect and clocks so its rule can be tested step by step.
 *
 * @since 0.6.0
 * @category constructors
 */
export const makeAdmissionController = (settings: AdmissionSettings) => {
  const state: ControllerState = {
    settings,
    inFlight: 0,
    limit: settings.minInFlight,
    windowStartMs: 0,
    windowLatencySumMs: 0,
    windowEnded: 0,
    windowPeakInFlight: 0,
    retryAfterSeconds: admissionRetryAfterSeconds.min,
    periodStartMs: 0,
    lastArrivalMs: Number.NEGATIVE_INFINITY,
    periods: [{ admitted: 0, refused: 0 }],
    refusalsTold: 0
  }
  return {
    /**
     * The early answer, before a request's body is read: true (a refusal) while the node is
     * full. One that passes is admitted, or refused if the node filled up meanwhile, by `admit`.
     */
    refuseEarly: (nowMs: number): boolean => refuseEarly(state, nowMs),
    /** A release function when admitted, undefined when refused. */
    admit: (nowMs: number): ((endMs: number) => void) | undefined => admit(state, nowMs),
    /** The wait to tell the client just refused, in seconds. */
    retryAfterSeconds: (): number => retryAfterFor(state),
    state: (): AdmissionState => ({
      inFlight: state.inFlight,
      limit: Math.floor(state.limit),
      retryAfterSeconds: Math.ceil(state.retryAfterSeconds)
    })
  }
}

/**
 * A reader of how busy the CPU was since its last read: the busier of the machine's CPUs (all
 * cores, from `os.cpus()`'s tick counters) and this process's event loop (its utilization). A
 * saturated event loop bounds this node on a machine with idle cores, so it counts too. In a
 * container limited by a CPU quota the machine's counters are the host's: there the event loop's
 * share and the wait ceiling are what bind.
 *
 * @since 0.11.0
 */
export const cpuBusyShare = (): (() => number) => {
  let ticks = cpuTicks()
  let loop = performance.eventLoopUtilization()
  return () => {
    const nowTicks = cpuTicks()
    const total = nowTicks.total - ticks.total
    // A window in which the machine's CPUs changed (hot-plug, a new cpuset) compares different
    // sets: it reads as not busy, and the next window is measured afresh.
    const machine = total > 0 && nowTicks.cores === ticks.cores ? Math.min(1, Math.max(0, 1 - (nowTicks.idle - ticks.idle) / total)) : 0
    const eventLoop = performance.eventLoopUtilization(loop).utilization
    ticks = nowTicks
    loop = performance.eventLoopUtilization()
    return Math.max(machine, eventLoop)
  }
}

/** All cores' ticks since boot: idle, and in all, and how many cores. */
const cpuTicks = () => {
  const cpus = os.cpus()
  return cpus.reduce((sum, { times }) => ({
    cores: sum.cores,
    idle: sum.idle + times.idle,
    total: sum.total + times.user + times.nice + times.sys + times.idle + times.irq
  }), { cores: cpus.length, idle: 0, total: 0 })
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
        windowMs: 100,
        busyShare: cpuBusyShare(),
        // A bound on the wait, wherever what a decision waits on is: without it, 1,024 clients
        // at 89 % busy made some creates wait 17 s embedded (2026-11-29 23:45), and a guardian
        // or database on another host is saturated out of this machine's sight.
        waitCeilingMs: waitCeilingFactor * config.transferAdmissionTargetMs
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
