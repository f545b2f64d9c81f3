/**
 * The settlement watcher's idle round (engine/Watch.ts, `round` and `readHead`, D85): with nothing
 * in flight it pauses half a second at least between rounds (a send wakes it; a block time while
 * behind the head) and asks the head and the blocks
 * the pause can have made in the same turn, which the settlement client's transport sends as one
 * JSON-RPC batch: one HTTP request a round instead of a head read and a request for each new
 * block. The blocks so read go through the scan's checks as blocks read by the scan do (each
 * parent against the hash scanned at its height: a reorganisation is still found). With
 * transactions in flight the head is read alone, as before.
 *
 * Against a small JSON-RPC node in this process (blocks by number, each with its parent's hash),
 * over the service's own transport (`RpcTransport.keepAliveHttp`, batching as `Chains.connect`).
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { RpcTransport } from "@pps/contracts"
import { Effect, Fiber } from "effect"
import { createPublicClient, type Hex } from "viem"
import type { EngineContext, Tracked } from "../src/settlement/engine/EngineContext.ts"
import { idlePauseMs, idleWatcherPauseMs, round } from "../src/settlement/engine/Watch.ts"

type Call = { readonly id: number; readonly method: string; readonly params?: ReadonlyArray<unknown> }

const hashOf = (n: number, fork: number): Hex => `0x${n.toString(16).padStart(32, "0")}${fork.toString(16).padStart(32, "0")}`

/** A node whose chain is `head` blocks long; `fork` renames every block from a height on. */
const fakeNode = Effect.acquireRelease(
  Effect.promise(() => {
    const node = {
      head: 0,
      forkFrom: Number.POSITIVE_INFINITY,
      requests: 0,
      connections: 0,
      methods: [] as Array<Array<string>>,
      /** While set, answers wait for it, and `arrived` is called as each request comes in (the test acts meanwhile). */
      hold: undefined as { readonly release: Promise<void>; readonly arrived: () => void } | undefined
    }
    const forkOf = (n: number) => (n >= node.forkFrom ? 1 : 0)
    const blockJson = (n: number) => ({
      number: `0x${n.toString(16)}`,
      hash: hashOf(n, forkOf(n)),
      parentHash: n === 0 ? hashOf(0, 9) : hashOf(n - 1, forkOf(n - 1)),
      timestamp: `0x${(1_000 + n).toString(16)}`,
      baseFeePerGas: `0x${(100 + n).toString(16)}`,
      transactions: []
    })
    const answer = (call: Call) => {
      if (call.method === "eth_blockNumber") return `0x${node.head.toString(16)}`
      // Blocks without transactions: no receipts.
      if (call.method === "eth_getBlockReceipts") return []
      if (call.method === "eth_getBlockByNumber") {
        const n = Number(BigInt(call.params?.[0] as string))
        return n <= node.head ? blockJson(n) : null
      }
      throw new Error(`unexpected ${call.method}`)
    }
    const server = Http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        node.requests += 1
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Call | Array<Call>
        const calls = Array.isArray(body) ? body : [body]
        node.methods.push(calls.map((call) => call.method))
        const hold = node.hold
        hold?.arrived()
        void (hold?.release ?? Promise.resolve()).then(() => {
          const answers = calls.map((call) => ({ jsonrpc: "2.0", id: call.id, result: answer(call) }))
          response.setHeader("content-type", "application/json")
          response.end(JSON.stringify(Array.isArray(body) ? answers : answers[0]))
        })
      })
    })
    server.on("connection", () => {
      node.connections += 1
    })
    return new Promise<{ readonly node: typeof node; readonly server: Http.Server; readonly url: string }>((resolve) =>
      server.listen(0, "127.0.0.1", () => resolve({ node, server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }))
    )
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

