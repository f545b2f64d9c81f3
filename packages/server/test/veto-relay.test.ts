/**
 * The api tier relays the guardian's veto of a guardian rotation its operator did not
 * approve (issue 12): the owner proposes (anvil impersonates the owner, whose key the
 * embedded server never keeps), the guardian signs the cancellation, a relayer submits
 * it, and the proposal is gone well before its delay runs out.
 */
import { assert, describe, layer } from "@effect/vitest"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { Context, Effect, Option, Schedule } from "effect"
import { createTestClient, createWalletClient, encodeFunctionData, http } from "viem"
import { Settlement } from "../src/settlement/Settlement.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"

describe("guardian rotation veto relay", () => {
  layer(makeTestServer(), { timeout: "180 seconds", excludeTestServices: true })("embedded", (it) => {
    it.effect("an unapproved rotation proposed by the owner is cancelled by the guardian's veto, relayed by the server", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
        const token = chain.contracts.confidentialUsdg
        const read = <A>(run: () => Promise<A>) => Effect.promise(run)
        const owner = yield* read(() => chain.client.readContract({ address: token, abi: ConfidentialTokenArtifact.abi, functionName: "owner" }))
        const cheats = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) })
        yield* read(() => cheats.impersonateAccount({ address: owner }))
        yield* read(() => cheats.setBalance({ address: owner, value: 10n ** 20n }))
        const wallet = createWalletClient({ account: owner, transport: http(chain.rpcUrl) })
        const hash = yield* read(() =>
          wallet.sendTransaction({
            to: token,
            data: encodeFunctionData({
              abi: ConfidentialTokenArtifact.abi,
              functionName: "proposeGuardianRotation",
              args: ["0x000000000000000000000000000000000000dEaD", { x: 1n, y: 2n }]
            }),
            gas: 400_000n,
            chain: null
          }))
        const receipt = yield* read(() => chain.client.waitForTransactionReceipt({ hash, pollingInterval: 50 }))
        assert.strictEqual(receipt.status, "success")
        const pending = () =>
          read(() => chain.client.readContract({ address: token, abi: ConfidentialTokenArtifact.abi, functionName: "pendingGuardianRotation" }))
        assert.strictEqual((yield* pending()).newSigner, "0x000000000000000000000000000000000000dEaD")
        // The guardian vetoes on its next look at the chain; the server relays within its round.
        const cleared = yield* pending().pipe(
          Effect.flatMap((p) => p.newSigner === "0x0000000000000000000000000000000000000000" ? Effect.succeed(p) : Effect.fail("pending" as const)),
          Effect.retry(Schedule.spaced("1 second").pipe(Schedule.upTo({ duration: "50 seconds" }))),
          Effect.orElseSucceed(() => undefined)
        )
        assert.isDefined(cleared, "the proposal is still pending: the veto was not relayed")
        assert.isTrue(server.logs.some((line) => line.includes("relayed the guardian's veto")))
      }))
  })
})
