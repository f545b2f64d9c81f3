/**
 * The kept-alive JSON-RPC transport: against a real anvil it answers as viem's `http` does,
 * batches one turn's calls into one request, keeps one connection, and passes the node's
 * refusals on as viem's error classes with the node's words; against loopback HTTP servers
 * that misbehave on purpose it maps statuses, timeouts, oversized bodies, missing answers and
 * whole-batch refusals, and sends URL credentials as a Basic header without naming them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  BaseError,
  createPublicClient,
  createWalletClient,
  HttpRequestError,
  http,
  parseEther,
  RpcRequestError,
  TimeoutError
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import * as Anvil from "../src/anvil.ts"
import { keepAliveHttp } from "../src/rpcTransport.ts"

/** Anvil's first default account (funded by the dev chain). */
const funded = privateKeyToAccount("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")

/** What a loopback "node" saw: requests' bodies and headers, and connections opened. */
interface Seen {
  readonly bodies: Array<unknown>
  readonly authorizations: Array<string | undefined>
  connections: number
}

const startNode = async (
  answer: (body: unknown, response: ServerResponse, request: IncomingMessage) => void
): Promise<{ readonly url: string; readonly seen: Seen; readonly server: Server }> => {
  const seen: Seen = { bodies: [], authorizations: [], connections: 0 }
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
      seen.bodies.push(body)
      seen.authorizations.push(request.headers.authorization)
      answer(body, response, request)
    })
  })
  server.on("connection", () => {
    seen.connections++
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server }
}

const stopNode = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })

/** The transport's request function (viem's error mapping included) for methods no schema names. */
const looseRequest = (transport: ReturnType<typeof keepAliveHttp>) =>
  transport({}).request as unknown as (args: { readonly method: string; readonly params?: ReadonlyArray<unknown> }) => Promise<unknown>

const json = (response: ServerResponse, status: number, value: unknown) => {
  response.writeHead(status, { "content-type": "application/json" })
  response.end(JSON.stringify(value))
}

describe("keepAliveHttp against anvil", () => {
  let anvil: Anvil.Instance
  beforeAll(async () => {
    anvil = await Anvil.start({ blockTimeSeconds: 0.1 })
  })
  afterAll(async () => {
    await anvil.stop()
  })

  it("answers as viem's http transport does, for lone and batched calls", async () => {
    const reference = createPublicClient({ transport: http(anvil.rpcUrl), cacheTime: 0 })
    for (const batchMax of [1, 200]) {
      const client = createPublicClient({ transport: keepAliveHttp(anvil.rpcUrl, { batchMax }), cacheTime: 0 })
      expect(await client.getChainId()).toBe(await reference.getChainId())
      const addresses = [funded.address, "0x00000000000000000000000000000000000000aa"] as const
      const [balances, block] = await Promise.all([
        Promise.all(addresses.map((address) => client.getBalance({ address }))),
        client.getBlock({ blockNumber: 0n })
      ])
      expect(balances).toEqual(await Promise.all(addresses.map((address) => reference.getBalance({ address }))))
      expect(block.hash).toBe((await reference.getBlock({ blockNumber: 0n })).hash)
    }
  })

  it("passes the node's refusal on as an RpcRequestError carrying its words (nonce too low)", async () => {
    const transport = keepAliveHttp(anvil.rpcUrl, { batchMax: 200 })
    const client = createPublicClient({ transport, cacheTime: 0 })
    const wallet = createWalletClient({ account: funded, transport })
    const nonce = await client.getTransactionCount({ address: funded.address, blockTag: "pending" })
    const to = "0x00000000000000000000000000000000000000bb"
    const chain = { id: anvil.chainId, name: "anvil", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [anvil.rpcUrl] } } }
    const signed = (n: number) =>
      wallet.signTransaction({ chain, to, value: parseEther("0.001"), nonce: n, gas: 21_000n, maxFeePerGas: 10n ** 10n, maxPriorityFeePerGas: 1n })
    const hash = await client.sendRawTransaction({ serializedTransaction: await signed(nonce) })
    await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
    // The same nonce again, with other bytes: the node refuses it.
    const refused = await client.sendRawTransaction({ serializedTransaction: await signed(nonce) }).then(
      () => undefined,
      (error: unknown) => error
    )
    expect(refused).toBeInstanceOf(BaseError)
    expect((refused as BaseError).walk((error) => error instanceof RpcRequestError)).toBeInstanceOf(RpcRequestError)
    expect(String(refused)).toMatch(/nonce too low/i)
  })

  it("in a batch, one refused call fails alone", async () => {
    const request = looseRequest(keepAliveHttp(anvil.rpcUrl, { batchMax: 200 }))
    const [chainId, bad] = await Promise.allSettled([
      request({ method: "eth_chainId" }),
      request({ method: "eth_getBalance", params: ["0xnot-an-address", "latest"] })
    ])
    expect(chainId).toEqual({ status: "fulfilled", value: `0x${anvil.chainId.toString(16)}` })
    expect(bad.status).toBe("rejected")
    const refusal = ((bad as PromiseRejectedResult).reason as BaseError).walk((error) => error instanceof RpcRequestError)
    expect(refusal).toBeInstanceOf(RpcRequestError)
  })
})