/** The parts of an engine a watcher round uses, its chain scanned up to `lastScanned`. */
const engineOn = (url: string, lastScanned: bigint): EngineContext => {
  const client = createPublicClient({ transport: RpcTransport.keepAliveHttp(url, { retryCount: 0, batchMax: 200 }), cacheTime: 0 })
  const scannedHashes = new Map<bigint, Hex>()
  for (let n = 0n; n <= lastScanned; n++) scannedHashes.set(n, hashOf(Number(n), 0))
  const context = {
    chain: { mode: "test" },
    client,
    confirmations: 1,
    blockTimeMs: 100,
    relayers: [],
    inFlight: new Map(),
    bySubmission: new Map(),
    scannedHashes,
    hashesKept: 256n,
    heldAfterMs: 60_000,
    view: {
      baseFeeWei: 0n,
      latestTimestampSeconds: 0n,
      lastScanned,
      head: lastScanned,
      headSeenAtMs: 0,
      headSeenWithinMs: 0,
      headStep: 1n,
      headReadAtMs: 0,
      lagWarnedAtMs: 0,
      nonceGapsTriedAtMs: Number.MAX_SAFE_INTEGER
    }
  }
  return context as unknown as EngineContext
}

/** A node `head` blocks long (renamed from `forkFrom` on), a watcher scanned up to 4, and its first round. */
const firstRound = (head: number, options: { readonly forkFrom?: number; readonly inFlight?: boolean } = {}) =>
  Effect.gen(function*() {
    const { node, url } = yield* fakeNode
    node.head = head
    node.forkFrom = options.forkFrom ?? node.forkFrom
    const context = engineOn(url, 4n)
    if (options.inFlight === true) {
      const tracked = { sentAtMs: Date.now(), request: { submissionId: "s", deadlineSeconds: null } } as unknown as Tracked
      context.inFlight.set("0x01", [tracked])
    }
    yield* round(context)
    return { node, context }
  })

