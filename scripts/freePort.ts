/**
 * A loopback TCP port for a process a test, bench or script is about to start.
 *
 * Why not "listen on port 0 and close": that port comes from the kernel's ephemeral
 * range, the same range every later port-0 listener (the embedded guardian, anvil, other
 * test files) and every outgoing connection's source port is drawn from. Between the probe
 * and the child's own bind, seconds later, any of those may take it (CI saw a server
 * refuse to start with EADDRINUSE). A port just below the ephemeral range is never handed
 * out by the kernel, so only another caller of this function could take it: it is picked
 * at random, checked free, and never handed out twice by one process.
 */
import { randomInt } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"

/** The lowest port of the kernel's ephemeral range (Linux; 32768 by default elsewhere). */
const ephemeralLow = (): number => {
  try {
    const low = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
    return Number.isInteger(low) && low > 0 ? low : 32_768
  } catch {
    return 32_768
  }
}

const handedOut = new Set<number>()

/** Resolves with the port it bound, or 0 when the port was taken. */
const tryBind = (port: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", (error: NodeJS.ErrnoException) =>
      error.code === "EADDRINUSE" || error.code === "EACCES" ? resolve(0) : reject(error)
    )
    server.listen(port, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** A TCP port free on loopback right now, outside the kernel's ephemeral range when it can be. */
export const freePort = async (): Promise<number> => {
  const high = ephemeralLow() - 1
  const low = Math.max(1_024, high - 12_000)
  if (high - low >= 1_000) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const candidate = randomInt(low, high + 1)
      if (handedOut.has(candidate)) continue
      if ((await tryBind(candidate)) === candidate) {
        handedOut.add(candidate)
        return candidate
      }
    }
  }
  // An unusual range, or a crowded one: the kernel's choice, with the race described above.
  for (;;) {
    const port = await tryBind(0)
    if (port !== 0 && !handedOut.has(port)) {
      handedOut.add(port)
      return port
    }
  }
}
