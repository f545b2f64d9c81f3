/**
 * The fault-injection harness (docs/reliability.md): the real server process under
 * concurrent transfer load, SIGKILLed at seeded moments and restarted on the same
 * data directory, every unanswered request retried with its own `Idempotency-Key`
 * and body, then the invariants a payments API owes its clients checked from the
 * outside, through the public API and the SDK's client-side decryption only:
 *
 * - every request answered; one key, at most one transfer (D6, D36);
 * - no transfer that no request names, none confirmed and then undone;
 * - balances (decrypted client-side) = funding + received − sent, the sum conserved;
 * - nothing stuck `pending`; one terminal webhook event per transfer and side;
 * - no account frozen: each still sends at the end.
 *
 * One seed decides the kill schedule and each client's request sequence
 * (sender, recipient, amount, key), so a failing seed replays the same faults.
 * How requests interleave still depends on timing: the seed fixes what is sent
 * and when the kills fall relative to the load's start, not the exact line a kill hits.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { EncryptionKey } from "@pps/crypto"
import { Amount } from "@pps/sdk"
import { Client, Confidential } from "@pps/sdk/internal"
import { type Receiver, startReceiver } from "../support/webhooks-receiver.ts"
import { type Prng, substream } from "./prng.ts"
import { type FaultTarget, freshServerTarget, guardianTarget, strayGroups } from "./processes.ts"

export interface HarnessOptions {
  readonly seed: number
  /** SIGKILLs during the load: of the server process (its guardian child with it), or of the guardian alone. */
  readonly kills: number
  /**
   * Let the schedule also pick the embedded guardian alone (the server's supervisor starts
   * a new one). Off by default, so seeds recorded before it replay the same schedule.
   */
  readonly killGuardian?: boolean
  /** Concurrent clients, each sending one request at a time. */
  readonly clients: number
  readonly accounts: number
  /** Load time, at least; the load also lasts until every kill has happened. */
  readonly durationMs: number
  /** Subscribe every account to a loopback webhook receiver and check its deliveries. */
  readonly webhooks: boolean
  /** Keep the data directory and the server log even when every invariant holds. */
  readonly keep: boolean
  readonly log: (line: string) => void
}

/**
 * What the harness runs against: where clients send, how accounts are made, and what
 * the kill schedule may kill. `embeddedTopology` is the single server of `npm start`;
 * the multi-node test (test/cluster.test.ts) passes the cluster of `npm run cluster`.
 */
export interface HarnessTopology {
  /** Where clients send their requests: the server, or the balancer in front of several. */
  readonly baseUrl: string
  readonly adminUrl: string
  /** Read once the topology has started (the embedded server generates it). */
  readonly adminToken: () => string
  readonly targets: ReadonlyArray<FaultTarget>
  /**
   * Whether the service answers while a target is down (nodes behind a balancer): then
   * clients keep sending through a kill and a killed target is not started again, so
   * the survivors must finish its work; otherwise clients wait for the restart.
   */
  readonly survivesKills: boolean
  /** Kill the targets in their order (each once, with `kills` = their number) instead of a seeded pick. */
  readonly killInOrder?: boolean
  /** Starts everything (or nothing, when the caller started it) and resolves once it serves. */
  readonly start: () => Promise<void>
  readonly stop: () => Promise<void>
  readonly workDir: string
}

export interface Violation {
  readonly invariant: string
  readonly detail: string
}

export interface HarnessReport {
  readonly seed: number
  /** The planned gaps (ms of load between a restart and the next kill): the replayable schedule. */
  readonly killGapsMs: ReadonlyArray<number>
  readonly kills: number
  readonly restartMs: ReadonlyArray<number>
  readonly requests: number
  readonly answered: number
  /** Requests sent more than once (no answer, or 409 in progress, then the same key again). */
  readonly retried: number
  readonly answersByStatus: Readonly<Record<string, number>>
  readonly transfersConfirmed: number
  readonly transfersFailed: number
  /** Keys answered with two different transfers, plus transfers no request names. */
  readonly duplicates: number
  readonly strays: number
  readonly stuck: number
  readonly balanceMismatches: number
  readonly frozen: number
  readonly webhookEvents: number
  /** Final answers per node that served them (`X-Served-By`; "direct" without a balancer). */
  readonly answersByNode: Readonly<Record<string, number>>
  readonly violations: ReadonlyArray<Violation>
  readonly durationMs: number
  readonly workDir: string
}

// ---- limits (each with its reason) ----

