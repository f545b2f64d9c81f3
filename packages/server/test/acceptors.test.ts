/**
 * Several listening sockets per port (http/Acceptors.ts, D81): a turn of the event loop accepts
 * one connection per socket (libuv accepts one a turn since 1.45), so connections that queued
 * while the loop was busy are taken several a turn; every one reaches the one HTTP server; a port
 * in use is still refused; closing the server frees the port.
 */
import * as ChildProcess from "node:child_process"
import * as Http from "node:http"
import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { withAcceptors } from "../src/http/Acceptors.ts"

const connections = 32

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

const closed = (server: Net.Server) => new Promise<void>((resolve) => server.close(() => resolve()))

/** A port no one listens on now: the system's choice, released. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = Net.createServer().listen({ host: "127.0.0.1", port: 0 }, () => {
      const { port } = probe.address() as Net.AddressInfo
      probe.close(() => resolve(port))
    })
  })

/** Whether `port` can be bound alone (no `SO_REUSEPORT`): no socket is left listening on it. */
const bindsAlone = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = Net.createServer()
    probe.once("error", () => resolve(false))
    probe.listen({ host: "127.0.0.1", port }, () => probe.close(() => resolve(true)))
  })

/**
 * A server answering 200 on 127.0.0.1 with `acceptors` listening sockets; how many connections
 * it accepted in the one turn of the loop after `connections` queued at once, and after all.
 */
const acceptedInOneTurn = async (acceptors: number) => {
  const { ready, server } = acceptors > 1
    ? withAcceptors(Http.createServer(), acceptors)
    : { ready: Promise.resolve(1), server: Http.createServer() }
  server.on("request", (_request, response) => response.end("ok"))
  let accepted = 0
  server.on("connection", () => accepted++)
  await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port: 0, reusePort: acceptors > 1 }, resolve))
  const listening = await ready
  const { port } = server.address() as Net.AddressInfo
  const sockets = Array.from({ length: connections }, () => Net.connect({ host: "127.0.0.1", port }))
  // The connections are queued by the kernel before the loop polls again (connect runs on the
  // next tick); wait until every one is established on the clients' side.
  await Promise.all(sockets.map((socket) => new Promise((resolve) => socket.once("connect", resolve))))
  // Between two check phases lies exactly one poll phase: the accepts of one turn.
  await nextTurn()
  const before = accepted
  await nextTurn()
  const inOneTurn = accepted - before
  for (const socket of sockets) socket.destroy()
  const answered = await Promise.all(Array.from({ length: 4 }, () =>
    fetch(`http://127.0.0.1:${port}/`).then((response) => response.status)))
  server.closeAllConnections()
  await closed(server)
  return { answered, inOneTurn, listening, port }
}

describe("acceptors", () => {
  it("one listening socket accepts one queued connection a turn of the loop", async () => {
    const { inOneTurn } = await acceptedInOneTurn(1)
    assert.strictEqual(inOneTurn, 1)
  })

  it("several accept several a turn, all served by the one server, and closing frees the port", async () => {
    const { answered, inOneTurn, listening, port } = await acceptedInOneTurn(8)
    assert.strictEqual(listening, 8)
    assert.isAbove(inOneTurn, 1, "connections spread over the sockets are accepted together")
    assert.deepStrictEqual(answered, [200, 200, 200, 200])
    assert.isTrue(await bindsAlone(port), "every socket closed with the server")
  })

  it("a port held without SO_REUSEPORT is refused by the first bind", async () => {
    const taken = Net.createServer()
    await new Promise<void>((resolve) => taken.listen({ host: "127.0.0.1", port: 0 }, resolve))
    const { port } = taken.address() as Net.AddressInfo
    const { server } = withAcceptors(Http.createServer(), 4)
    try {
      const error = await new Promise<unknown>((resolve) => {
        server.once("error", resolve)
        server.listen({ host: "127.0.0.1", port, reusePort: true }, () => resolve(undefined))
      })
      assert.match(String(error), /EADDRINUSE/)
    } finally {
      await closed(taken)
    }
  })

  it("a port another process listens on with SO_REUSEPORT is refused once the sockets listen", async () => {
    const port = await freePort()
    const other = ChildProcess.spawn(process.execPath, ["-e", `
      require("node:net").createServer().listen({ host: "127.0.0.1", port: ${port}, reusePort: true }, () => console.log("listening"))`])
    try {
      await new Promise<void>((resolve, reject) => {
        other.stdout.once("data", () => resolve())
        other.once("exit", (code) => reject(new Error(`the other process exited (${code})`)))
      })
      const { ready, server } = withAcceptors(Http.createServer(), 4)
      await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port, reusePort: true }, resolve))
      const refused = await ready.then(() => undefined, (error: unknown) => error)
      await closed(server)
      assert.match(String(refused), /EADDRINUSE.*another process/)
    } finally {
      other.kill()
    }
  })
})
