/**
 * More than one connection accepted per turn of the event loop (D81).
 *
 * Since libuv 1.45 (Node 20.3) a listening socket accepts **one** connection per turn of the event
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
 * `SO_REUSEPORT` lets another socket of the same user bind the port as well. A port held by a
 * socket without it is refused as before (`EADDRINUSE` from the first bind). One held by another
 * process's `SO_REUSEPORT` socket (a second instance of this server, HAProxy's listeners, nginx's
 * `reuseport`) would be shared silently: so once every socket listens, the process reads the
 * system's table of listening sockets and refuses to start if a socket not its own listens on the
 * same address and port (`soleListener`). A process that joins later is not seen (D81).
 *
 * @since 0.15.0
 */
import * as Fs from "node:fs"
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
 * An HTTP server with extra listening sockets, and when they are in place.
 *
 * @since 0.15.0
 */
export interface Acceptors<S extends Http.Server> {
  readonly server: S
  /**
   * Settles once the server listens and every extra socket has listened or failed: the number of
   * sockets listening; rejects when another process listens on the same address and port.
   */
  readonly ready: Promise<number>
}

/**
 * `server`, which once listening (with `reusePort`) opens `count - 1` more listening sockets on
 * its address, each handing its connections to `server`, and closes them when `server` is closed.
 * An extra socket that cannot listen is left out (`ready` counts the ones that do).
 *
 * @since 0.15.0
 */
export const withAcceptors = <S extends Http.Server>(server: S, count: number): Acceptors<S> => {
  const extras: Array<Net.Server> = []
  const ready = new Promise<number>((resolve, reject) => {
    server.once("listening", () => {
      const address = server.address()
      if (typeof address !== "object" || address === null) return resolve(1)
      for (let i = 1; i < count; i++) extras.push(extraListener(server, address))
      void Promise.all(extras.map(listened)).then((listening) => {
        const clash = soleListener(address.port)
        if (clash !== undefined) reject(clash)
        else resolve(1 + listening.filter(Boolean).length)
      })
    })
  })
  const close = server.close.bind(server)
  return {
    ready,
    server: Object.assign(server, {
      // Closed together (an extra whose bind is still pending is cancelled by its close); the
      // callback once every socket has closed and the connections each took have ended (an extra
      // socket counts its own), as `close` promises for one.
      close: (callback?: (error?: Error) => void) => {
        const closing = extras.map((extra) => new Promise<void>((resolve) => extra.close(() => resolve())))
        return close((error) => {
          void Promise.all(closing).then(() => callback?.(error))
        })
      }
    })
  }
}

/** One more socket on `address`, with the options Node's http.Server gives its own listener. */
const extraListener = (server: Http.Server, address: Net.AddressInfo): Net.Server => {
  const extra = Net.createServer({ allowHalfOpen: true, noDelay: true }, (socket) => server.emit("connection", socket))
  extra.listen({ host: address.address, port: address.port, reusePort: true })
  return extra
}

/** Whether `extra` came to listen (false: it failed, and is closed). */
const listened = (extra: Net.Server): Promise<boolean> =>
  new Promise((resolve) => {
    extra.once("listening", () => resolve(true))
    extra.once("error", () => {
      extra.close()
      resolve(false)
    })
  })

/**
 * Undefined when every socket listening on `port` (TCP over IPv4 and IPv6, `/proc/net/tcp{,6}`)
 * at an address that overlaps one of this process's (the same, or either a wildcard) is this
 * process's own (`/proc/self/fd`); else an error naming the port, as a refused bind's would.
 * Undefined where the tables cannot be read (not Linux: no extra sockets there either).
 *
 * @since 0.15.0
 */
export const soleListener = (port: number): Error | undefined => {
  const rows = listeningRows(port)
  if (rows === undefined) return undefined
  const own = ownSocketInodes()
  const ours = rows.filter((row) => own.has(row.inode))
  const foreign = rows.filter((row) => !own.has(row.inode))
  const overlaps = (a: ListeningRow, b: ListeningRow) => a.address === b.address || isWildcard(a.address) || isWildcard(b.address)
  const clash = foreign.find((theirs) => ours.some((mine) => overlaps(mine, theirs)))
  return clash === undefined ? undefined : Object.assign(
    new Error(`listen EADDRINUSE: port ${port} is also listened on by another process (SO_REUSEPORT, socket inode ${clash.inode})`),
    { code: "EADDRINUSE" }
  )
}

interface ListeningRow {
  /** The local address as the table writes it (hex), without the port. */
  readonly address: string
  readonly inode: string
}

/** Rows of `/proc/net/tcp` and `tcp6` in state LISTEN (0A) on `port`; undefined if unreadable. */
const listeningRows = (port: number): ReadonlyArray<ListeningRow> | undefined => {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0")
  try {
    return ["/proc/net/tcp", "/proc/net/tcp6"].flatMap((file) =>
      Fs.readFileSync(file, "utf8").split("\n").slice(1).flatMap((line) => {
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
        const fields = line.trim().split(/\s+/)
        const [address, rowPort] = (fields[1] ?? "").split(":")
        return fields[3] === "0A" && rowPort === hexPort && address !== undefined && fields[9] !== undefined
          ? [{ address, inode: fields[9] }]
          : []
      })
    )
  } catch {
    return undefined
  }
}

const isWildcard = (hexAddress: string) => /^0+$/.test(hexAddress)

/** The inodes of this process's open sockets (`socket:[inode]` links in `/proc/self/fd`). */
const ownSocketInodes = (): ReadonlySet<string> => {
  const inodes = new Set<string>()
  for (const fd of Fs.readdirSync("/proc/self/fd")) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(Fs.readlinkSync(`/proc/self/fd/${fd}`))
      if (match?.[1] !== undefined) inodes.add(match[1])
    } catch {
      // Closed between the listing and the read: not a listener of ours.
    }
  }
  return inodes
}