/** One request's socket wait; a create waits at most TRANSFER_CREATE_TIMEOUT_MS (5 s) for settlement. */
const requestTimeoutMs = 30_000
/** A request is retried until answered, for at most this long: two restarts' worth on a loaded machine. */
const retryWindowMs = 240_000
/** How long a 409 `idempotency_key_in_progress` waits before the same key goes again. */
const inProgressBackoffMs = 300
/** Transfers settle in seconds (200 ms blocks); the background recovery round runs every 5 s. */
const quiescenceTimeoutMs = 120_000
/** Deliveries in flight at a kill are attempted again after the restart (D32's first retry is ~5 s). */
const webhookSettleTimeoutMs = 90_000
/** The guardian follows the chain's events in block order; credits reach it within a few blocks. */
const balanceSettleTimeoutMs = 60_000
/** Each account's starting funds: enough that random transfers rarely meet 402. */
const fundingBaseUnits = 1_000n * 1_000_000n
/** Transfer amounts: 0.01 to 1.00 USDG, in cents. */
const amountCentsMax = 100
/** The answered requests replayed after the load (all retried ones, plus a sample up to this many). */
const replaySampleMax = 200

const usdg = "USDG"
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// ---- recording ----

interface Attempt {
  readonly atMs: number
  /** undefined: no answer (connection refused or reset, timeout). */
  readonly status: number | undefined
  readonly transferId: string | undefined
  readonly transferStatus: string | undefined
  readonly errorCode: string | undefined
  readonly replayed: boolean
  readonly servedBy: string | undefined
  /** Whether the answer carried `Retry-After` (every 503 must: SPEC, D1). */
  readonly retryAfter: boolean
}

interface RecordedRequest {
  readonly key: string
  readonly client: number
  readonly sender: number
  readonly recipient: number
  readonly amount: bigint
  readonly body: string
  readonly attempts: Array<Attempt>
  /** Answers to the same key and body sent again after the load (the replay check). */
  readonly replays: Array<Attempt>
  /** The last answer that ends the request (not a retryable one). */
  final: Attempt | undefined
}

interface Account {
  readonly index: number
  readonly accountId: string
  readonly handle: string
  readonly apiKey: string
  readonly keyPair: EncryptionKey.KeyPair
}

interface Answer {
  readonly status: number
  readonly json: unknown
  readonly replayed: boolean
  readonly retryAfterMs: number | undefined
  readonly servedBy: string | undefined
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const field = (value: unknown, name: string): string | undefined => {
  if (!isRecord(value)) return undefined
  const found = value[name]
  return typeof found === "string" ? found : undefined
}

const errorCodeOf = (json: unknown): string | undefined =>
  isRecord(json) ? field(json["error"], "code") : undefined

/** One HTTP exchange; `undefined` when no answer came (the server died or is down). */
const exchange = async (
  url: string,
  init: { readonly method: string; readonly headers: Record<string, string>; readonly body?: string }
): Promise<Answer | undefined> => {
  try {
    const response = await fetch(url, {
      method: init.method,
      headers: init.headers,
      ...(init.body === undefined ? {} : { body: init.body }),
      signal: AbortSignal.timeout(requestTimeoutMs)
    })
    const text = await response.text()
    let json: unknown = undefined
    try {
      json = text === "" ? undefined : JSON.parse(text)
    } catch {
      json = text
    }
    const retryAfter = response.headers.get("retry-after")
    return {
      status: response.status,
      json,
      replayed: response.headers.get("idempotent-replayed") === "true",
      retryAfterMs: retryAfter === null ? undefined : Number(retryAfter) * 1000,
      servedBy: response.headers.get("x-served-by") ?? undefined
    }
  } catch {
    return undefined
  }
}

/**
 * Whether an answer ends a request. No answer, 409 in progress, 429 and 503 are
 * the answers a client is told to retry; everything else is the request's outcome.
 */
const isFinal = (answer: Answer | undefined): boolean =>
  answer !== undefined && !(answer.status === 409 && errorCodeOf(answer.json) === "idempotency_key_in_progress") &&
  answer.status !== 429 && answer.status !== 503

/** Tells the clients whether the server is up, so that they wait for a restart instead of spinning. */
class ServerGate {
  private up = false
  private waiters: Array<() => void> = []
  open() {
    this.up = true
    for (const wake of this.waiters.splice(0)) wake()
  }
  close() {
    this.up = false
  }
  whenUp(): Promise<void> {
    return this.up ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve))
  }
}

// ---- the run ----

/** The embedded server of `npm start` in a fresh data directory: one process (its guardian child with it). */
export const embeddedTopology = async (options: HarnessOptions, webhooks: boolean): Promise<HarnessTopology> => {
  const { adminPort, dataDir, port, server, workDir } = await freshServerTarget(
    `pps-fault-${options.seed}-`,
    webhooks ? { WEBHOOK_ALLOW_INSECURE_LOOPBACK: "1" } : {}
  )
  // Every target the schedule may kill: the server process (its guardian child dies with
  // it), and with `killGuardian` the guardian child alone.
  const targets: ReadonlyArray<FaultTarget> = options.killGuardian === true ? [server, guardianTarget(dataDir)] : [server]
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    adminToken: () => (JSON.parse(fs.readFileSync(path.join(dataDir, "secrets.json"), "utf8")) as { admin_token: string }).admin_token,
    targets,
    survivesKills: false,
    start: () => server.start(),
    stop: async () => {
      for (const target of targets) await target.stop()
    },
    workDir
  }
}

