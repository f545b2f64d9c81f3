/**
 * Load shedding (platform/Admission.ts): the controller's rule step by
 * step, and a real server (embedded anvil, PGlite, over a socket) whose limit is
 * two decisions at once: a burst is partly answered at once with 503 and
 * `Retry-After` in D1's envelope, nothing refused is paid or stored under its
 * idempotency key, and the same key retried later pays once.
 */
import * as net from "node:net"
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Schema } from "effect"
import { TransferRecord } from "@pps/api/Transfers"
import { Admission, cpuBusyShare, makeAdmissionController } from "../src/platform/Admission.ts"
import { registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, expectEnvelope, send } from "./support/http.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"

describe("admission controller", () => {
  // A saturated CPU: slow decisions are shed.
  const settings = { targetMs: 100, minInFlight: 4, maxInFlight: 16, windowMs: 100, busyShare: () => 1, waitCeilingMs: Number.POSITIVE_INFINITY }

  it("admits up to its limit, refuses past it, and frees a place on release", () => {
    const controller = makeAdmissionController(settings)
    const releases = Array.from({ length: 4 }, () => controller.admit(0))
    assert.isTrue(releases.every((release) => release !== undefined))
    assert.isUndefined(controller.admit(1), "the fifth at once is refused")
    releases[0]!(10)
    releases[0]!(11) // a second release of the same ticket frees nothing more
    assert.deepStrictEqual(controller.state(), { inFlight: 3, limit: 4, retryAfterSeconds: 1 })
    assert.isDefined(controller.admit(12))
    assert.isUndefined(controller.admit(13))
  })

  it("grows while the limit is used and decisions stay under the target; shrinks, never below the floor, when they do not", () => {
    const controller = makeAdmissionController(settings)
    let nowMs = 0
    // Full use, fast decisions: one window at a time, the limit grows to the maximum.
    for (let window = 0; window < 40; window++) {
      nowMs += 100
      const limit = controller.state().limit
      const releases = Array.from({ length: limit }, () => controller.admit(nowMs)!)
      for (const release of releases) release(nowMs + 10)
    }
    assert.strictEqual(controller.state().limit, 16)
    // Slow decisions: it shrinks by a tenth a window, to the floor and no lower.
    for (let window = 0; window < 40; window++) {
      nowMs += 100
      const release = controller.admit(nowMs)!
      release(nowMs + 500)
    }
    assert.strictEqual(controller.state().limit, 4)
  })

  it("with CPU to spare, slow decisions are waits: the limit grows while used instead of shedding", () => {
    let busy = 0.5
    const controller = makeAdmissionController({ ...settings, busyShare: () => busy })
    let nowMs = 0
    const slowWindow = () => {
      nowMs += 100
      const releases = Array.from({ length: controller.state().limit }, () => controller.admit(nowMs)!)
      // Three times the target: slow, within the ceiling.
      for (const release of releases) release(nowMs + 300)
    }
    for (let window = 0; window < 40; window++) slowWindow()
    assert.strictEqual(controller.state().limit, 16)
    // With the guardian or database elsewhere, far past the target (a ceiling of 4 times) the
    // limit shrinks even with CPU to spare.
    const ceiling = makeAdmissionController({ ...settings, busyShare: () => 0.5, waitCeilingMs: 400 })
    for (let t = 100; t <= 4_000; t += 100) ceiling.admit(t)!(t + 450)
    assert.strictEqual(ceiling.state().limit, 4)
    // The same decisions once the CPU is saturated: shed back to the floor.
    busy = 0.95
    for (let window = 0; window < 40; window++) slowWindow()
    assert.strictEqual(controller.state().limit, 4)
  })

  it("reads the CPU's busy share once every window, whatever the window's decisions took", () => {
    let reads = 0
    const controller = makeAdmissionController({ ...settings, busyShare: () => (reads++, 0) })
    for (let nowMs = 100; nowMs <= 1_000; nowMs += 100) controller.admit(nowMs)!(nowMs + 1)
    assert.strictEqual(reads, 10)
  })

  it("measures the machine's and the event loop's busy share between reads, within 0-1", () => {
    const read = cpuBusyShare()
    const until = performance.now() + 50
    while (performance.now() < until) {
      // Busy: the event loop's share of these 50 ms is near 1.
    }
    const busy = read()
    assert.isAtLeast(busy, 0.5)
    assert.isAtMost(busy, 1)
  })

  it("does not grow a limit that is not used", () => {
    const controller = makeAdmissionController(settings)
    for (let nowMs = 100; nowMs < 5_000; nowMs += 100) controller.admit(nowMs)!(nowMs + 1)
    assert.strictEqual(controller.state().limit, 4)
  })

  /**
   * Closed-loop clients (each sends again as soon as it is answered, and a refused one after
   * its Retry-After), decisions of 50 ms, on the controller alone: returns, per simulated
   * second, the requests admitted and refused and the Retry-After told at its end.
   */
  const simulate = (phases: ReadonlyArray<{ readonly clients: number; readonly seconds: number }>) => {
    const tickMs = 10
    const decisionTicks = 5
    const controller = makeAdmissionController(settings)
    const due = new Map<number, number>()
    const releases = new Map<number, Array<(endMs: number) => void>>()
    const seconds: Array<{ admitted: number; refused: number; retryAfterSeconds: number }> = []
    let tick = 0
    let clients = 0
    for (const phase of phases) {
      // Clients that join are due at once; clients that leave are dropped from the latest due.
      if (phase.clients > clients) due.set(tick, (due.get(tick) ?? 0) + phase.clients - clients)
      let leaving = Math.max(0, clients - phase.clients)
      for (const at of [...due.keys()].sort((a, b) => b - a)) {
        const dropped = Math.min(leaving, due.get(at)!)
        due.set(at, due.get(at)! - dropped)
        leaving -= dropped
      }
      clients = phase.clients
      for (const end = tick + (phase.seconds * 1_000) / tickMs; tick < end; tick++) {
        const nowMs = tick * tickMs
        for (const release of releases.get(tick) ?? []) release(nowMs)
        releases.delete(tick)
        if (tick % 100 === 0) seconds.push({ admitted: 0, refused: 0, retryAfterSeconds: 0 })
        const second = seconds.at(-1)!
        for (let n = due.get(tick) ?? 0; n > 0; n--) {
          const release = controller.admit(nowMs)
          const back = release === undefined
            ? tick + (controller.retryAfterSeconds() * 1_000) / tickMs
            : tick + decisionTicks
          if (release === undefined) second.refused += 1
          else {
            second.admitted += 1
            releases.set(tick + decisionTicks, [...(releases.get(tick + decisionTicks) ?? []), release])
          }
          due.set(back, (due.get(back) ?? 0) + 1)
        }
        due.delete(tick)
        second.retryAfterSeconds = controller.state().retryAfterSeconds
      }
    }
    return seconds
  }

  it("asks refused clients to wait longer the further past capacity the node is, and 1 s again once the overload ends", () => {
    // 16 places × 20 decisions a second each: ~320 admissions a second. 3,000 clients are
    // nearly ten times that; told 1 s each time, they would be refused ~3,000 times a second.
    const seconds = simulate([{ clients: 3_000, seconds: 30 }, { clients: 10, seconds: 15 }])
    const overloaded = seconds.slice(15, 30) // after ten seconds of settling
    const admitted = overloaded.reduce((sum, s) => sum + s.admitted, 0)
    const refused = overloaded.reduce((sum, s) => sum + s.refused, 0)
    assert.isAbove(admitted / overloaded.length, 250, "the node stays busy")
    assert.isBelow(refused / admitted, 1.5, `refused ${refused} against ${admitted} admitted`)
    assert.isTrue(overloaded.every((s) => s.retryAfterSeconds >= 5 && s.retryAfterSeconds <= 10), JSON.stringify(overloaded))
    // Ten clients fit: once no refusal is left in the last wait, it halves back to the floor.
    assert.deepStrictEqual(seconds.slice(-3).map((s) => s.retryAfterSeconds), [1, 1, 1])
    assert.strictEqual(seconds.slice(-3).reduce((sum, s) => sum + s.refused, 0), 0)
  })

  it("forgets an overload after a quiet gap", () => {
    const controller = makeAdmissionController(settings)
    // Full at 4 places, then a second of refusals: the wait grows.
    for (let nowMs = 0; nowMs <= 3_000; nowMs += 10) controller.admit(nowMs)
    assert.isAbove(controller.state().retryAfterSeconds, 1)
    // Nothing for five seconds, then one request: the old period's refusals no longer count.
    controller.admit(8_000)
    assert.strictEqual(controller.state().retryAfterSeconds, 1)
  })

  it("answers early (before a body is read) only while full, and counts those refusals", () => {
    const controller = makeAdmissionController(settings)
    assert.isFalse(controller.refuseEarly(0), "not full: the request goes on to read its body")
    const releases = Array.from({ length: 4 }, () => controller.admit(1)!)
    for (let nowMs = 2; nowMs < 1_000; nowMs += 1) assert.isTrue(controller.refuseEarly(nowMs))
    // A second of early refusals against four admissions: the next wait is longer.
    controller.refuseEarly(1_000)
    assert.isAbove(controller.state().retryAfterSeconds, 1)
    for (const release of releases) release(1_001)
    assert.isFalse(controller.refuseEarly(1_002))
  })

  it("never refuses with a target of 0 (shedding off)", () => {
    const controller = makeAdmissionController({ ...settings, targetMs: 0 })
    for (let i = 0; i < 100; i++) assert.isDefined(controller.admit(i))
  })
})