describe("the settlement watcher's idle round", () => {
  it("pauses a block time between idle rounds, half a second at least (D85)", () => {
    assert.strictEqual(idlePauseMs(100), 500)
    assert.strictEqual(idlePauseMs(500), 500)
    assert.strictEqual(idlePauseMs(2_000), 2_000)
  })

  it.live("a new block: the head and the block in one HTTP request, the block scanned", () =>
    Effect.scoped(Effect.gen(function*() {
      const { context, node } = yield* firstRound(5)
      assert.strictEqual(node.requests, 1, `one request (${JSON.stringify(node.methods)})`)
      // The head and the 6 blocks a 500-ms pause can make at 100-ms blocks (one more than fit).
      assert.deepStrictEqual(node.methods[0], ["eth_blockNumber", ...Array<string>(6).fill("eth_getBlockByNumber")])
      assert.strictEqual(context.view.lastScanned, 5n)
      assert.strictEqual(context.scannedHashes.get(5n), hashOf(5, 0))
      assert.strictEqual(context.view.baseFeeWei, 105n)
      assert.strictEqual(context.view.latestTimestampSeconds, 1_005n)
    })))

  it.live("no new block: one request, nothing scanned", () =>
    Effect.scoped(Effect.gen(function*() {
      const { context, node } = yield* firstRound(4)
      assert.strictEqual(node.requests, 1)
      assert.strictEqual(context.view.lastScanned, 4n)
      assert.isFalse(context.scannedHashes.has(5n))
    })))

  it.live("blocks made during the idle pause: read with the head, all in one request", () =>
    Effect.scoped(Effect.gen(function*() {
      const { context, node } = yield* firstRound(9)
      assert.strictEqual(node.requests, 1, `one request (${JSON.stringify(node.methods)})`)
      assert.strictEqual(context.view.lastScanned, 9n)
      for (const n of [5, 6, 7, 8, 9]) assert.strictEqual(context.scannedHashes.get(BigInt(n)), hashOf(n, 0))
    })))

  it.live("more blocks than an idle pause makes: those read with the head are used, the scan reads the rest once each", () =>
    Effect.scoped(Effect.gen(function*() {
      const { context, node } = yield* firstRound(13)
      assert.strictEqual(context.view.lastScanned, 13n)
      for (let n = 5; n <= 13; n++) assert.strictEqual(context.scannedHashes.get(BigInt(n)), hashOf(n, 0))
      const blockReads = node.methods.flat().filter((method) => method === "eth_getBlockByNumber").length
      assert.strictEqual(blockReads, 9, `each block read once (${JSON.stringify(node.methods)})`)
      assert.strictEqual(node.requests, 2, "the head with 6 blocks, then the 3 others together")
    })))

  it.live("the block read with the head does not follow the one scanned at its parent's height: the scan rewinds to the fork", () =>
    Effect.scoped(Effect.gen(function*() {
      // Blocks 3 and up replaced since the watcher scanned 3 and 4.
      const { context } = yield* firstRound(5, { forkFrom: 3 })
      assert.strictEqual(context.view.lastScanned, 2n, "back to the highest block both agree on")
      assert.isFalse(context.scannedHashes.has(3n))
      assert.isFalse(context.scannedHashes.has(5n))
      yield* round(context)
      assert.strictEqual(context.view.lastScanned, 5n)
      assert.strictEqual(context.scannedHashes.get(3n), hashOf(3, 1), "the new chain scanned")
    })))

  it.live("idle rounds reuse one kept-alive connection to the node", () =>
    Effect.scoped(Effect.gen(function*() {
      const { context, node } = yield* firstRound(4)
      for (let block = 5; block <= 8; block++) {
        node.head = block
        yield* round(context)
      }
      assert.strictEqual(context.view.lastScanned, 8n)
      assert.strictEqual(node.requests, 5)
      assert.strictEqual(node.connections, 1, "every request on the first connection")
    })))

  it("pauses half a second only once caught up: behind (a restart, a paused VM), a block time", () => {
    const caughtUp = engineOn("http://127.0.0.1:1", 4n)
    assert.strictEqual(idleWatcherPauseMs(caughtUp), 500)
    const behind = engineOn("http://127.0.0.1:1", 4n)
    behind.view.head = 4n + 6_000n
    assert.strictEqual(idleWatcherPauseMs(behind), 100, "50 blocks a round every block time, not every half second")
  })

  it.live("a send while the idle round's request is out: the blocks read with the head are read again, with their receipts", () =>
    Effect.scoped(Effect.gen(function*() {
      const { node, url } = yield* fakeNode
      node.head = 6
      const context = engineOn(url, 4n)
      let release = () => {}
      let arrived = () => {}
      const requestArrived = new Promise<void>((resolve) => {
        arrived = resolve
      })
      node.hold = { release: new Promise<void>((resolve) => (release = resolve)), arrived }
      const idleRound = yield* Effect.forkChild(round(context))
      yield* Effect.promise(() => requestArrived)
      // Tracked before its broadcast, as `signAndRecord` does: the prefetched blocks were read
      // without receipts, so the scan must not take them.
      node.hold = undefined
      context.inFlight.set("0x01", [{ sentAtMs: Date.now(), request: { submissionId: "s", deadlineSeconds: null } } as unknown as Tracked])
      release()
      yield* Fiber.join(idleRound)
      assert.deepStrictEqual(node.methods[0], ["eth_blockNumber", ...Array<string>(6).fill("eth_getBlockByNumber")])
      const later = node.methods.slice(1).flat()
      assert.strictEqual(later.filter((method) => method === "eth_getBlockByNumber").length, 2, `blocks 5 and 6 read again (${JSON.stringify(node.methods)})`)
      assert.strictEqual(later.filter((method) => method === "eth_getBlockReceipts").length, 2, "with their receipts")
      assert.strictEqual(context.view.lastScanned, 6n)
    })))

  it.live("with a transaction in flight the head is read alone", () =>
    Effect.scoped(Effect.gen(function*() {
      const { node } = yield* firstRound(4, { inFlight: true })
      assert.deepStrictEqual(node.methods, [["eth_blockNumber"]])
    })))
})
