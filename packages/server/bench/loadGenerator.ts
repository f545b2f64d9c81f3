/**
 * The throughput benchmark's load generator (throughput.ts): accounts set up over the API, then
 * transfers sent over loopback HTTP from this process, closed loop (each client sends its next
 * transfer when the last one is answered) or at a fixed arrival rate (open loop), each followed to
 * its final state; and the measured window around them: the CPU each process spent, this
 * process's own, the machine's busy share and each process's peak resident memory.
 *
 * Transfers use SPEC's plain form (`amount` in the body): the server seals, so the service's
 * whole cryptographic work is on its side.
 */
import * as http from "node:http"
import { EncryptionKey } from "@pps/crypto"
import { Client, Confidential } from "@pps/sdk/internal"
import type { Prng } from "../test/fault/prng.ts"
import { busyShare, readMachineTicks } from "./machineBusy.ts"
import { type CpuSample, diffCpu, peakOf, type ResidentSample } from "./processStats.ts"
import type { LevelRow, LevelWindow } from "./throughputReport.ts"
import { percentile } from "./stats.ts"

// ---- limits (each with its reason) ----

/** A create waits at most TRANSFER_CREATE_TIMEOUT_MS (5 s) for settlement; past this the socket is given up. */
const requestTimeoutMs = 30_000
/** A kept-alive socket idle this long is closed by this side (the server closes its own at 5 s). */
const idleSocketMs = 4_000
/** After a window, transfers answered `pending` get this long to reach a final state. */
const drainTimeoutMs = 120_000
/**
 * How often a `pending` transfer is read again: first after this, then each wait half as long
 * again, up to `drainPollMaxMs` (a client polling a payment backs off; hundreds of pending
 * transfers each read ten times a second would be a load of their own, larger than the creates).
 */
const drainPollMs = 100
const drainPollMaxMs = 1_000
/** Test USDG per account: enough for every level's transfers of 0.01 each. */
const fundingUsdg = "100000"
const amountUsdg = "0.01"
/** How often resident memory is read under load (its peak over a window is what a host must hold). */
const residentSampleMs = 500

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

// ---- HTTP ----

interface Answer {
  readonly status: number
  readonly json: unknown
  readonly retryAfterMs: number | undefined
}

/**
 * Every request of the load generator goes through node:http on kept-alive sockets, not `fetch`:
 * on this machine `fetch` (undici) cost 3-4x the CPU a request (~460-550 µs against ~160-190 at
 * 1,024 concurrent requests, measured against a trivial server), CPU taken from the two cores the
 * service runs on, and most of all at 1,024 clients, where refusals make most of the requests.
 * An idle socket is closed after `idleSocketMs`, before the server closes it (Node's
 * `keepAliveTimeout`, 5 s): a request sent on a socket the server is closing would fail, and a
 * create is not retried.
 */
const agent = new http.Agent({ keepAlive: true, timeout: idleSocketMs })

export const exchange = (url: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const body = init.body === undefined ? undefined : Buffer.from(init.body)
    const request = http.request(url, {
      method: init.method,
      agent,
      timeout: requestTimeoutMs,
      headers: body === undefined ? init.headers : { ...init.headers, "content-length": String(body.length) }
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("error", reject)
      response.on("end", () => {
        let json: unknown = undefined
        try {
          json = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          // a non-JSON answer: only its status counts
        }
        const retryAfter = response.headers["retry-after"]
        resolve({ status: response.statusCode ?? 0, json, retryAfterMs: retryAfter === undefined ? undefined : Number(retryAfter) * 1000 })
      })
    })
    request.on("timeout", () => request.destroy(new Error(`no answer within ${requestTimeoutMs} ms`)))
    request.on("error", reject)
    request.end(body)
  })

const stringField = (value: unknown, name: string): string | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const field = (value as Record<string, unknown>)[name]
  return typeof field === "string" ? field : undefined
}

export interface Account {
  readonly handle: string
  readonly apiKey: string
}

const json = (apiKey: string, extra: Record<string, string> = {}) => ({
  authorization: `Bearer ${apiKey}`,
  "content-type": "application/json",
  ...extra
})

// ---- set-up ----

