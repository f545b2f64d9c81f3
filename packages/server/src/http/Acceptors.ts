/**
 * More than one connection accepted per turn of the event loop (D81).
 *
 * Since libuv 1.45 (Node 20) a listening socket accepts **one** connection per turn of the event
 * loop (libuv/libuv#3696). A loaded api server turns its loop every 30-200 ms (PGlite's
 * statements, a guardian group, a commit's disk sync run in large synchronous pieces), so it
 * accepted 5-30 connections a second: past that, clients that reconnect (an idle keep-alive
 * socket closed while they honoured a `Retry-After`) queued in the kernel's accept queue (511),
 * then in SYN retries, for up to their own timeout, before the admission gate could answer them
 * at all. 1,024 clients collapsed to a fraction of capacity with requests unanswered after 30 s,
 * and the queue, full of connections whose clients had left, starved the next load for as long
 * (docs/benchmarks/notes/2026-11-30-overload-collapse.md).
 *
 * So the port is bound by several listening sockets with `SO_REUSEPORT` (the kernel spreads new
 * connections over them by their addresses), each handing what it accepts to the one HTTP server
 * (`connection`, as Node's own listener does): each turn of the loop accepts up to one a socket.
 *
 * `SO_REUSEPORT` lets another socket of the same user bind the port as well: the port is first
 * bound alone, without it, so that a port already taken (another server, or this one running
 * twice) is still refused at start-up; then released and bound again with it, a few microseconds
 * later. A platform without `SO_REUSEPORT` keeps the one listener.
 *
 * @since 0.15.0
 */
import * as Http from "node:http"
import * as Net from "node:net"

/**
 * Listening sockets per public listener: up to this many connections accepted per turn of the
 * event loop (at 5 turns a second, the slowest seen under load, 80 a second instead of 5).
 *
 * @since 0.15.0
 */
export const acceptorsPerListener = 16

/**
 * The port, bound alone (no `SO_REUSEPORT`) and released: fails as the listen would if the
 * address is taken. Port 0 is resolved to the port the system chose.
 *
 * @since 0.15.0
 */
export const claimPort = (host: string, port: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const probe = Net.createServer()
    probe.once("error", reject)
    probe.listen({ host, port, exclusive: true }, () => {
      const address = probe.address()
      const bound = typeof address === "object" && address !== null ? address.port : port
      probe.close(() => resolve(bound))
    })
  })

/**
 * `server`, which once listening (with `reusePort`) opens `count - 1` more listening sockets on
 * its address, each handing its connections to `server`, and closes them when `server` is closed.
 * An extra socket that cannot listen (a platform without `SO_REUSEPORT`) is left out.
 *
 * @since 0.15.0
 */
export const withAcceptors = <S extends Http.Server>(server: S, count: number): S => {
  const extras: Array<Net.Server> = []
  server.once("listening", () => {
    const address = server.address()
    if (typeof address !== "object" || address === null) return
    for (let i = 1; i < count; i++) {
      // The options Node's http.Server gives its own listener's sockets.
      const extra = Net.createServer({ allowHalfOpen: true, noDelay: true }, (socket) => server.emit("connection", socket))
      extra.once("error", () => extra.close())
      extra.listen({ host: address.address, port: address.port, reusePort: true })
      extras.push(extra)
    }
  })
  const close = server.close.bind(server)
  return Object.assign(server, {
    // Closed together; the callback once every socket has closed and the connections each took
    // have ended (an extra socket counts its own), as `close` promises for one.
    close: (callback?: (error?: Error) => void) => {
      const closing = extras.filter((extra) => extra.listening).map((extra) =>
        new Promise<void>((resolve) => extra.close(() => resolve()))
      )
      return close((error) => {
        void Promise.all(closing).then(() => callback?.(error))
      })
    }
  })
}
