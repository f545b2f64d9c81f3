/**
 * The SDK's one retry policy (`internal/retry.ts`), as data and a pure function: what is
 * retried, for how long (the default budget covers a server restart: retries until 15 s after
 * the first failure, the last one then, whatever the jitter), `Retry-After` honoured within the budget,
 * 409 `idempotency_key_in_progress` waited out apart from it. Then the loop against a real
 * loopback HTTP server: one Idempotency-Key on every attempt of a POST, the caller's signal
 * ending the call at once.
 */
import * as http from "node:http"
import type * as net from "node:net"
import { describe, expect, it } from "vitest"
import * as Retry from "../src/internal/retry.ts"

const policy: Retry.Policy = { ...Retry.defaults, attemptTimeoutMs: 90_000 }
const start: Retry.State = { retries: 0, inProgressWaits: 0, firstFailureAt: undefined, inProgressSince: undefined }
const answer = (status: number, retryAfterMs?: number, inProgress = false): Retry.Outcome => ({ _tag: "Answer", status, retryAfterMs, inProgress })
const network: Retry.Outcome = { _tag: "NetworkFailure" }

/** Every retry of one call failing `outcome` at once, with jitter `random`: when each retry starts, from the first failure. */
const schedule = (outcome: Retry.Outcome, random: number): ReadonlyArray<number> => {
  const starts: Array<number> = []
  let state = start
  let now = 0
  for (;;) {
    const next = Retry.nextDelay(policy, state, outcome, now, random)
    if (next === undefined) return starts
    now += next.delayMs
    starts.push(now)
    state = next.state
  }
}

describe("the retry policy", () => {
  it("retries network failures and 408, 429, 502, 503, 504; nothing else", () => {
    for (const outcome of [network, answer(408), answer(429), answer(502), answer(503), answer(504)]) {
      expect(Retry.nextDelay(policy, start, outcome, 0, 0.5)).toBeDefined()
    }
    for (const status of [200, 201, 400, 401, 402, 404, 409, 500]) expect(Retry.nextDelay(policy, start, answer(status), 0, 0.5), String(status)).toBeUndefined()
  })

  it("by default, retries until 15 s after the first failure (a restart takes 3-10 s), the last attempt at 15 s, bounded", () => {
    for (const random of [0, 0.5, 0.999]) {
      const starts = schedule(network, random)
      expect(starts.at(-1)).toBe(15_000)
      expect(starts.length).toBeLessThanOrEqual(policy.maxRetries)
      // The backoff doubles from 250 ms up to 4 s, jittered to half of it at least.
      expect(Math.max(...starts.map((at, n) => at - (starts[n - 1] ?? 0)))).toBeLessThanOrEqual(Retry.backoffCeilingMs)
    }
    expect(schedule(network, 0.5)).toEqual([187.5, 562.5, 1312.5, 2812.5, 5812.5, 8812.5, 11812.5, 14812.5, 15_000])
  })

  it("honours Retry-After within the budget, and stops where it would end past it", () => {
    expect(Retry.nextDelay(policy, start, answer(503, 2_000), 0, 0.5)?.delayMs).toBe(2_000)
    expect(schedule(answer(503, 4_000), 0.5)).toEqual([4_000, 8_000, 12_000])
    expect(Retry.nextDelay(policy, start, answer(429, 16_000), 0, 0.5)).toBeUndefined()
    expect(Retry.nextDelay({ ...policy, budgetMs: 0 }, start, network, 0, 0.5)).toBeUndefined()
    expect(Retry.nextDelay({ ...policy, maxRetries: 1 }, { ...start, retries: 1, firstFailureAt: 0 }, network, 100, 0.5)).toBeUndefined()
  })

  it("waits out idempotency_key_in_progress for 90 s, apart from the budget and the retry count", () => {
    const state = { ...start, retries: policy.maxRetries, firstFailureAt: 0 }
    const inProgress = answer(409, 1_000, true)
    expect(Retry.nextDelay(policy, state, inProgress, 60_000, 0.5)?.delayMs).toBe(1_000)
    expect(Retry.nextDelay(policy, { ...state, inProgressSince: 0 }, inProgress, Retry.inProgressWindowMs, 0.5)).toBeUndefined()
  })
})

/** A loopback server answering each request with the next of `statuses` (then 200), recording its Idempotency-Key. */
const serve = async (statuses: ReadonlyArray<number>) => {
  const keys: Array<string | undefined> = []
  const server = http.createServer((request, response) => {
    const key = request.headers["idempotency-key"]
    keys.push(typeof key === "string" ? key : undefined)
    const status = statuses[keys.length - 1] ?? 200
    response.writeHead(status, status === 503 ? { "retry-after": "0" } : {})
    response.end(JSON.stringify({ status }))
  })
  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))
  return { url: `http://127.0.0.1:${port}/v1/webhooks`, keys, close: () => new Promise((resolve) => server.close(resolve)) }
}

describe("retryingFetch", { timeout: 10_000 }, () => {
  it("sends one Idempotency-Key on every attempt of a POST, and tells each retry", async () => {
    const upstream = await serve([503, 502])
    try {
      const told: Array<Retry.Retry> = []
      const fetch = Retry.retryingFetch((url, init) => globalThis.fetch(url, init), { ...policy, onRetry: (retry) => told.push(retry) })
      const response = await fetch(upstream.url, { method: "POST", body: "{}" })
      expect(response.status).toBe(200)
      expect(upstream.keys).toHaveLength(3)
      expect(upstream.keys[0]).toMatch(/^pps_/)
      expect(new Set(upstream.keys).size).toBe(1)
      expect(told.map((retry) => [retry.retry, retry.cause, retry.idempotencyKey])).toEqual([
        [1, "HTTP 503", upstream.keys[0]],
        [2, "HTTP 502", upstream.keys[0]]
      ])
    } finally {
      await upstream.close()
    }
  })

  it("keeps the caller's key, and ends at once when the caller aborts", async () => {
    // 502 carries no Retry-After: the backoff (at least 30 s here) is what the abort cuts short.
    const upstream = await serve([502, 502, 502])
    try {
      const fetch = Retry.retryingFetch((url, init) => globalThis.fetch(url, init), { ...policy, baseDelayMs: 60_000 })
      const abort = new AbortController()
      // Aborts once the first attempt was answered, so the abort lands in the backoff (a fixed
      // 300 ms could end before a loaded machine had sent the first request at all).
      const abortInBackoff = setInterval(() => {
        if (upstream.keys.length > 0) {
          clearInterval(abortInBackoff)
          setTimeout(() => abort.abort(new Error("given up")), 50)
        }
      }, 10)
      const started = Date.now()
      const failed = await fetch(upstream.url, {
        method: "POST",
        headers: { "idempotency-key": "caller-1" },
        signal: abort.signal
      }).catch((error: unknown) => error)
      clearInterval(abortInBackoff)
      expect(failed).toMatchObject({ message: "given up" })
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(upstream.keys).toEqual(["caller-1"])
    } finally {
      await upstream.close()
    }
  })
})