export const setUp = async (accountsCount: number, baseUrl: string, adminUrl: string, adminToken: string): Promise<ReadonlyArray<Account>> => {
  const accounts: Array<Account> = []
  for (let index = 0; index < accountsCount; index++) {
    const handle = `bench-${index}`
    const created = await exchange(`${adminUrl}/admin/accounts`, {
      method: "POST",
      headers: json(adminToken),
      body: JSON.stringify({ handle, kyc_status: "verified" })
    })
    const apiKey = stringField(created.json, "api_key")
    if (created.status !== 201 || apiKey === undefined) throw new Error(`account ${handle}: ${created.status} ${JSON.stringify(created.json)}`)
    await Confidential.registerKey(Client.make({ baseUrl, apiKey }), EncryptionKey.generate())
    const funded = await exchange(`${baseUrl}/v1/test/faucet`, { method: "POST", headers: json(apiKey), body: JSON.stringify({ amount: fundingUsdg }) })
    if (funded.status !== 200) throw new Error(`faucet ${handle}: ${funded.status} ${JSON.stringify(funded.json)}`)
    accounts.push({ handle: `@${handle}`, apiKey })
  }
  // Credits come from the chain (D39): an account can spend once the guardian has read its
  // grant. One transfer from each, repeated until it is accepted, is the warm-up too.
  for (const [index, account] of accounts.entries()) {
    const to = accounts[(index + 1) % accounts.length]!.handle
    for (let attempt = 0; ; attempt++) {
      const answer = await exchange(`${baseUrl}/v1/transfers`, { method: "POST", headers: json(account.apiKey), body: JSON.stringify({ to, amount: amountUsdg }) })
      if (answer.status === 201) break
      if (attempt > 600) throw new Error(`warm-up ${account.handle}: ${answer.status} ${JSON.stringify(answer.json)}`)
      await sleep(100)
    }
  }
  return accounts
}

// ---- one transfer, followed to its end ----

export interface Outcome {
  /** The create's status (201 created, 429/503 shed, anything else an error). */
  readonly status: number
  /** The final transfer status, for a 201. */
  readonly final?: "confirmed" | "failed" | "pending"
  /** Create sent → confirmed seen (the answer, or a later read). */
  readonly latencyMs?: number
  readonly retryAfterMs?: number
}

const transferOnce = async (prng: Prng, baseUrl: string, accounts: ReadonlyArray<Account>, followPending: Array<Promise<Outcome>>): Promise<Outcome> => {
  const from = prng.int(0, accounts.length - 1)
  const to = (from + prng.int(1, accounts.length - 1)) % accounts.length
  const sender = accounts[from]!
  const started = performance.now()
  let answer: Answer
  try {
    answer = await exchange(`${baseUrl}/v1/transfers`, {
      method: "POST",
      headers: json(sender.apiKey, { "idempotency-key": `bench-${crypto.randomUUID()}` }),
      body: JSON.stringify({ to: accounts[to]!.handle, amount: amountUsdg })
    })
  } catch {
    return { status: 0 }
  }
  if (answer.status !== 201) return { status: answer.status, ...(answer.retryAfterMs === undefined ? {} : { retryAfterMs: answer.retryAfterMs }) }
  const status = stringField(answer.json, "status")
  if (status === "confirmed") return { status: 201, final: "confirmed", latencyMs: performance.now() - started }
  if (status !== "pending") return { status: 201, final: "failed" }
  // D14: answered `pending` after the create timeout; read it until it is final.
  const transferId = stringField(answer.json, "transfer_id") ?? ""
  const followed = (async (): Promise<Outcome> => {
    const deadline = Date.now() + drainTimeoutMs
    for (let waitMs = drainPollMs; Date.now() < deadline; waitMs = Math.min(drainPollMaxMs, waitMs * 1.5)) {
      await sleep(waitMs)
      const read = await exchange(`${baseUrl}/v1/transfers/${transferId}`, { method: "GET", headers: json(sender.apiKey) }).catch(() => undefined)
      const now = stringField(read?.json, "status")
      if (now === "confirmed") return { status: 201, final: "confirmed", latencyMs: performance.now() - started }
      if (now === "failed") return { status: 201, final: "failed" }
    }
    return { status: 201, final: "pending" }
  })()
  followPending.push(followed)
  return { status: 201, final: "pending" }
}

// ---- a measured window ----

/** What a window reads of the processes it measures. */
export interface Sampler {
  readonly cpu: () => CpuSample
  readonly resident: () => ResidentSample
}

export interface LevelResult {
  readonly label: string
  readonly clients: number | undefined
  readonly elapsedMs: number
  readonly outcomes: ReadonlyArray<Outcome>
  readonly cpu: CpuSample
  /** This process's CPU over the window (the load it generates costs the same cores). */
  readonly loadCpuMs: number
  readonly busyShare: number
  readonly resident: ResidentSample
}

