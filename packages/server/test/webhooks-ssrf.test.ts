/**
 * SSRF (D33): 30+ ways of pointing a delivery at an internal address
 * are refused by the real delivery client, with a real receiver listening on
 * loopback that must see no request. DNS answers for made-up names come from
 * a hostile resolver passed to the client (the check runs on whatever the
 * resolver says, at connect time); `localhost` goes through the system
 * resolver. Also: the connection is pinned to the checked address while TLS
 * still verifies the host name, redirects are not followed, and
 * certificates are verified. And what an attempt records when it gets no answer
 * (refused, timed out, reset) or an answer with Retry-After.
 */
import * as dns from "node:dns"
import * as fs from "node:fs"
import * as net from "node:net"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { checkUrl, makeAddressPolicy } from "../src/webhooks/AddressPolicy.ts"
import { type Resolver, WebhookClient } from "../src/webhooks/WebhookClient.ts"
import { makeTestCa, type Receiver, removeTestCa, startReceiver } from "./support/webhooks-receiver.ts"

const ca = makeTestCa()
let receiver: Receiver
beforeAll(async () => {
  receiver = await startReceiver(ca, ({ path }) =>
    path === "/redirect"
      ? { status: 302, headers: { location: "https://169.254.169.254/latest/meta-data/" } }
      : path === "/busy"
      ? { status: 503, headers: { "retry-after": "7" } }
      : { status: 200 })
})
afterAll(async () => {
  await receiver.close()
  removeTestCa(ca)
})

/** A hostile DNS server: names that resolve to internal addresses. */
const hostileDns: Record<string, ReadonlyArray<{ address: string; family: number }>> = {
  "internal.example": [{ address: "10.0.0.5", family: 4 }],
  "mixed.example": [{ address: "93.184.216.34", family: 4 }, { address: "127.0.0.1", family: 4 }],
  "mapped.example": [{ address: "::ffff:127.0.0.1", family: 6 }],
  "nat64.example": [{ address: "64:ff9b::7f00:1", family: 6 }],
  "metadata.example": [{ address: "169.254.169.254", family: 4 }],
  "ula.example": [{ address: "fd00::1", family: 6 }],
  "cgnat.example": [{ address: "100.100.100.200", family: 4 }],
  "receiver.test": [{ address: "127.0.0.1", family: 4 }],
  "wrong-name.test": [{ address: "127.0.0.1", family: 4 }]
}
const resolver: Resolver = async (hostname) => {
  const answer = hostileDns[hostname]
  if (answer !== undefined) return answer
  return dns.promises.lookup(hostname, { all: true, verbatim: true })
}

const caPem = fs.readFileSync(ca.caFile, "utf8")
const loadCa = () => caPem

const strict = WebhookClient.make({
  policy: makeAddressPolicy({ allowLoopback: false, allowedPrivateCidrs: [] }),
  extraCaPem: caPem,
  resolver,
  timeoutMs: 3_000
})

const send = (client: typeof strict, url: string, loopbackGranted = false) =>
  client.send({ url, headers: { "content-type": "application/json" }, body: new TextEncoder().encode("{}"), loopbackGranted })

