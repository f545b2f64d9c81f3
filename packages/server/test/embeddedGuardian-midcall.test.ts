/**
 * A guardian child that dies during a call answers that call as unavailable, a typed and
 * retryable failure, never as an interruption. When the child exits, the supervisor closes
 * its client's scope, and a call still waiting on that client ended with an interruption that
 * was not the caller's: the fault harness (a SIGKILLed guardian under load) saw it end the
 * server's transfer outcome stream and its recovery loop, which `Effect.catch` does not see,
 * leaving confirmed transfers unsettled with the guardian and one `pending` for good.
 *
 * Whether the dead child's socket error or its exit reaches the server first is a race, so
 * the seam is tested directly: the real HTTP client (GuardianClient.layerHttp, which the
 * supervisor builds per child) to a peer that accepts and never answers, its scope closed
 * while a call waits, as the supervisor closes it.
 */
import * as net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { GuardianClient } from "@pps/guardian"
import { Cause, Context, Effect, Exit, Fiber, Layer, Option, Redacted, Scope } from "effect"

/** A loopback peer that accepts connections and never answers (a frozen guardian). */
const silentPeer = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ readonly server: net.Server; readonly sockets: Set<net.Socket> }>((resolve) => {
      const sockets = new Set<net.Socket>()
      const server = net.createServer((socket) => void sockets.add(socket))
      server.listen(0, "127.0.0.1", () => resolve({ server, sockets }))
    })
  ),
  ({ server, sockets }) =>
    Effect.promise(() =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
    )
)

describe("embedded guardian client", () => {
  it.live("a call waiting when its child's client is closed fails as unavailable, not as an interruption", () =>
    Effect.gen(function*() {
      const peer = yield* silentPeer
      const port = (peer.server.address() as net.AddressInfo).port
      const childScope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        GuardianClient.GuardianClient.layerHttp(`http://127.0.0.1:${port}`, Redacted.make("token")),
        childScope
      )
      const client = Context.get(context, GuardianClient.GuardianClient)
      const call = yield* Effect.forkChild(Effect.exit(client.settle({ transferId: `0x${"00".repeat(32)}`, outcome: "confirmed" })))
      yield* Effect.sleep("300 millis")
      yield* Scope.close(childScope, Exit.void)
      const exit = Option.getOrThrow(yield* Fiber.join(call).pipe(Effect.timeoutOption("10 seconds")))
      assert.isTrue(Exit.isFailure(exit), "the call fails")
      if (!Exit.isFailure(exit)) return
      assert.isFalse(Cause.hasInterrupts(exit.cause), "not as an interruption")
      assert.deepStrictEqual(
        Option.map(Exit.findErrorOption(exit), (error) => error._tag === "GuardianError" ? error.reason : error._tag),
        Option.some("unavailable")
      )
    }).pipe(Effect.scoped), 30_000)
})