describe("keepAliveHttp against loopback nodes", () => {
  it("sends one turn's calls in one request, keeps one connection across turns, and matches answers by id", async () => {
    type Call = { readonly id: number; readonly params: ReadonlyArray<string> }
    const echoed = (call: Call) => ({ jsonrpc: "2.0", id: call.id, result: call.params[0] })
    const node = await startNode((body, response) =>
      // A batch is answered in reverse order: the transport must match the answers by id.
      json(response, 200, Array.isArray(body) ? [...(body as ReadonlyArray<Call>)].reverse().map(echoed) : echoed(body as Call))
    )
    try {
      const request = looseRequest(keepAliveHttp(node.url, { batchMax: 3 }))
      const echo = (value: string) => request({ method: "echo", params: [value] })
      expect(await Promise.all(["a", "b", "c", "d", "e"].map(echo))).toEqual(["a", "b", "c", "d", "e"])
      // Five calls of one turn, at most three a request: two requests.
      expect(node.seen.bodies.map((body) => (body as ReadonlyArray<unknown>).length)).toEqual([3, 2])
      // A call alone in its turn goes as a plain request, not as a batch of one.
      for (let index = 0; index < 10; index++) expect(await echo(`x${index}`)).toBe(`x${index}`)
      expect(node.seen.bodies).toHaveLength(12)
      expect(node.seen.bodies.slice(2).every((body) => !Array.isArray(body))).toBe(true)
      // Every request after the first turn's two went over a kept connection.
      expect(node.seen.connections).toBeLessThanOrEqual(2)
    } finally {
      await stopNode(node.server)
    }
  })

  it("maps a 500 with a text body to HttpRequestError with its status, and a JSON-RPC error body to RpcRequestError", async () => {
    const node = await startNode((body, response) => {
      const call = body as { readonly method: string }
      if (call.method === "text") {
        response.writeHead(500, { "content-type": "text/plain" })
        response.end("upstream down")
      } else {
        json(response, 429, { jsonrpc: "2.0", id: 1, error: { code: -32005, message: "rate limited" } })
      }
    })
    try {
      const request = looseRequest(keepAliveHttp(node.url))
      const text = await request({ method: "text" }).catch((error: unknown) => error)
      const http500 = (text as BaseError).walk((error) => error instanceof HttpRequestError) as HttpRequestError
      expect(http500).toBeInstanceOf(HttpRequestError)
      expect(http500.status).toBe(500)
      expect(String(text)).toContain("upstream down")
      const limited = await request({ method: "limited" }).catch((error: unknown) => error)
      const rpcError = (limited as BaseError).walk((error) => error instanceof RpcRequestError) as RpcRequestError
      expect(rpcError).toBeInstanceOf(RpcRequestError)
      expect(rpcError.status).toBe(429)
      expect(rpcError.code).toBe(-32005)
      expect(String(limited)).toContain("rate limited")
    } finally {
      await stopNode(node.server)
    }
  })

  it("gives every call of a batch the node's one refusal of the whole batch", async () => {
    const node = await startNode((_body, response) =>
      json(response, 200, { jsonrpc: "2.0", id: null, error: { code: -32600, message: "batches not allowed" } })
    )
    try {
      const client = createPublicClient({ transport: keepAliveHttp(node.url, { batchMax: 10 }) })
      const outcomes = await Promise.allSettled([client.getChainId(), client.getGasPrice()])
      for (const outcome of outcomes) {
        expect(outcome.status).toBe("rejected")
        expect(String((outcome as PromiseRejectedResult).reason)).toContain("batches not allowed")
      }
    } finally {
      await stopNode(node.server)
    }
  })

  it("fails a call whose answer the batch lacks, and answers the others", async () => {
    const node = await startNode((body, response) => {
      const calls = body as ReadonlyArray<{ readonly id: number }>
      json(response, 200, calls.slice(1).map((call) => ({ jsonrpc: "2.0", id: call.id, result: "0x1" })))
    })
    try {
      const client = createPublicClient({ transport: keepAliveHttp(node.url, { batchMax: 10 }) })
      const [first, second] = await Promise.allSettled([client.getChainId(), client.getGasPrice()])
      expect(first.status).toBe("rejected")
      expect(String((first as PromiseRejectedResult).reason)).toContain("no answer to the call")
      expect(second).toEqual({ status: "fulfilled", value: 1n })
    } finally {
      await stopNode(node.server)
    }
  })

  it("times out a node that never answers", async () => {
    const node = await startNode(() => undefined)
    try {
      const client = createPublicClient({ transport: keepAliveHttp(node.url, { timeoutMs: 300 }) })
      const started = performance.now()
      const silent = await client.getChainId().catch((error: unknown) => error)
      expect((silent as BaseError).walk((error) => error instanceof TimeoutError)).toBeInstanceOf(TimeoutError)
      expect(performance.now() - started).toBeLessThan(5_000)
    } finally {
      await stopNode(node.server)
    }
  })

  it("refuses a response body over 10 MiB", async () => {
    const node = await startNode((_body, response) => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(`{"jsonrpc":"2.0","id":1,"result":"${"a".repeat(11 * 1024 * 1024)}"}`)
    })
    try {
      const huge = await createPublicClient({ transport: keepAliveHttp(node.url) }).getGasPrice().catch((error: unknown) => error)
      expect((huge as BaseError).walk((error) => error instanceof HttpRequestError)).toBeInstanceOf(HttpRequestError)
      expect(String(huge)).toContain("response body over")
    } finally {
      await stopNode(node.server)
    }
  })

  it("gives no call of a batch an answer that is not an array, unless it is a refusal", async () => {
    for (const reply of ["", JSON.stringify({ jsonrpc: "2.0", id: 1, result: "0x5" })]) {
      const node = await startNode((_body, response) => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(reply)
      })
      try {
        const client = createPublicClient({ transport: keepAliveHttp(node.url, { batchMax: 10 }), cacheTime: 0 })
        const outcomes = await Promise.allSettled([client.getBlockNumber(), client.getGasPrice()])
        for (const outcome of outcomes) {
          expect(outcome.status).toBe("rejected")
          const reason = (outcome as PromiseRejectedResult).reason as BaseError
          expect(reason.walk((error) => error instanceof HttpRequestError)).toBeInstanceOf(HttpRequestError)
        }
      } finally {
        await stopNode(node.server)
      }
    }
  })

  it("sends a call again on a fresh socket when the kept one was closed under it", async () => {
    const requestsOnSocket = new WeakMap<object, number>()
    const node = await startNode((body, response, request) => {
      const count = (requestsOnSocket.get(request.socket) ?? 0) + 1
      requestsOnSocket.set(request.socket, count)
      // The second request on a socket finds it closed, as when a peer drops an idle connection.
      if (count === 2) return request.socket.destroy()
      json(response, 200, { jsonrpc: "2.0", id: (body as { readonly id: number }).id, result: "0x1" })
    })
    try {
      const client = createPublicClient({ transport: keepAliveHttp(node.url), cacheTime: 0 })
      expect(await client.getBlockNumber()).toBe(1n)
      expect(await client.getBlockNumber()).toBe(1n)
      expect(node.seen.bodies).toHaveLength(3)
      expect(node.seen.connections).toBe(2)
    } finally {
      await stopNode(node.server)
    }
  })

  it("leaves retries to viem's rules: a 503 or a body that is not JSON is retried, a 400 is not", async () => {
    for (const [status, body, expected] of [[503, "busy", 2], [200, "not json", 2], [400, "bad request", 1]] as const) {
      const node = await startNode((_body, response) => {
        response.writeHead(status, { "content-type": "text/plain" })
        response.end(body)
      })
      try {
        const client = createPublicClient({ transport: keepAliveHttp(node.url, { retryCount: 1 }) })
        await expect(client.getChainId()).rejects.toBeInstanceOf(BaseError)
        expect(node.seen.bodies).toHaveLength(expected)
      } finally {
        await stopNode(node.server)
      }
    }
  })

  it("sends URL credentials as a Basic header and never names them in an error", async () => {
    const node = await startNode((_body, response) => {
      response.writeHead(503, { "content-type": "text/plain" })
      response.end("maintenance")
    })
    try {
      const withCredentials = node.url.replace("http://", "http://op%40erator:s3cr%3At@")
      const failed = await createPublicClient({ transport: keepAliveHttp(withCredentials) }).getChainId().catch((error: unknown) => error)
      expect(node.seen.authorizations).toEqual([`Basic ${Buffer.from("op@erator:s3cr:t").toString("base64")}`])
      expect(String(failed)).toContain("maintenance")
      const httpError = (failed as BaseError).walk((error) => error instanceof HttpRequestError) as HttpRequestError
      expect(httpError.url).toBe(`${node.url}/`)
      expect(String(failed)).not.toContain("s3cr")
    } finally {
      await stopNode(node.server)
    }
  })

  it("reports a refused connection as HttpRequestError", async () => {
    const node = await startNode(() => undefined)
    const url = node.url
    await stopNode(node.server)
    const refused = await createPublicClient({ transport: keepAliveHttp(url) }).getChainId().catch((error: unknown) => error)
    expect((refused as BaseError).walk((error) => error instanceof HttpRequestError)).toBeInstanceOf(HttpRequestError)
  })
})