/** An open loop's window and arrival rate; a closed loop has none. */
export interface OpenLoop {
  readonly window: Exclude<LevelWindow, "closed loop">
  readonly askedPerSecond: number
}

export const summarize = (result: LevelResult, open?: OpenLoop): LevelRow => {
  const byStatus: Record<string, number> = {}
  for (const outcome of result.outcomes) {
    const key = outcome.status === 201 ? `201 ${outcome.final}` : String(outcome.status)
    byStatus[key] = (byStatus[key] ?? 0) + 1
  }
  const confirmed = result.outcomes.filter((outcome) => outcome.final === "confirmed")
  const latencies = confirmed.flatMap((outcome) => (outcome.latencyMs === undefined ? [] : [outcome.latencyMs]))
  const perTransfer = (ms: number) => (confirmed.length === 0 ? Number.NaN : ms / confirmed.length)
  return {
    label: result.label,
    window: open?.window ?? "closed loop",
    clients: result.clients,
    askedPerSecond: open?.askedPerSecond,
    confirmed: confirmed.length,
    perSecond: confirmed.length / (result.elapsedMs / 1000),
    byStatus,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    cpuMsPerTransfer: Object.fromEntries(Object.entries(result.cpu).map(([name, ms]) => [name, perTransfer(ms)])),
    cpuLoadMs: perTransfer(result.loadCpuMs),
    busyShare: result.busyShare,
    resident: result.resident
  }
}

/**
 * Runs `drive` between two samples of each process's CPU and of the machine's counters, reading
 * resident memory every `residentSampleMs` (D67: a level's figure is its peak, not its end); the
 * window ends once every followed transfer is final.
 */
export const measured = async (
  label: string,
  clients: number | undefined,
  sampler: Sampler,
  drive: (followPending: Array<Promise<Outcome>>) => Promise<ReadonlyArray<Outcome>>
): Promise<LevelResult> => {
  const before = sampler.cpu()
  const ticksBefore = readMachineTicks()
  const loadBefore = process.cpuUsage()
  const started = performance.now()
  let peak = sampler.resident()
  const timer = setInterval(() => {
    peak = peakOf(peak, sampler.resident())
  }, residentSampleMs)
  try {
    const followPending: Array<Promise<Outcome>> = []
    const answered = await drive(followPending)
    const followed = await Promise.all(followPending)
    const elapsedMs = performance.now() - started
    const after = sampler.cpu()
    const load = process.cpuUsage(loadBefore)
    // A followed outcome replaces the `pending` answer it started from.
    const outcomes = [...answered.filter((outcome) => outcome.final !== "pending"), ...followed]
    return {
      label,
      clients,
      elapsedMs,
      outcomes,
      cpu: diffCpu(before, after),
      loadCpuMs: (load.user + load.system) / 1000,
      busyShare: busyShare(ticksBefore, readMachineTicks()),
      resident: peakOf(peak, sampler.resident())
    }
  } finally {
    clearInterval(timer)
  }
}

/**
 * `clients` clients for `windowMs`, client `index` talking to node `index mod nodes` (round-robin
 * over the api nodes; one in the embedded mode). A shed request (429/503) waits its Retry-After,
 * as the SDK does, but not past the end of the window (the window's count would not change; the
 * level would only end later).
 */
export const closedLoop = (prng: Prng, windowMs: number, baseUrls: ReadonlyArray<string>, accounts: ReadonlyArray<Account>, clients: number) =>
async (followPending: Array<Promise<Outcome>>) => {
  const outcomes: Array<Outcome> = []
  const endAt = performance.now() + windowMs
  await Promise.all(Array.from({ length: clients }, async (_, index) => {
    while (performance.now() < endAt) {
      const outcome = await transferOnce(prng, baseUrls[index % baseUrls.length]!, accounts, followPending)
      outcomes.push(outcome)
      if (outcome.retryAfterMs !== undefined) await sleep(Math.min(outcome.retryAfterMs, endAt - performance.now()))
    }
  }))
  return outcomes
}

/** `perSecond` transfers a second for `durationMs`, whatever the answers (open loop). */
export const openLoop = (prng: Prng, perSecond: number, durationMs: number, baseUrls: ReadonlyArray<string>, accounts: ReadonlyArray<Account>) =>
async (followPending: Array<Promise<Outcome>>) => {
  const count = Math.round((perSecond * durationMs) / 1000)
  const started = performance.now()
  return Promise.all(Array.from({ length: count }, async (_, index) => {
    await sleep(started + (index * 1000) / perSecond - performance.now())
    return transferOnce(prng, baseUrls[index % baseUrls.length]!, accounts, followPending)
  }))
}
