/**
 * Real webhook receivers for tests: HTTPS on loopback with a certificate from
 * a throwaway CA generated here with the openssl CLI (the server trusts it
 * through WEBHOOK_CA_FILE; certificate verification stays on), recording every
 * request byte for byte.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"

export interface TestCa {
  readonly dir: string
  /** The CA certificate file (what WEBHOOK_CA_FILE points to). */
  readonly caFile: string
  readonly serverKey: string
  readonly serverCert: string
}

/** A CA and a server certificate for localhost, receiver.test, 127.0.0.1 and ::1. */
export const makeTestCa = (): TestCa => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-ca-"))
  const run = (...args: Array<string>) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" })
  run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out",
    "ca.pem", "-days", "2", "-subj", "/CN=pps test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
    "keyUsage=critical,keyCertSign,cRLSign")
  run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "server.key", "-out",
    "server.csr", "-subj", "/CN=localhost")
  fs.writeFileSync(
    path.join(dir, "ext.cnf"),
    "subjectAltName=DNS:localhost,DNS:receiver.test,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
  )
  run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem",
    "-days", "2", "-extfile", "ext.cnf")
  return {
    dir,
    caFile: path.join(dir, "ca.pem"),
    serverKey: fs.readFileSync(path.join(dir, "server.key"), "utf8"),
    serverCert: fs.readFileSync(path.join(dir, "server.pem"), "utf8")
  }
}

/** Removes a CA's directory (its files are read by path while the tests run: call it after them). */
export const removeTestCa = (ca: TestCa): void => fs.rmSync(ca.dir, { recursive: true, force: true })

export interface ReceivedRequest {
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  /** The raw body bytes as received. */
  readonly body: Buffer
  readonly receivedAtMs: number
  /** The status the receiver answered. */
  readonly status: number
}

export interface Reply {
  readonly status: number
  readonly headers?: Record<string, string>
  /** Hold the request this long before answering (real time). */
  readonly delayMs?: number
  /** Never answer (the request stays open until the client goes away). */
  readonly hang?: boolean
}

export type Behaviour = (request: { readonly path: string; readonly headers: http.IncomingHttpHeaders; readonly body: Buffer }) => Reply

export interface Receiver {
  /** Base URL, e.g. https://127.0.0.1:port */
  readonly url: string
  readonly port: number
  readonly requests: Array<ReceivedRequest>
  setBehaviour(behaviour: Behaviour): void
  /** Requests currently open, per delivery id (to catch concurrent duplicates). */
  readonly openByDelivery: Map<string, number>
  /** Largest number of requests open at once, per URL path (one path per subscription). */
  readonly maxOpenByPath: Map<string, number>
  /** Delivery ids that were ever open twice at the same time. */
  readonly concurrentDuplicates: Array<string>
  readonly close: () => Promise<void>
}

/** Starts a receiver (HTTPS with `ca`, plain HTTP without). */
export const startReceiver = async (ca: TestCa | undefined, behaviour: Behaviour = () => ({ status: 200 })): Promise<Receiver> => {
  let current = behaviour
  const requests: Array<ReceivedRequest> = []
  const openByDelivery = new Map<string, number>()
  const openByPath = new Map<string, number>()
  const maxOpenByPath = new Map<string, number>()
  const concurrentDuplicates: Array<string> = []
  const sockets = new Set<import("node:net").Socket>()
  const handler: http.RequestListener = (request, response) => {
    const chunks: Array<Buffer> = []
    const deliveryId = String(request.headers["x-service-delivery-id"] ?? "")
    const pathname = request.url ?? "/"
    const open = (openByDelivery.get(deliveryId) ?? 0) + 1
    openByDelivery.set(deliveryId, open)
    if (open > 1 && deliveryId !== "") concurrentDuplicates.push(deliveryId)
    const openPath = (openByPath.get(pathname) ?? 0) + 1
    openByPath.set(pathname, openPath)
    maxOpenByPath.set(pathname, Math.max(maxOpenByPath.get(pathname) ?? 0, openPath))
    let closed = false
    const finish = () => {
      if (closed) return
      closed = true
      openByDelivery.set(deliveryId, (openByDelivery.get(deliveryId) ?? 1) - 1)
      openByPath.set(pathname, (openByPath.get(pathname) ?? 1) - 1)
    }
    response.once("close", finish)
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = Buffer.concat(chunks)
      const reply = current({ path: pathname, headers: request.headers, body })
      requests.push({ path: pathname, headers: request.headers, body, receivedAtMs: Date.now(), status: reply.status })
      if (reply.hang === true) return
      const send = () => {
        response.writeHead(reply.status, { "content-type": "text/plain", ...reply.headers })
        response.end("ok")
        finish()
      }
      if (reply.delayMs === undefined) send()
      else setTimeout(send, reply.delayMs)
    })
  }
  const server = ca === undefined
    ? http.createServer(handler)
    : https.createServer({ key: ca.serverKey, cert: ca.serverCert }, handler)
  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.once("close", () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `${ca === undefined ? "http" : "https"}://127.0.0.1:${port}`,
    port,
    requests,
    setBehaviour: (next) => {
      current = next
    },
    openByDelivery,
    maxOpenByPath,
    concurrentDuplicates,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }
}

/** The receiver as a scoped resource. */
export const receiverResource = (ca: TestCa | undefined, behaviour?: Behaviour) =>
  Effect.acquireRelease(
    Effect.promise(() => startReceiver(ca, behaviour)),
    (receiver) => Effect.promise(() => receiver.close())
  )

/**
 * Polls (in real time, not the test clock) until `check` holds, or fails after
 * `timeoutMs`. `tick`, when given, runs between polls: under TestClock it
 * advances virtual time in small steps, the way time passes for a worker
 * whose own sleeps are registered while the test waits. `lastSeen`, when
 * given, describes the state the last poll found, for the timeout's message.
 */
export const eventually = <A>(
  check: Effect.Effect<A | undefined, unknown>,
  what: string,
  options: { readonly timeoutMs?: number; readonly tick?: Effect.Effect<void>; readonly lastSeen?: () => string } = {}
): Effect.Effect<A, unknown> =>
  Effect.gen(function*() {
    const deadline = Date.now() + (options.timeoutMs ?? 15_000)
    while (Date.now() < deadline) {
      const value = yield* check
      if (value !== undefined) return value
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 15)))
      if (options.tick !== undefined) yield* options.tick
    }
    const seen = options.lastSeen === undefined ? "" : `; last seen: ${options.lastSeen()}`
    return yield* Effect.die(new Error(`timed out waiting for ${what}${seen}`))
  })