export const runHarness = async (options: HarnessOptions): Promise<HarnessReport> =>
  runHarnessOn(options, await embeddedTopology(options, options.webhooks))

export const runHarnessOn = async (options: HarnessOptions, topology: HarnessTopology): Promise<HarnessReport> => {
  if (options.accounts < 2) throw new Error("--accounts must be at least 2: transfers need a recipient")
  if (options.clients < 1) throw new Error("--clients must be at least 1")
  const startedAtMs = Date.now()
  const log = options.log
  const violations: Array<Violation> = []
  const violate = (invariant: string, detail: string) => {
    violations.push({ invariant, detail })
    log(`VIOLATION ${invariant}: ${detail}`)
  }

  // The kill schedule comes first from its own stream: the same seed, the same gaps,
  // whatever the other flags say about clients and accounts.
  const scheduleStream = substream(options.seed, 0)
  const meanGapMs = options.durationMs / (options.kills + 1)
  const killGapsMs = Array.from({ length: options.kills }, () => Math.round(meanGapMs * (0.5 + scheduleStream.next())))
  log(`fault harness: seed ${options.seed}, kills ${options.kills}, clients ${options.clients}, accounts ${options.accounts}, duration ${options.durationMs} ms`)
  log(`kill schedule (ms of load after each (re)start): [${killGapsMs.join(", ")}]`)

  const { baseUrl, targets, workDir } = topology
  let receiver: Receiver | undefined
  if (options.webhooks) receiver = await startReceiver(undefined)
  const gate = new ServerGate()
  const restartMs: Array<number> = []
  const requests: Array<RecordedRequest> = []

  try {
    const setupStartMs = Date.now()
    await topology.start()
    gate.open()
    log(`server up in ${Date.now() - setupStartMs} ms (work dir ${workDir})`)
    const accounts = await setUpAccounts(options, topology.adminUrl, topology.adminToken(), baseUrl, receiver, log)

    // ---- load and kills ----
    let loadRunning = true
    const loadStartMs = Date.now()
    const clientLoops = Array.from({ length: options.clients }, (_, client) =>
      runClient(client, substream(options.seed, client + 1), options, accounts, baseUrl, gate, requests, () => loadRunning))
    let killsDone = 0
    const killer = (async () => {
      for (const gapMs of killGapsMs) {
        await sleep(gapMs)
        const pick = scheduleStream.int(0, targets.length - 1)
        const target = targets[topology.killInOrder === true ? killsDone % targets.length : pick]!
        const inFlight = requests.filter((request) => request.final === undefined).length
        if (!topology.survivesKills) gate.close()
        await target.kill()
        killsDone++
        log(`kill ${killsDone}: SIGKILL ${target.name} at ${Date.now() - loadStartMs} ms of load, ${inFlight} requests in flight`)
        // Behind a balancer the survivors carry on: the killed node stays dead.
        if (topology.survivesKills) continue
        const restartStartMs = Date.now()
        await target.start()
        restartMs.push(Date.now() - restartStartMs)
        gate.open()
        log(`restart ${killsDone}: ${target.name} ready in ${restartMs.at(-1)} ms`)
      }
    })()
    await killer
    const remainingMs = options.durationMs - (Date.now() - loadStartMs)
    if (remainingMs > 0) await sleep(remainingMs)
    loadRunning = false
    await Promise.all(clientLoops)
    log(`load stopped after ${Date.now() - loadStartMs} ms: ${requests.length} requests`)

    // ---- after the load: answers, replays, the frozen check, quiescence ----
    checkAnswers(requests, violate)
    await replayAnswered(options.seed, requests, accounts, baseUrl, violate, log)
    const finalRequests = await sendFromEachAccount(options.seed, accounts, baseUrl, violate)
    const allRequests = [...requests, ...finalRequests]
    const listing = await waitForQuiescence(accounts, baseUrl, log)
    const ledger = await checkTransfers(allRequests, accounts, listing, baseUrl, violate)
    const frozen = finalRequests.filter((request) =>
      request.final?.transferId === undefined || listing.get(request.final.transferId)?.status !== "confirmed"
    ).length
    for (const request of finalRequests) {
      const status = request.final?.transferId === undefined ? undefined : listing.get(request.final.transferId)?.status
      if (status !== "confirmed") {
        violate("no account frozen", `account ${request.sender} could not send at the end: answer ${request.final?.status} ${request.final?.errorCode ?? ""}, status ${status}`)
      }
    }
    const webhookEvents = receiver === undefined ? 0 : await checkWebhooks(receiver, accounts, listing, violate, log)
    const balanceMismatches = await checkBalances(accounts, ledger, baseUrl, violate, log)

    const answered = requests.filter((request) => request.final !== undefined).length
    const answersByStatus: Record<string, number> = {}
    for (const request of requests) {
      const status = request.final === undefined ? "none" : String(request.final.status)
      answersByStatus[status] = (answersByStatus[status] ?? 0) + 1
    }
    const statuses = [...listing.values()].map((entry) => entry.status)
    const answersByNode: Record<string, number> = {}
    for (const request of requests) {
      const node = request.final === undefined ? "none" : request.final.servedBy ?? "direct"
      answersByNode[node] = (answersByNode[node] ?? 0) + 1
    }
    return {
      seed: options.seed,
      killGapsMs,
      kills: killsDone,
      restartMs,
      requests: requests.length,
      answered,
      retried: requests.filter((request) => request.attempts.length > 1).length,
      answersByStatus,
      transfersConfirmed: statuses.filter((status) => status === "confirmed").length,
      transfersFailed: statuses.filter((status) => status === "failed").length,
      duplicates: ledger.duplicateKeys + ledger.strays.length,
      strays: ledger.strays.length,
      stuck: statuses.filter((status) => status === "pending").length,
      balanceMismatches,
      frozen,
      webhookEvents,
      answersByNode,
      violations,
      durationMs: Date.now() - startedAtMs,
      workDir
    }
  } finally {
    gate.close()
    await topology.stop()
    if (receiver !== undefined) await receiver.close()
    const strays = strayGroups()
    if (strays.length > 0) violate("no stray processes", `process groups still alive: ${strays.join(", ")}`)
    if (violations.length === 0 && !options.keep) fs.rmSync(workDir, { recursive: true, force: true })
    else log(`kept ${workDir} (server.log, data/)`)
  }
}

