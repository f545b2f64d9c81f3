/**
 * The one retry policy of every client the SDK makes (D49): the Promise facade (`Pps`), the Effect
 * client (`ApiClient`, under Effect's fetch client) and the command line (`pps`). It sits at the
 * `fetch` level, so each call is one `fetch` whatever its surface: the POST gets its
 * Idempotency-Key once (the caller's, or 128 random bits), and every attempt of the call sends
 * that key (D6, D36), so a retried payment is never paid twice.
 *
 * - What is retried: a network failure (a server restarting refuses connections, or drops the
 *   one it was answering), an attempt without an answer within `attemptTimeoutMs`, and the
 *   answers that say "not done, try again": 408, 429, 502, 503 and 504.
 * - When: after `Retry-After` when the answer carries one, else after a jittered exponential
 *   backoff from `baseDelayMs`, doubling up to `backoffCeilingMs`.
 * - For how long: a retry starts at most `budgetMs` after the call's first failed attempt (15 s
 *   by default: a server restart takes 3-10 s, D36's retry after it is answered at once); the
 *   last backoff is shortened so that one attempt is made at the budget's end. At most
 *   `maxRetries` of them. A `Retry-After` that would end past the budget is not waited for: the
 *   caller gets that answer.
 * - 409 `idempotency_key_in_progress` (the first attempt still runs on the server) is waited
 *   out with the same key for up to `inProgressWindowMs`, apart from the budget: giving up
 *   would leave the caller with an error for a payment in flight.
 *
 * The policy is data (`Policy`) and a pure function (`nextDelay`); the loop (`retryingFetch`)
 * only sends, asks `nextDelay` and waits.
 *
 * @since 0.5.0
 * @internal
 */
import type { Fetch } from "../Client.ts"
import { newIdempotencyKey } from "./idempotency.ts"

/**
 * How a call is retried.
 *
 * @since 0.5.0
 * @category models
 */
export interface Policy {
  /** Retries after the first attempt, at most. */
  readonly maxRetries: number
  /** A retry starts at most this long after the call's first failed attempt. */
  readonly budgetMs: number
  /** One attempt's wait for the answer's headers; past it the attempt failed (and is retried). */
  readonly attemptTimeoutMs: number
  /** The first backoff; each next one doubles, up to `backoffCeilingMs`, jittered. */
  readonly baseDelayMs: number
  /** Told before each wait (the command line prints it on stderr). */
  readonly onRetry?: ((retry: Retry) => void) | undefined
}

/**
 * A retry about to be waited for.
 *
 * @since 0.5.0
 * @category models
 */
export interface Retry {
  readonly method: string
  readonly url: string
  /** The Idempotency-Key every attempt of the call sends (a POST's), or undefined. */
  readonly idempotencyKey: string | undefined
  /** 1 for the first retry. */
  readonly retry: number
  readonly delayMs: number
  /** What failed: `HTTP 503`, `idempotency_key_in_progress`, or the network failure. */
  readonly cause: string
}

/**
 * The defaults of every surface (each names its own options for them).
 *
 * @since 0.5.0
 * @category constants
 */
export const defaults = {
  /** With the backoff below the budget ends first (11-14 retries in 15 s); this bounds a caller who raises the budget. */
  maxRetries: 12,
  /** Outlasts a server restart (3-10 s measured), so a call in flight through one succeeds once. */
  budgetMs: 15_000,
  baseDelayMs: 250
} as const

/** The longest backoff between two attempts: a restarted server is found within about this. */
export const backoffCeilingMs = 4_000

/**
 * How long 409 `idempotency_key_in_progress` is waited out: the first attempt's run ends within
 * the server's longest create (guardian authorization up to 30 s, D14's wait, the guardian's
 * settle up to 30 s), whatever this client's own timeout is.
 */
export const inProgressWindowMs = 90_000

/** The answers that say the request was not done and may be sent again with its key. */
const retryableStatuses: ReadonlySet<number> = new Set([408, 429, 502, 503, 504])

/**
 * What an attempt ended with, as the policy sees it.
 *
 * @since 0.5.0
 * @category models
 */
export type Outcome =
  | { readonly _tag: "Answer"; readonly status: number; readonly retryAfterMs: number | undefined; readonly inProgress: boolean }
  | { readonly _tag: "NetworkFailure" }

/**
 * Where a call stands: retries so far (`retries`, `inProgressWaits`), when its first attempt
 * failed and when it was first told its key is in progress (ms since the epoch).
 *
 * @since 0.5.0
 * @category models
 */
export interface State {
  readonly retries: number
  readonly inProgressWaits: number
  readonly firstFailureAt: number | undefined
  readonly inProgressSince: number | undefined
}

/**
 * The jittered exponential backoff before retry `n` (0 for the first): half to all of
 * `baseDelayMs · 2^n`, capped. `random` is in [0, 1).
 *
 * @since 0.5.0
 * @category policy
 */
export const backoffMs = (policy: Policy, n: number, random: number): number =>
  Math.min(policy.baseDelayMs * 2 ** n, backoffCeilingMs) * (0.5 + random / 2)

/**
 * The wait before the next attempt, or `undefined` to stop with this outcome; and the state
 * after it. Pure: `now` and `random` are given.
 *
 * @since 0.5.0
 * @category policy
 */