describe("load shedding on a real server", () => {
  layer(
    makeTestServer({ config: { transferAdmissionTargetMs: 1, transferAdmissionMaxInFlight: 2 } }),
    { timeout: "120 seconds", excludeTestServices: true }
  )("embedded", (it) => {
    it.effect("a burst past the limit is shed at once with 503 and Retry-After; the same key retried later pays once", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sender = yield* createAccount(server, "shed.sender")
        const recipient = yield* createAccount(server, "shed.recipient")
        yield* registerKey(server.baseUrl, sender.api_key)
        yield* registerKey(server.baseUrl, recipient.api_key)
        const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, {
          method: "POST",
          headers: { ...bearer(sender.api_key), "content-type": "application/json" },
          body: JSON.stringify({ amount: "100" })
        })
        assert.strictEqual(grant.status, 200, grant.text)

        const pay = (key: string) =>
          send(`${server.baseUrl}/v1/transfers`, {
            method: "POST",
            headers: { ...bearer(sender.api_key), "content-type": "application/json", "idempotency-key": key },
            body: JSON.stringify({ to: "@shed.recipient", amount: "1" })
          })
        const burst = yield* Effect.forEach(Array.from({ length: 12 }, (_, i) => `shed-${i}`), (key) =>
          pay(key).pipe(Effect.map((response) => ({ key, response }))), { concurrency: "unbounded" })
        const shed = burst.filter(({ response }) => response.status === 503)
        const paid = burst.filter(({ response }) => response.status === 201)
        assert.strictEqual(shed.length + paid.length, burst.length, burst.map(({ response }) => response.status).join(","))
        assert.isAbove(shed.length, 0, "twelve at once past a limit of two: some are shed")
        assert.isAbove(paid.length, 0, "the admitted ones are paid")
        for (const { response } of shed) {
          expectEnvelope(response, 503, "service_unavailable")
          // The first refusals of a node not refusing before: the shortest waits (1 s, spread to 2).
          assert.include(["1", "2"], response.headers.get("retry-after"))
          assert.isNull(response.headers.get("idempotent-replayed"))
        }
        // Reads are never shed, and nothing shed was paid: the sender's list holds the admitted ones.
        const listed = yield* send(`${server.baseUrl}/v1/transfers?limit=100`, { headers: bearer(sender.api_key) })
        assert.strictEqual(listed.status, 200)
        assert.strictEqual((listed.json as { data: Array<unknown> }).data.length, paid.length)
        const admission = Context.get(server.services, Admission)
        assert.strictEqual((yield* admission.state).inFlight, 0, "every place was given back")
        // Operators see each refusal counted (the admin listener's /metrics).
        const scrape = yield* send(`${server.adminUrl}/metrics`, { headers: bearer(server.adminToken) })
        assert.strictEqual(scrape.status, 200, scrape.text)
        assert.include(scrape.text.split("\n"), `pps_transfer_requests_shed_total ${shed.length}`)
        assert.include(scrape.text.split("\n"), `pps_http_requests_total{method="POST",route="/v1/transfers",status="503"} ${shed.length}`)

        // A shed request's key was not claimed: retried one at a time, each pays once; the
        // admitted ones' keys replay their first answer.
        for (const { key } of shed) {
          const retried = yield* pay(key)
          assert.strictEqual(retried.status, 201, retried.text)
          assert.isNull(retried.headers.get("idempotent-replayed"))
        }
        const replayed = yield* pay(paid[0]!.key)
        assert.strictEqual(replayed.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(
          Schema.decodeUnknownSync(TransferRecord)(replayed.json).transfer_id,
          Schema.decodeUnknownSync(TransferRecord)(paid[0]!.response.json).transfer_id
        )
        const after = yield* send(`${server.baseUrl}/v1/transfers?limit=100`, { headers: bearer(sender.api_key) })
        assert.strictEqual((after.json as { data: Array<unknown> }).data.length, burst.length, "each key paid once")

        // Uploads that never finish hold no place: the body is read before the gate. Two of
        // them (the limit) stay open while a transfer is paid.
        const { hostname, port } = new URL(server.baseUrl)
        const slow = yield* Effect.acquireRelease(
          Effect.promise(() =>
            Promise.all([1, 2].map((n) =>
              new Promise<net.Socket>((resolve, reject) => {
                const socket = net.connect(Number(port), hostname, () => {
                  socket.write(
                    "POST /v1/transfers HTTP/1.1\r\n" + `Host: ${hostname}\r\n` +
                      `Authorization: Bearer ${sender.api_key}\r\n` + `Idempotency-Key: slow-${n}\r\n` +
                      "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"to\": \"@shed.recipient\","
                  )
                  resolve(socket)
                })
                socket.once("error", reject)
              })
            ))
          ),
          (sockets) => Effect.sync(() => sockets.forEach((socket) => socket.destroy()))
        )
        assert.lengthOf(slow, 2)
        yield* Effect.sleep("300 millis")
        assert.strictEqual((yield* admission.state).inFlight, 0, "the unfinished uploads hold no place")
        const paidBeside = yield* pay("beside-slow-uploads")
        assert.strictEqual(paidBeside.status, 201, paidBeside.text)
      }).pipe(Effect.scoped))

    it.effect("while the node is full, a transfer is refused before its body is read: 503 to headers alone", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sender = yield* createAccount(server, "early.sender")
        const admission = Context.get(server.services, Admission)
        // Both places (the limit is two) held by work that waits until the test lets it go.
        const hold = yield* Deferred.make<void>()
        const holders = yield* Effect.forEach([1, 2], () =>
          admission.gate(Deferred.await(hold), () => Effect.die(new Error("a holder was refused"))).pipe(Effect.forkScoped))
        yield* Effect.addFinalizer(() => Deferred.succeed(hold, undefined).pipe(Effect.andThen(Fiber.joinAll(holders)), Effect.ignore))
        while ((yield* admission.state).inFlight < 2) yield* Effect.sleep("5 millis")
        // The request line and headers, and 14 of the 200 bytes the body announces; the rest never
        // comes. A server that read the body first would wait for it (until its request timeout).
        const { hostname, port } = new URL(server.baseUrl)
        const socket = yield* Effect.acquireRelease(
          Effect.sync(() => net.connect(Number(port), hostname)),
          (socket) => Effect.sync(() => socket.destroy())
        )
        const answer = yield* Effect.promise(() =>
          new Promise<string>((resolve, reject) => {
            socket.once("connect", () => {
              socket.write(
                "POST /v1/transfers HTTP/1.1\r\n" + `Host: ${hostname}\r\n` +
                  `Authorization: Bearer ${sender.api_key}\r\n` + "Idempotency-Key: early-refusal\r\n" +
                  "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"to\": \"@x\","
              )
            })
            let received = ""
            socket.on("data", (chunk) => {
              received += chunk.toString("utf8")
              if (received.includes("\r\n\r\n")) resolve(received)
            })
            socket.once("error", reject)
          })
        ).pipe(Effect.timeoutOption("3 seconds"))
        assert.isTrue(answer._tag === "Some", "answered without the rest of the body")
        if (answer._tag === "Some") {
          assert.match(answer.value, /^HTTP\/1\.1 503 /)
          assert.match(answer.value, /\r\nretry-after: \d+\r\n/i)
        }
        assert.strictEqual((yield* admission.state).inFlight, 2, "the refusal took no place")
      }).pipe(Effect.scoped))
  })
})