// ---- setup ----

/** Set-up requests meet a server still warming up (its guardian, its chain): 503 until then. */
const setupRetryMs = 120_000

/** One set-up exchange, sent again (same key, same body) until it is answered for good. */
const exchangeUntilFinal = async (
  url: string,
  init: { readonly method: string; readonly headers: Record<string, string>; readonly body?: string }
): Promise<Answer | undefined> => {
  const deadline = Date.now() + setupRetryMs
  for (;;) {
    const answer = await exchange(url, init)
    if (isFinal(answer) || Date.now() > deadline) return answer
    await sleep(500)
  }
}

/** An SDK call, again while the server answers 503 or not at all. */
const sdkUntilDone = async <A>(call: () => Promise<A>): Promise<A> => {
  const deadline = Date.now() + setupRetryMs
  for (;;) {
    try {
      return await call()
    } catch (error) {
      const retryable = (error instanceof Client.ApiError && error.status === 503) || error instanceof Client.TransportError
      if (!retryable || Date.now() > deadline) throw error
      await sleep(500)
    }
  }
}

const setUpAccounts = async (
  options: HarnessOptions,
  adminUrl: string,
  adminToken: string,
  baseUrl: string,
  receiver: Receiver | undefined,
  log: (line: string) => void
): Promise<ReadonlyArray<Account>> => {
  const accounts: Array<Account> = []
  for (let index = 0; index < options.accounts; index++) {
    const handle = `fault-${index}`
    const answer = await exchangeUntilFinal(`${adminUrl}/admin/accounts`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ handle, kyc_status: "verified" })
    })
    const accountId = field(answer?.json, "account_id")
    const apiKey = field(answer?.json, "api_key")
    if (answer?.status !== 201 || accountId === undefined || apiKey === undefined) {
      throw new Error(`creating account ${handle}: ${answer?.status} ${JSON.stringify(answer?.json)}`)
    }
    const keyPair = EncryptionKey.generate()
    await sdkUntilDone(() => Confidential.registerKey(Client.make({ baseUrl, apiKey }), keyPair))
    accounts.push({ index, accountId, handle: `@${handle}`, apiKey, keyPair })
  }
  for (const account of accounts) {
    const headers = { authorization: `Bearer ${account.apiKey}`, "content-type": "application/json" }
    const funded = await exchangeUntilFinal(`${baseUrl}/v1/test/faucet`, {
      method: "POST",
      headers: { ...headers, "idempotency-key": `fault-${options.seed}-fund-${account.index}` },
      body: JSON.stringify({ amount: Amount.format(usdg, fundingBaseUnits) })
    })
    if (funded === undefined || funded.status >= 300) {
      throw new Error(`funding ${account.handle}: ${funded?.status} ${JSON.stringify(funded?.json)}`)
    }
    if (receiver !== undefined) {
      const subscribed = await exchangeUntilFinal(`${baseUrl}/v1/webhooks`, {
        method: "POST",
        headers: { ...headers, "idempotency-key": `fault-${options.seed}-webhook-${account.index}` },
        body: JSON.stringify({ url: `${receiver.url}/account/${account.index}`, events: ["transfer.confirmed", "transfer.failed"] })
      })
      if (subscribed?.status !== 201) {
        throw new Error(`subscribing ${account.handle}: ${subscribed?.status} ${JSON.stringify(subscribed?.json)}`)
      }
    }
  }
  // The grants are credits the guardian reads from the chain (D39): wait until each
  // account's decrypted balance shows its funding before any load starts.
  for (const account of accounts) {
    const deadline = Date.now() + balanceSettleTimeoutMs
    for (;;) {
      const balance = await readUsdg(account, baseUrl)
      if (balance === fundingBaseUnits) break
      if (Date.now() > deadline) throw new Error(`${account.handle}'s funding never showed in its balance (${balance})`)
      await sleep(250)
    }
  }
  log(`${accounts.length} accounts created, keys registered, funded with ${Amount.format(usdg, fundingBaseUnits)} USDG each`)
  return accounts
}