export const nextDelay = (
  policy: Policy,
  state: State,
  outcome: Outcome,
  now: number,
  random: number
): { readonly delayMs: number; readonly state: State } | undefined => {
  if (outcome._tag === "Answer" && outcome.inProgress) {
    const since = state.inProgressSince ?? now
    if (now - since >= inProgressWindowMs) return undefined
    const delayMs = outcome.retryAfterMs ?? backoffMs(policy, state.inProgressWaits, random)
    return { delayMs, state: { ...state, inProgressSince: since, inProgressWaits: state.inProgressWaits + 1 } }
  }
  if (outcome._tag === "Answer" && !retryableStatuses.has(outcome.status)) return undefined
  if (state.retries >= policy.maxRetries) return undefined
  const firstFailureAt = state.firstFailureAt ?? now
  const leftMs = firstFailureAt + policy.budgetMs - now
  if (leftMs <= 0) return undefined
  const retryAfter = outcome._tag === "Answer" ? outcome.retryAfterMs : undefined
  // The server's own wait is kept or not waited for; a backoff is shortened to the budget's end,
  // so the last attempt is made there (a restart that ends late in the budget is still found).
  if (retryAfter !== undefined && retryAfter > leftMs) return undefined
  const delayMs = retryAfter ?? Math.min(backoffMs(policy, state.retries, random), leftMs)
  return { delayMs, state: { ...state, firstFailureAt, retries: state.retries + 1 } }
}

/** `Retry-After` in milliseconds: seconds, or an HTTP date. */
const retryAfterMs = (response: Response, now: number): number | undefined => {
  const value = response.headers.get("retry-after")
  if (value === null || value.trim() === "") return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/** Whether an answer is D6's "the first request with this key still runs". */
const isInProgress = async (response: Response): Promise<boolean> => {
  if (response.status !== 409) return false
  const body: unknown = await response.clone().json().catch(() => undefined)
  return typeof body === "object" && body !== null && "error" in body && typeof body.error === "object" && body.error !== null &&
    "code" in body.error && body.error.code === "idempotency_key_in_progress"
}

/** Waits, unless the caller gives up first (its signal: Effect's interruption, an AbortController). */
const sleep = (ms: number, signal: AbortSignal | undefined) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", abort)
      resolve()
    }, ms)
    const abort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener("abort", abort, { once: true })
  })

/**
 * One attempt: the answer's headers within `attemptTimeoutMs`, or a failure. The timer stops
 * once the headers are in, so a body read later (the live event stream) is not cut by it; the
 * caller's own signal still ends both.
 */
const attempt = async (base: Fetch, url: string, init: RequestInit, attemptTimeoutMs: number): Promise<Response> => {
  const timeout = new AbortController()
  const timer = setTimeout(() => timeout.abort(new Error(`no answer within ${attemptTimeoutMs} ms`)), attemptTimeoutMs)
  try {
    return await base(url, { ...init, signal: init.signal ? AbortSignal.any([init.signal, timeout.signal]) : timeout.signal })
  } finally {
    clearTimeout(timer)
  }
}

const describeFailure = (cause: unknown): string => {
  const code = cause instanceof Error && cause.cause instanceof Error && "code" in cause.cause ? ` (${String(cause.cause.code)})` : ""
  return `${cause instanceof Error ? cause.message : String(cause)}${code}`
}

/**
 * `base` with the policy: a POST without an Idempotency-Key gets one, the same on every
 * attempt; failures are retried as `nextDelay` says; the caller's signal ends the call at once.
 *
 * @since 0.5.0
 * @category constructors
 */
export const retryingFetch = (base: Fetch, policy: Policy): Fetch => async (url, init) => {
  const headers = new Headers(init.headers)
  const method = (init.method ?? "GET").toUpperCase()
  if (method === "POST" && !headers.has("idempotency-key")) headers.set("idempotency-key", newIdempotencyKey())
  const sent = { ...init, headers }
  let state: State = { retries: 0, inProgressWaits: 0, firstFailureAt: undefined, inProgressSince: undefined }
  for (;;) {
    let outcome: Outcome
    let response: Response | undefined
    let failure: unknown
    try {
      response = await attempt(base, url, sent, policy.attemptTimeoutMs)
      outcome = {
        _tag: "Answer",
        status: response.status,
        retryAfterMs: retryAfterMs(response, Date.now()),
        inProgress: await isInProgress(response)
      }
    } catch (cause) {
      // The caller gave up (interrupted, aborted): not a failure to retry.
      if (init.signal?.aborted) throw cause
      failure = cause
      outcome = { _tag: "NetworkFailure" }
    }
    const next = nextDelay(policy, state, outcome, Date.now(), Math.random())
    if (next === undefined) {
      if (response !== undefined) return response
      throw failure
    }
    await response?.body?.cancel()
    policy.onRetry?.({
      method,
      url,
      idempotencyKey: headers.get("idempotency-key") ?? undefined,
      retry: next.state.retries + next.state.inProgressWaits,
      delayMs: next.delayMs,
      cause: outcome._tag === "NetworkFailure"
        ? describeFailure(failure)
        : outcome.inProgress ? "idempotency_key_in_progress" : `HTTP ${outcome.status}`
    })
    await sleep(next.delayMs, init.signal ?? undefined)
    state = next.state
  }
}