describe("SSRF defences", () => {
  it.effect("30+ bypass attempts are refused and the loopback receiver sees none of them", () =>
    Effect.gen(function*() {
      const port = receiver.port
      const attempts = [
        `https://127.0.0.1:${port}/`,
        `https://2130706433:${port}/`, // decimal
        `https://0177.0.0.1:${port}/`, // octal
        `https://0x7f.0.0.1:${port}/`, // hex
        `https://0x7f000001:${port}/`, // one hex number
        `https://127.1:${port}/`, // short form
        `https://[::1]:${port}/`,
        `https://[::ffff:127.0.0.1]:${port}/`, // IPv4-mapped
        `https://[::ffff:7f00:1]:${port}/`,
        `https://[0:0:0:0:0:ffff:127.0.0.1]:${port}/`,
        `https://[64:ff9b::127.0.0.1]:${port}/`, // NAT64
        `https://[::127.0.0.1]:${port}/`, // IPv4-compatible
        `https://[2002:7f00:1::]:${port}/`, // 6to4 of 127.0.0.1
        `https://0.0.0.0:${port}/`,
        `https://[::]:${port}/`,
        "https://169.254.169.254/latest/meta-data/", // cloud metadata
        "https://0251.0376.0251.0376/latest/meta-data/", // metadata, octal
        "https://[::ffff:a9fe:a9fe]/", // metadata, mapped
        "https://[fd00:ec2::254]/", // AWS metadata over IPv6
        "https://metadata.google.internal/computeMetadata/v1/",
        "https://10.0.0.1/",
        "https://172.16.0.1/",
        "https://192.168.1.1/",
        "https://100.64.0.1/", // carrier-grade NAT
        "https://[fc00::1]/", // unique-local
        "https://[fe80::1]/", // link-local
        `https://localhost:${port}/`,
        `https://LOCALHOST.:${port}/`, // trailing dot and case: resolved, then refused
        `https://internal.example:${port}/`, // DNS name resolving to a private address
        `https://mixed.example:${port}/`, // one public and one loopback answer
        `https://mapped.example:${port}/`, // DNS answer in IPv4-mapped form
        `https://nat64.example:${port}/`,
        `https://metadata.example/`,
        `https://ula.example/`,
        `https://cgnat.example/`,
        `http://127.0.0.1:${port}/`, // plain http
        `https://user:password@127.0.0.1:${port}/` // credentials
      ]
      assert.isAtLeast(attempts.length, 30)
      for (const url of attempts) {
        const outcome = yield* send(strict, url)
        assert.isUndefined(outcome.statusCode, url)
        assert.include(["ssrf_refused", "invalid_url"], outcome.error, `${url}: ${outcome.error}`)
      }
      assert.strictEqual(receiver.requests.length, 0, "no request reached the receiver")
      // The same URLs are refused when a subscription is created, wherever the
      // address is visible without DNS.
      const policy = makeAddressPolicy({ allowLoopback: false, allowedPrivateCidrs: [] })
      for (const url of attempts.filter((u) => !/\.example|LOCALHOST\./.test(u))) {
        assert.strictEqual(checkUrl(policy, url)._tag, "Refused", url)
      }
    }))

  it.effect("a redirect to the metadata service is not followed: the attempt fails with the 3xx", () =>
    Effect.gen(function*() {
      const loopback = WebhookClient.make({
        policy: makeAddressPolicy({ allowLoopback: true, allowedPrivateCidrs: [] }),
        extraCaPem: loadCa(),
        resolver
      })
      const before = receiver.requests.length
      const outcome = yield* send(loopback, `https://127.0.0.1:${receiver.port}/redirect`)
      assert.strictEqual(outcome.statusCode, 302)
      assert.strictEqual(receiver.requests.length, before + 1)
    }))

  it.effect("the connection is pinned to the checked address while TLS verifies the name; bad names fail TLS", () =>
    Effect.gen(function*() {
      const loopback = WebhookClient.make({
        policy: makeAddressPolicy({ allowLoopback: true, allowedPrivateCidrs: [] }),
        extraCaPem: loadCa(),
        resolver
      })
      const pinned = yield* send(loopback, `https://receiver.test:${receiver.port}/pinned`)
      assert.strictEqual(pinned.statusCode, 200)
      assert.strictEqual(receiver.requests.at(-1)?.path, "/pinned")
      const wrongName = yield* send(loopback, `https://wrong-name.test:${receiver.port}/`)
      assert.strictEqual(wrongName.error, "tls_error")
      // Without the test CA the certificate is not trusted: verification is never off.
      const untrusted = WebhookClient.make({ policy: makeAddressPolicy({ allowLoopback: true, allowedPrivateCidrs: [] }) })
      const refused = yield* send(untrusted, `https://127.0.0.1:${receiver.port}/`)
      assert.strictEqual(refused.error, "tls_error")
    }))

  it.effect("D59: a loopback grant opens loopback for that request only, never the service's own ports, whatever the name", () =>
    Effect.gen(function*() {
      const own = WebhookClient.make({
        policy: makeAddressPolicy({ allowLoopback: false, allowedPrivateCidrs: [] }),
        extraCaPem: loadCa(),
        resolver,
        ownPorts: [receiver.port]
      })
      const other = WebhookClient.make({
        policy: makeAddressPolicy({ allowLoopback: false, allowedPrivateCidrs: [] }),
        extraCaPem: loadCa(),
        resolver,
        ownPorts: [receiver.port + 1]
      })
      const before = receiver.requests.length
      // Without the grant: refused before connecting; with it, delivered.
      assert.strictEqual((yield* send(other, `https://127.0.0.1:${receiver.port}/granted`)).error, "ssrf_refused")
      assert.strictEqual((yield* send(other, `https://127.0.0.1:${receiver.port}/granted`, true)).statusCode, 200)
      assert.strictEqual(receiver.requests.length, before + 1)
      // The same port as the service's own: refused with the grant, by literal and by a name resolving to loopback.
      assert.strictEqual((yield* send(own, `https://127.0.0.1:${receiver.port}/own`, true)).error, "ssrf_refused")
      assert.strictEqual((yield* send(own, `https://receiver.test:${receiver.port}/own`, true)).error, "ssrf_refused")
      assert.strictEqual(receiver.requests.length, before + 1)
      assert.deepStrictEqual(own.check(`http://127.0.0.1:${receiver.port}/`, true), { _tag: "Refused", reason: "own_port" })
      assert.deepStrictEqual(own.check(`http://127.0.0.1:${receiver.port}/`, false), { _tag: "Refused", reason: "scheme" })
      assert.strictEqual(own.check(`http://127.0.0.1:${receiver.port + 5}/`, true)._tag, "Ok")
    }))

  it.effect("an operator allow-list opens a private range, never the metadata addresses", () =>
    Effect.gen(function*() {
      const policy = makeAddressPolicy({ allowLoopback: false, allowedPrivateCidrs: ["10.0.0.0/8", "169.254.0.0/16"] })
      assert.strictEqual(checkUrl(policy, "https://10.1.2.3/hook")._tag, "Ok")
      assert.strictEqual(checkUrl(policy, "https://169.254.10.10/hook")._tag, "Ok")
      assert.strictEqual(checkUrl(policy, "https://169.254.169.254/")._tag, "Refused")
      assert.strictEqual(checkUrl(policy, "https://192.168.0.1/")._tag, "Refused")
      assert.strictEqual(checkUrl(policy, "https://[::ffff:10.1.2.3]/")._tag, "Refused")
      assert.throws(() => makeAddressPolicy({ allowLoopback: false, allowedPrivateCidrs: ["10.0.0.0/33"] }))
    }))
})

