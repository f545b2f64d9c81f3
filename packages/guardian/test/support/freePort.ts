/**
 * A TCP port free on loopback right now, for a guardian process a test starts (another
 * process may still take it first; the tests' ports are picked just before use).
 */
import * as net from "node:net"

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))))
    })
  })
