/**
 * Several listening sockets per port (http/Acceptors.ts, D81): a turn of the event loop accepts
 * one connection per socket (libuv accepts one a turn since 1.45), so connections that queued
 * while the loop was busy are taken several a turn; every one reaches the one HTTP server; a port
 * in use is still refused; closing the server frees the port.
 */
import * as Http from "node:http"
import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { claimPort, withAcceptors } from "../src/http/Acceptors.ts"

const connections = 32

/** Blocks the event loop, as a loaded server's synchronous work does, while the kernel queues connections. */
const busy = (ms: number) => {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // The loop does nothing else meanwhile: no connection is accepted.
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * A server answering 200 on `host:port` with `acceptors` listening sockets; how many connections
 * it accepted in the one turn of the loop after `connections` queued at once, and after all.
 */
const acceptedInOneTurn = async (acceptors: number) => {
  const port = await claimPort("127.0.0.1", 0)
  const server = acceptors > 1 ? withAcceptors(Http.createServer(), acceptors) : Http.createServer()
  server.on("request", (_request, response) => response.end("ok"))
  let accepted = 0
  server.on("connection", () => accepted++)
  await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port, reusePort: acceptors > 1 }, resolve))
  await nextTurn()
  const sockets = Array.from({ length: connections }, () => Net.connect({ host: "127.0.0.1", port }))
  busy(100)
  // Between two check phases lies exactly one poll phase: the accepts of one turn.
  await nextTurn()
  const before = accepted
  await nextTurn()
  const inOneTurn = accepted - before
  for (const socket of sockets) socket.destroy()
  const answered = await Promise.all(Array.from({ length: 4 }, () =>
    fetch(`http://127.0.0.1:${port}/`).then((response) => response.status)))
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return { inOneTurn, answered, port }
}

describe("acceptors", () => {
  it("one listening socket accepts one queued connection a turn of the loop", async () => {
    const { inOneTurn } = await acceptedInOneTurn(1)
    assert.strictEqual(inOneTurn, 1)
  })

  it("several accept several a turn, all served by the one server, and closing frees the port", async () => {
    const { answered, inOneTurn, port } = await acceptedInOneTurn(8)
    assert.isAbove(inOneTurn, 1, "connections spread over the sockets are accepted together")
    assert.deepStrictEqual(answered, [200, 200, 200, 200])
    // Every socket closed with the server: the port can be claimed alone again.
    assert.strictEqual(await claimPort("127.0.0.1", port), port)
  })

  it("a port in use is refused", async () => {
    const taken = Net.createServer()
    await new Promise<void>((resolve) => taken.listen({ host: "127.0.0.1", port: 0 }, resolve))
    const address = taken.address() as Net.AddressInfo
    try {
      const error = await claimPort("127.0.0.1", address.port).then(() => undefined, (cause: unknown) => cause)
      assert.match(String(error), /EADDRINUSE/)
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()))
    }
  })
})