/** A TCP peer on loopback that does `onConnection` with every connection; closed after the test. */
const rawPeer = (onConnection: (socket: net.Socket) => void) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<net.Server>((resolve) => {
        const server = net.createServer(onConnection)
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
    ),
    (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  ).pipe(Effect.map((server) => (server.address() as net.AddressInfo).port))

describe("attempt outcomes", () => {
  const loopback = WebhookClient.make({
    policy: makeAddressPolicy({ allowLoopback: true, allowedPrivateCidrs: [] }),
    extraCaPem: caPem,
    resolver,
    timeoutMs: 500
  })

  it.effect("a status and its Retry-After pass through, and the next attempt is answered", () =>
    Effect.gen(function*() {
      const busy = yield* send(loopback, `https://127.0.0.1:${receiver.port}/busy`)
      assert.deepStrictEqual([busy.statusCode, busy.error, busy.retryAfter], [503, undefined, "7"])
      const again = yield* send(loopback, `https://127.0.0.1:${receiver.port}/ok`)
      assert.deepStrictEqual([again.statusCode, again.error], [200, undefined])
    }))

  it.effect("a closed port is connection_refused, a silent peer times out, a dropped connection is connection_reset", () =>
    Effect.gen(function*() {
      const closedPort = yield* Effect.scoped(rawPeer(() => {}))
      const refused = yield* send(loopback, `https://127.0.0.1:${closedPort}/`)
      assert.deepStrictEqual([refused.statusCode, refused.error], [undefined, "connection_refused"])

      const held: Array<net.Socket> = []
      const silentPort = yield* rawPeer((socket) => held.push(socket))
      const silent = yield* send(loopback, `https://127.0.0.1:${silentPort}/`)
      held.forEach((socket) => socket.destroy())
      assert.deepStrictEqual([silent.statusCode, silent.error], [undefined, "timeout"])
      assert.isAtLeast(silent.durationMs, 450)
      assert.isBelow(silent.durationMs, 5_000, "the attempt's deadline holds during the TLS handshake too")

      const resetPort = yield* rawPeer((socket) => socket.resetAndDestroy())
      const reset = yield* send(loopback, `https://127.0.0.1:${resetPort}/`)
      assert.deepStrictEqual([reset.statusCode, reset.error], [undefined, "connection_reset"])
    }).pipe(Effect.scoped))
})
