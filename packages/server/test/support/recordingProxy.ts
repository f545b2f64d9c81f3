/**
 * A TCP proxy on loopback in front of a real server that records every byte a client
 * sends through it: what "the server received" means at the wire, below any client
 * library, for canaries that assert an amount or memo never left the client.
 */
import { Effect } from "effect"
import * as net from "node:net"

export interface RecordingProxy {
  /** The proxy's base URL (same scheme and path as the target's). */
  readonly baseUrl: string
  /** Everything clients have sent so far, concatenated. */
  readonly sent: () => Buffer
}

/** Starts a proxy to `targetBaseUrl` (http://host:port); `close` stops it. For tests without Effect too. */
export const startRecordingProxy = (targetBaseUrl: string): Promise<RecordingProxy & { readonly close: () => Promise<void> }> =>
  new Promise((resolve) => {
    const target = new URL(targetBaseUrl)
    const chunks: Array<Buffer> = []
    const server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port), target.hostname)
      client.on("data", (chunk: Buffer) => {
        chunks.push(Buffer.from(chunk))
        upstream.write(chunk)
      })
      upstream.on("data", (chunk: Buffer) => client.write(chunk))
      client.on("close", () => upstream.destroy())
      upstream.on("close", () => client.destroy())
      client.on("error", () => upstream.destroy())
      upstream.on("error", () => client.destroy())
    })
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      resolve({
        baseUrl: `${target.protocol}//127.0.0.1:${port}${target.pathname.replace(/\/$/, "")}`,
        sent: () => Buffer.concat(chunks),
        close: () => new Promise<void>((done) => server.close(() => done()))
      })
    })
  })

/** The proxy as a scoped Effect: closed with the scope. */
export const recordingProxy = (targetBaseUrl: string) =>
  Effect.acquireRelease(Effect.promise(() => startRecordingProxy(targetBaseUrl)), (proxy) => Effect.promise(() => proxy.close()))

/**
 * The encodings an amount or memo could travel in: decimal text, base units in decimal,
 * `0x` hex and 8-byte big-endian hex, the memo as text, hex, base64 and base64url. The short hex
 * form carries its `0x`: bare, six hex digits (3.217 USDG is `311668`) turn up by chance inside the
 * kilobytes of random hex a transfer's sealed boxes and signatures put on the wire (seen once in
 * CI); a value written as hex in JSON carries the prefix, and a padded one is the 8-byte form.
 */
export const canaryForms = (amount: { readonly decimal: string; readonly baseUnits: bigint }, memo: string): ReadonlyArray<string> => {
  const be8 = Buffer.alloc(8)
  be8.writeBigUInt64BE(amount.baseUnits)
  const memoBytes = Buffer.from(memo, "utf8")
  return [
    amount.decimal,
    amount.baseUnits.toString(),
    `0x${amount.baseUnits.toString(16)}`,
    be8.toString("hex"),
    be8.toString("base64"),
    memo,
    encodeURIComponent(memo),
    memoBytes.toString("hex"),
    memoBytes.toString("base64"),
    memoBytes.toString("base64url")
  ]
}
