/**
 * The api tier relays the guardian's veto of a guardian rotation its operator did not
 * approve (docs/guardian.md): the owner proposes (anvil impersonates the owner, whose key the
 * embedded server never keeps), the guardian signs the cancellation, a relayer submits
 * it, and the proposal is gone well before its delay runs out. One contract whose reads
 * fail does not hold back the others' vetoes (L4). Past D52's bound (two vetoes of proposals of
 * the same signer) the relay submits nothing: it reads the contract's count, says so once at
 * info, and the third proposal stays pending, to execute after its delay.
 */
import { assert, describe, layer } from "@effect/vitest"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { Context, Effect, Option, Schedule } from "effect"
import { type Address, createTestClient, createWalletClient, encodeFunctionData, http } from "viem"
import type { ChainContext } from "../src/settlement/Chains.ts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"

const read = <A>(run: () => Promise<A>) => Effect.promise(run)

const deadSigner: Address = "0x000000000000000000000000000000000000dEaD"

/** The owner (impersonated on anvil) proposes an unapproved guardian rotation on `token`. */
const proposeRotation = (chain: ChainContext, token: Address, newSigner: Address = deadSigner) =>
  Effect.gen(function*() {
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
          args: [newSigner, { x: 1n, y: 2n }]
        }),
        gas: 400_000n,
        chain: null
      }))
    const receipt = yield* read(() => chain.client.waitForTransactionReceipt({ hash, pollingInterval: 50 }))
    assert.strictEqual(receipt.status, "success")
    assert.strictEqual((yield* pendingSigner(chain, token)), newSigner)
  })

const pendingSigner = (chain: ChainContext, token: Address) =>
  read(() => chain.client.readContract({ address: token, abi: ConfidentialTokenArtifact.abi, functionName: "pendingGuardianRotation" })).pipe(
    Effect.map((pending) => pending.newSigner)
  )

/** Whether the proposal on `token` is gone within 50 s (the guardian vetoes, the server relays within its round). */
const clearedWithin50s = (chain: ChainContext, token: Address) =>
  pendingSigner(chain, token).pipe(
    Effect.flatMap((signer) => signer === "0x0000000000000000000000000000000000000000" ? Effect.succeed(true) : Effect.fail("pending" as const)),
    Effect.retry(Schedule.spaced("1 second").pipe(Schedule.upTo({ duration: "50 seconds" }))),
    Effect.orElseSucceed(() => false)
  )

describe("guardian rotation veto relay", () => {
  // A round every second rather than the default 15 s: the test waits on rounds.
  layer(makeTestServer({ config: { vetoRelayIntervalMs: 1_000 } }), { timeout: "180 seconds", excludeTestServices: true })("embedded", (it) => {
    it.effect("an unapproved rotation proposed by the owner is cancelled by the guardian's veto, relayed by the server", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
        const token = chain.contracts.confidentialUsdg
        yield* proposeRotation(chain, token)
        assert.isTrue(yield* clearedWithin50s(chain, token), "the proposal is still pending: the veto was not relayed")
        assert.isTrue(server.logs.some((line) => line.includes("relayed the guardian's veto")))
      }))

    it.effect("a contract whose reads fail does not stop the round: the next contract's veto is still relayed", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
        const broken = chain.contracts.confidentialUsdg
        const token = chain.contracts.confidentialEth
        const cheats = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) })
        // The round looks at USDG first; without code there, its read fails every round.
        const code = yield* read(() => chain.client.getCode({ address: broken }))
        assert.isDefined(code)
        yield* Effect.acquireRelease(
          read(() => cheats.setCode({ address: broken, bytecode: "0x" })),
          () => read(() => cheats.setCode({ address: broken, bytecode: code! }))
        )
        yield* proposeRotation(chain, token)
        assert.isTrue(yield* clearedWithin50s(chain, token), "the second contract's veto was held back by the first's failure")
        const failures = server.logs.filter((line) => line.includes("relaying the guardian's veto failed for one contract"))
        assert.isTrue(failures.some((line) => line.includes(broken)), "the failing contract is logged by id")
      }).pipe(Effect.scoped))

    it.effect("past the bound (D52) the relay submits no veto: it says so at info and the proposal stays pending", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
        const token = chain.contracts.confidentialUsdg
        const signer: Address = "0x000000000000000000000000000000000000bEEF"
        // Two proposals of one signer: the guardian vetoes each, the relay submits each.
        for (let round = 0; round < 2; round++) {
          yield* proposeRotation(chain, token, signer)
          assert.isTrue(yield* clearedWithin50s(chain, token), `proposal ${round + 1} was not vetoed`)
        }
        yield* proposeRotation(chain, token, signer)
        const third = (yield* read(() =>
          chain.client.readContract({ address: token, abi: ConfidentialTokenArtifact.abi, functionName: "pendingGuardianRotation" })
        )).proposalId.toString()
        const said = (line: string) => line.includes("vetoes of this signer are used up") && line.includes(`"proposal_id":"${third}"`)
        yield* Effect.suspend(() => server.logs.some(said) ? Effect.void : Effect.fail("not yet" as const)).pipe(
          Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo({ duration: "40 seconds" }))),
          Effect.orDie
        )
        // Rounds later (one a second here) still pending, nothing relayed for it, and said once only.
        yield* Effect.sleep("4 seconds")
        assert.strictEqual(yield* pendingSigner(chain, token), signer)
        const relayed = server.logs.filter((line) => line.includes("relayed the guardian's veto") && line.includes(`"proposal_id":"${third}"`))
        assert.deepStrictEqual(relayed, [])
        assert.strictEqual(server.logs.filter(said).length, 1)
      }), 150_000)
  })
})