/** Why the last balance read failed, per account (shown with a mismatch). */
const lastBalanceError = new Map<string, string>()

/** The account's USDG balance as its holder reads it: statement opened, proven, answered. */
const readUsdg = async (account: Account, baseUrl: string): Promise<bigint | undefined> => {
  try {
    const { balances } = await Confidential.readBalances(Client.make({ baseUrl, apiKey: account.apiKey }), account.keyPair)
    const entry = balances.find((balance) => balance.asset === usdg)
    return entry === undefined ? undefined : toBaseUnits(entry.amount)
  } catch (error) {
    lastBalanceError.set(account.accountId, error instanceof Error ? `${error.name}: ${error.message}` : String(error))
    return undefined
  }
}

const toBaseUnits = (decimal: string): bigint => {
  const [whole = "0", fraction = ""] = decimal.split(".")
  return BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, "0"))
}

// ---- load ----

const newRequest = (key: string, client: number, sender: number, recipient: number, amount: bigint, accounts: ReadonlyArray<Account>): RecordedRequest => ({
  key,
  client,
  sender,
  recipient,
  amount,
  body: JSON.stringify({ to: accounts[recipient]!.handle, amount: Amount.format(usdg, amount) }),
  attempts: [],
  replays: [],
  final: undefined
})

/** Sends one recorded request until it is answered (same key, same body) or the retry window ends. */
const sendUntilAnswered = async (request: RecordedRequest, accounts: ReadonlyArray<Account>, baseUrl: string, gate: ServerGate) => {
  const sender = accounts[request.sender]!
  const firstAtMs = Date.now()
  while (Date.now() - firstAtMs < retryWindowMs) {
    await gate.whenUp()
    const answer = await exchange(`${baseUrl}/v1/transfers`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${sender.apiKey}`,
        "content-type": "application/json",
        "idempotency-key": request.key
      },
      body: request.body
    })
    const attempt: Attempt = {
      atMs: Date.now(),
      status: answer?.status,
      transferId: field(answer?.json, "transfer_id"),
      transferStatus: field(answer?.json, "status"),
      errorCode: errorCodeOf(answer?.json),
      replayed: answer?.replayed ?? false,
      servedBy: answer?.servedBy,
      retryAfter: answer?.retryAfterMs !== undefined
    }
    request.attempts.push(attempt)
    if (isFinal(answer)) {
      request.final = attempt
      return
    }
    // No answer: the server is restarting (the gate holds us) or just died; a short pause, then again.
    await sleep(answer === undefined ? 100 : Math.min(answer.retryAfterMs ?? inProgressBackoffMs, 5_000))
  }
}

const runClient = async (
  client: number,
  stream: Prng,
  options: HarnessOptions,
  accounts: ReadonlyArray<Account>,
  baseUrl: string,
  gate: ServerGate,
  requests: Array<RecordedRequest>,
  running: () => boolean
) => {
  for (let sequence = 0; running(); sequence++) {
    const sender = stream.int(0, accounts.length - 1)
    const recipient = (sender + stream.int(1, accounts.length - 1)) % accounts.length
    const amount = BigInt(stream.int(1, amountCentsMax)) * 10_000n
    const request = newRequest(`fault-${options.seed}-c${client}-r${sequence}`, client, sender, recipient, amount, accounts)
    requests.push(request)
    // A request that is not yet answered is retried here even after the load stops:
    // no request is ever abandoned.
    await sendUntilAnswered(request, accounts, baseUrl, gate)
  }
}

// ---- checks ----

const checkAnswers = (requests: ReadonlyArray<RecordedRequest>, violate: (invariant: string, detail: string) => void) => {
  for (const request of requests) {
    if (request.final === undefined) {
      violate("every request answered", `${request.key}: no final answer after ${request.attempts.length} attempts`)
      continue
    }
    if (request.final.status !== undefined && request.final.status >= 500) {
      violate("no server faults", `${request.key}: answered ${request.final.status} ${request.final.errorCode ?? ""}`)
    }
    // On the way, too (a node dying under the balancer): the only 5xx is 503 with Retry-After.
    for (const attempt of request.attempts) {
      if (attempt.status !== undefined && attempt.status >= 500 && (attempt.status !== 503 || !attempt.retryAfter)) {
        violate("no 5xx but 503 with Retry-After", `${request.key}: an attempt was answered ${attempt.status} ${attempt.errorCode ?? ""}${attempt.retryAfter ? "" : " without Retry-After"}`)
      }
    }
    const transferIds = new Set(request.attempts.flatMap((attempt) => (attempt.transferId === undefined ? [] : [attempt.transferId])))
    if (transferIds.size > 1) {
      violate("one key, at most one transfer", `${request.key}: answered with ${[...transferIds].join(", ")}`)
    }
  }
}

/**
 * Sends answered requests again with the same key and body: each must replay its
 * answer (same status, same transfer), never start a second operation.
 */
const replayAnswered = async (
  seed: number,
  requests: ReadonlyArray<RecordedRequest>,
  accounts: ReadonlyArray<Account>,
  baseUrl: string,
  violate: (invariant: string, detail: string) => void,
  log: (line: string) => void
) => {
  const answered = requests.filter((request) => request.final !== undefined)
  const retried = answered.filter((request) => request.attempts.length > 1)
  const others = answered.filter((request) => request.attempts.length === 1)
  const sampleStream = substream(seed, 1_000_000)
  const sample = [...retried]
  while (sample.length < replaySampleMax && others.length > 0) {
    sample.push(others.splice(sampleStream.int(0, others.length - 1), 1)[0]!)
  }
  const gate = new ServerGate()
  gate.open()
  let mismatches = 0
  for (const request of sample) {
    const first = request.final!
    const replay: RecordedRequest = { ...request, attempts: [], replays: [], final: undefined }
    await sendUntilAnswered(replay, accounts, baseUrl, gate)
    const again = replay.final
    request.replays.push(...replay.attempts)
    if (again === undefined || again.status !== first.status || again.transferId !== first.transferId) {
      mismatches++
      violate("a key replays its answer", `${request.key}: first ${first.status} ${first.transferId ?? first.errorCode ?? ""}, again ${again?.status} ${again?.transferId ?? again?.errorCode ?? ""}`)
    }
  }
  log(`replayed ${sample.length} answered requests (${retried.length} retried ones among them): ${mismatches} mismatches`)
}

/** One transfer from each account to the next, after the load: an account left blocked by a fault shows here. */
const sendFromEachAccount = async (
  seed: number,
  accounts: ReadonlyArray<Account>,
  baseUrl: string,
  violate: (invariant: string, detail: string) => void
): Promise<ReadonlyArray<RecordedRequest>> => {
  const gate = new ServerGate()
  gate.open()
  const finals = accounts.map((account) =>
    newRequest(`fault-${seed}-final-${account.index}`, -1, account.index, (account.index + 1) % accounts.length, 10_000n, accounts))
  await Promise.all(finals.map((request) => sendUntilAnswered(request, accounts, baseUrl, gate)))
  for (const request of finals) {
    if (request.final?.status !== 201) {
      violate("no account frozen", `${request.key}: answered ${request.final?.status} ${request.final?.errorCode ?? ""}`)
    }
  }
  return finals
}

interface ListedTransfer {
  readonly transferId: string
  /** `pending` while either side lists it pending; else the status the sides list. */
  status: string
  /** Account indexes that list it (sender and recipient). */
  readonly seenBy: Array<number>
  readonly statusBy: Map<number, string>
}

/** Every transfer of every account, through GET /v1/transfers pages. */
const listAll = async (accounts: ReadonlyArray<Account>, baseUrl: string): Promise<Map<string, ListedTransfer>> => {
  const listed = new Map<string, ListedTransfer>()
  for (const account of accounts) {
    for (let offset = 0;; offset += 100) {
      const page = await exchange(`${baseUrl}/v1/transfers?limit=100&offset=${offset}`, {
        method: "GET",
        headers: { authorization: `Bearer ${account.apiKey}` }
      })
      if (page?.status !== 200 || !isRecord(page.json) || !Array.isArray(page.json["data"])) {
        throw new Error(`listing transfers of ${account.handle}: ${page?.status} ${JSON.stringify(page?.json)}`)
      }
      for (const entry of page.json["data"]) {
        const transferId = field(entry, "transfer_id")
        const status = field(entry, "status")
        if (transferId === undefined || status === undefined) throw new Error("a listed transfer without id or status")
        const known = listed.get(transferId) ?? { transferId, status, seenBy: [], statusBy: new Map<number, string>() }
        known.seenBy.push(account.index)
        known.statusBy.set(account.index, status)
        if (status === "pending") known.status = status
        listed.set(transferId, known)
      }
      if (page.json["has_more"] !== true) break
    }
  }
  return listed
}

const waitForQuiescence = async (accounts: ReadonlyArray<Account>, baseUrl: string, log: (line: string) => void) => {
  const startMs = Date.now()
  for (;;) {
    const listed = await listAll(accounts, baseUrl)
    const pending = [...listed.values()].filter((entry) => [...entry.statusBy.values()].includes("pending")).length
    if (pending === 0 || Date.now() - startMs > quiescenceTimeoutMs) {
      log(`quiescence after ${Date.now() - startMs} ms: ${listed.size} transfers, ${pending} still pending`)
      return listed
    }
    await sleep(1_000)
  }
}

interface Ledger {
  /** Per account: base units it should hold (funding + received − sent over confirmed transfers). */
  readonly expected: ReadonlyArray<bigint>
  readonly duplicateKeys: number
  readonly strays: ReadonlyArray<string>
}

const checkTransfers = async (
  requests: ReadonlyArray<RecordedRequest>,
  accounts: ReadonlyArray<Account>,
  listing: Map<string, ListedTransfer>,
  baseUrl: string,
  violate: (invariant: string, detail: string) => void
): Promise<Ledger> => {
  const requestByTransfer = new Map<string, RecordedRequest>()
  let duplicateKeys = 0
  for (const request of requests) {
    const ids = new Set([...request.attempts, ...request.replays].flatMap((attempt) => (attempt.transferId === undefined ? [] : [attempt.transferId])))
    if (ids.size > 1) duplicateKeys++
    for (const id of ids) {
      const other = requestByTransfer.get(id)
      if (other !== undefined && other.key !== request.key) {
        violate("one transfer, one key", `${id} is answered to ${other.key} and ${request.key}`)
      }
      requestByTransfer.set(id, request)
    }
  }
  const expected = accounts.map(() => fundingBaseUnits)
  const strays: Array<string> = []
  for (const entry of listing.values()) {
    const statuses = new Set(entry.statusBy.values())
    if (statuses.size > 1) violate("both sides agree", `${entry.transferId}: ${[...entry.statusBy].map(([a, s]) => `account ${a} ${s}`).join(", ")}`)
    if (entry.status === "pending") violate("nothing stuck pending", `${entry.transferId} is still pending after quiescence`)
    const request = requestByTransfer.get(entry.transferId)
    let sender: number
    let recipient: number
    let amount: bigint | undefined
    if (request === undefined) {
      strays.push(entry.transferId)
      // A transfer no request names: learn what it moved from its sender's sealed copy,
      // so the balance check still holds the chain to account.
      const decrypted = await decryptAny(entry, accounts, baseUrl)
      violate("no transfer without a request", `${entry.transferId} (${entry.status}) is named by no answer${decrypted === undefined ? "" : `; it moves ${Amount.format(usdg, decrypted.amount)} USDG from account ${decrypted.sender}`}`)
      if (decrypted === undefined) continue
      sender = decrypted.sender
      recipient = entry.seenBy.find((index) => index !== decrypted.sender) ?? decrypted.sender
      amount = decrypted.amount
    } else {
      sender = request.sender
      recipient = request.recipient
      amount = request.amount
      const answered = request.attempts.find((attempt) => attempt.transferId === entry.transferId)?.transferStatus
      // D14: pending -> confirmed | failed, nothing else; an answered outcome never changes.
      if (answered !== undefined && answered !== "pending" && answered !== entry.status) {
        violate("an outcome never changes", `${entry.transferId} (${request.key}) was answered ${answered}, now listed ${entry.status}`)
      }
    }
    if (entry.status === "confirmed") {
      expected[sender] = expected[sender]! - amount
      expected[recipient] = expected[recipient]! + amount
    }
  }
  // A transfer an answer names must exist.
  for (const [transferId, request] of requestByTransfer) {
    if (!listing.has(transferId)) violate("an answered transfer exists", `${transferId} (${request.key}) is listed by no account`)
  }
  return { expected, duplicateKeys, strays }
}

const decryptAny = async (entry: ListedTransfer, accounts: ReadonlyArray<Account>, baseUrl: string) => {
  for (const index of entry.seenBy) {
    const account = accounts[index]!
    try {
      const opened = await Confidential.decryptTransfer(Client.make({ baseUrl, apiKey: account.apiKey }), account.keyPair, entry.transferId)
      const sender = opened.role === "sender" ? index : entry.seenBy.find((other) => other !== index) ?? index
      return { sender, amount: opened.amount }
    } catch {
      // try the other party
    }
  }
  return undefined
}

interface ReceivedEvent {
  readonly id: string
  readonly event: string
  readonly transferId: string
  readonly account: number
}

const checkWebhooks = async (
  receiver: Receiver,
  accounts: ReadonlyArray<Account>,
  listing: Map<string, ListedTransfer>,
  violate: (invariant: string, detail: string) => void,
  log: (line: string) => void
): Promise<number> => {
  const terminal = [...listing.values()].filter((entry) => entry.status !== "pending")
  const expectedSides = terminal.reduce((sum, entry) => sum + new Set(entry.seenBy).size, 0)
  const collect = () => {
    // At least once: deliveries repeat (a kill mid-attempt), so events are deduplicated by id.
    const byId = new Map<string, ReceivedEvent>()
    for (const request of receiver.requests) {
      let payload: unknown
      try {
        payload = JSON.parse(request.body.toString("utf8"))
      } catch {
        continue
      }
      const id = field(payload, "id")
      const event = field(payload, "event")
      const transferId = field(payload, "transfer_id")
      const account = Number(request.path.split("/").at(-1))
      if (id !== undefined && event !== undefined && transferId !== undefined) byId.set(id, { id, event, transferId, account })
    }
    const bySide = new Map<string, Array<ReceivedEvent>>()
    for (const received of byId.values()) {
      const side = `${received.transferId}/${received.account}`
      bySide.set(side, [...(bySide.get(side) ?? []), received])
    }
    return { byId, bySide }
  }
  const startMs = Date.now()
  let seen = collect()
  while (seen.bySide.size < expectedSides && Date.now() - startMs < webhookSettleTimeoutMs) {
    await sleep(500)
    seen = collect()
  }
  log(`webhooks: ${receiver.requests.length} deliveries, ${seen.byId.size} distinct events, ${seen.bySide.size}/${expectedSides} transfer sides after ${Date.now() - startMs} ms`)
  for (const entry of terminal) {
    for (const account of new Set(entry.seenBy)) {
      const events = seen.bySide.get(`${entry.transferId}/${account}`) ?? []
      if (events.length === 0) violate("one terminal event per transfer and side", `${entry.transferId}: no event for account ${account} (${accounts[account]!.handle})`)
      if (events.length > 1) violate("one terminal event per transfer and side", `${entry.transferId}: ${events.length} distinct events for account ${account}: ${events.map((e) => `${e.id} ${e.event}`).join(", ")}`)
      const wrong = events.find((event) => event.event !== `transfer.${entry.status}`)
      if (wrong !== undefined) violate("events tell the outcome", `${entry.transferId} is ${entry.status}, event ${wrong.id} says ${wrong.event}`)
    }
  }
  for (const received of seen.byId.values()) {
    if (!listing.has(received.transferId)) violate("events name real transfers", `${received.id} names ${received.transferId}, which no account lists`)
  }
  return seen.byId.size
}

const checkBalances = async (
  accounts: ReadonlyArray<Account>,
  ledger: Ledger,
  baseUrl: string,
  violate: (invariant: string, detail: string) => void,
  log: (line: string) => void
): Promise<number> => {
  const startMs = Date.now()
  let balances: Array<bigint | undefined> = []
  for (;;) {
    balances = []
    for (const account of accounts) balances.push(await readUsdg(account, baseUrl))
    const settled = balances.every((balance, index) => balance === ledger.expected[index])
    if (settled || Date.now() - startMs > balanceSettleTimeoutMs) break
    await sleep(1_000)
  }
  let mismatches = 0
  balances.forEach((balance, index) => {
    if (balance !== ledger.expected[index]) {
      mismatches++
      const shown = (value: bigint | undefined) => (value === undefined ? "unreadable" : value < 0n ? `-${Amount.format(usdg, -value)}` : Amount.format(usdg, value))
      const why = balance === undefined ? ` (${lastBalanceError.get(accounts[index]!.accountId) ?? "no error recorded"})` : ""
      violate("balance = funding + received − sent", `account ${index}: decrypted ${shown(balance)}${why}, expected ${shown(ledger.expected[index])}`)
    }
  })
  const total = balances.reduce<bigint>((sum, balance) => sum + (balance ?? 0n), 0n)
  const funded = fundingBaseUnits * BigInt(accounts.length)
  if (total !== funded) violate("the sum is conserved", `balances add up to ${Amount.format(usdg, total)}, funding was ${Amount.format(usdg, funded)}`)
  log(`balances: ${accounts.length - mismatches}/${accounts.length} as expected, sum ${Amount.format(usdg, total)} of ${Amount.format(usdg, funded)}`)
  return mismatches
}

/** The summary lines a run prints. */
export const formatReport = (report: HarnessReport): string =>
  [
    `seed ${report.seed}`,
    `kills ${report.kills} (schedule [${report.killGapsMs.join(", ")}] ms; restarts took [${report.restartMs.join(", ")}] ms)`,
    `requests ${report.requests}, answered ${report.answered}, retried ${report.retried}, answers ${JSON.stringify(report.answersByStatus)}`,
    `transfers confirmed ${report.transfersConfirmed}, failed ${report.transfersFailed}`,
    `duplicates found ${report.duplicates} (strays ${report.strays}), stuck ${report.stuck}, balance mismatches ${report.balanceMismatches}, frozen accounts ${report.frozen}`,
    `webhook events ${report.webhookEvents}`,
    `answers by node ${JSON.stringify(report.answersByNode)}`,
    `violations ${report.violations.length}`,
    `duration ${(report.durationMs / 1000).toFixed(1)} s`
  ].join("\n")
