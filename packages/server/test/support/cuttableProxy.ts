/**
 * A loopback TCP proxy the test can cut and resume, in front of any TCP server (NATS,
 * PostgreSQL): cutting destroys every open connection both ways and refuses new ones
 * (accepted, then closed at once), so "the node lost its link" is a real broken socket,
 * not a simulated error. Resuming lets new connections through again; the client
 * reconnects on its own.
 */
import * as net from "node:net"
import { Effect } from "effect"

export interface CuttableProxy {
  /** The loopback port clients connect to instead of the target's. */
  readonly port: number
  /** Destroys every connection through the proxy and refuses new ones until `resume`. */
  readonly cut: () => void
  readonly resume: () => void
  /** Connections currently open through the proxy (client side). */
  readonly openConnections: () => number
}

/** Starts a proxy to `target` (host and port); `close` stops it. For tests without Effect too. */
export const startCuttableProxy = (target: { readonly host: string; readonly port: number }) =>
  new Promise<CuttableProxy & { readonly close: () => Promise<void> }>((resolve) => {
    const sockets = new Set<net.Socket>()
    const clients = new Set<net.Socket>()
    let open = true
    const server = net.createServer((client) => {
      if (!open) return client.destroy()
      const upstream = net.connect(target.port, target.host)
      sockets.add(client).add(upstream)
      clients.add(client)
      client.pipe(upstream)
      upstream.pipe(client)
      const drop = () => {
        client.destroy()
        upstream.destroy()
        sockets.delete(client)
        sockets.delete(upstream)
        clients.delete(client)
      }
      client.on("close", drop).on("error", drop)
      upstream.on("close", drop).on("error", drop)
    })
    server.listen(0, "127.0.0.1", () => {
      resolve({
        port: (server.address() as net.AddressInfo).port,
        cut: () => {
          open = false
          for (const socket of sockets) socket.destroy()
        },
        resume: () => {
          open = true
        },
        openConnections: () => clients.size,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })

/** The proxy to a URL's host and port (`defaultPort` when the URL names none), closed with the scope. */
export const cuttableProxy = (targetUrl: string, defaultPort: number) =>
  Effect.acquireRelease(
    Effect.promise(() => {
      const url = new URL(targetUrl)
      return startCuttableProxy({ host: url.hostname, port: Number(url.port || defaultPort) })
    }),
    (proxy) => Effect.promise(() => proxy.close())
  )

/** `url` with its host and port replaced by the proxy's (scheme, user, path and query kept). */
export const throughProxy = (url: string, proxy: CuttableProxy): string => {
  const rewritten = new URL(url)
  rewritten.hostname = "127.0.0.1"
  rewritten.port = String(proxy.port)
  return rewritten.toString()
}
