/**
 * The guardian vetoes rotations it was not told to accept, on anvil with the real
 * ConfidentialToken: the owner proposes to replace it by an unapproved signer, the
 * follower signs the cancellation and lists it in `Health` (and logs it); relaying that
 * signature with `pnpm guardian cancel-rotation` (the real entry point, as a process)
 * cancels the proposal, so executing after the delay reverts. A proposal to a signer in
 * GUARDIAN_APPROVED_ROTATIONS is let through, and its execution after the delay succeeds:
 * the contrast shows the first execution failed because of the veto, not the clock.
 *
 * The follower loop is off: `sync` on the proposal's transaction runs the step that must
 * have seen it, so "no veto" is an answer and not a race.
 */
import { execFile } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { childEnvironment, childNodeFlags } from "../../../scripts/childEnvironment.ts"
import { promisify } from "node:util"
import { assert, describe, layer } from "@effect/vitest"
import { Anvil, ConfidentialTokenArtifact, Deploy } from "@pps/contracts"
import { Context, Effect, Layer, Redacted } from "effect"
import {
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  type Hex,
  http,
  parseEther,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { GuardianKeys } from "../src/index.ts"
import { makeTarget, TestGuardian, testSecret } from "./support/targets.ts"

const chainId = BigInt(Anvil.testnetChainId)
const delaySeconds = 30n
const mainEntry = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src/main.ts")
/** A signer the guardian's operator agreed to hand over to. */
const approvedSigner = privateKeyToAccount(generatePrivateKey()).address
const unapprovedSigner = privateKeyToAccount(generatePrivateKey()).address

const setup = Effect.acquireRelease(
  Effect.promise(async () => {
    const anvil = await Anvil.start({ blockTimeSeconds: 0.1 })
    const chain = defineChain({
      id: anvil.chainId,
      name: "anvil",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [anvil.rpcUrl] } }
    })
    const transport = http(anvil.rpcUrl)
    const client = createPublicClient({ chain, transport, pollingInterval: 20 })
    const testClient = createTestClient({ mode: "anvil", transport })
    const fundedKey = async () => {
      const key = generatePrivateKey()
      await testClient.setBalance({ address: privateKeyToAccount(key).address, value: parseEther("100") })
      return key
    }
    const owner = privateKeyToAccount(await fundedKey())
    // The guardian operator's own funded key: neither the owner nor any api-tier relayer.
    const relayKey = await fundedKey()
    const guardianInfo = GuardianKeys.fromSecret(Redacted.value(testSecret)).info
    const addresses = await Deploy.deploy({
      client,
      deployer: owner,
      owner: owner.address,
      guardianSigner: guardianInfo.signer,
      guardianEncryptionKey: guardianInfo.encryptionKeyCoordinates,
      guardianRotationDelaySeconds: delaySeconds,
      receiptPollingMs: 20
    })
    const contract: Address = addresses.confidentialUsdg
    const abi = ConfidentialTokenArtifact.abi
    const ownerWallet = createWalletClient({ account: owner, chain, transport })
    const mined = async (hash: Hex) => {
      const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 20 })
      if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`)
      return hash
    }
    const propose = (newSigner: Address) =>
      ownerWallet.sendTransaction({
        to: contract,
        data: encodeFunctionData({ abi, functionName: "proposeGuardianRotation", args: [newSigner, guardianInfo.encryptionKeyCoordinates] }),
        gas: 500_000n
      }).then(mined)
    const pending = () => client.readContract({ address: contract, abi, functionName: "pendingGuardianRotation" })
    const passDelay = async () => {
      await testClient.increaseTime({ seconds: Number(delaySeconds) + 1 })
      await testClient.mine({ blocks: 1 })
    }
    /** Executes the pending rotation as a stranger; answers the revert's error name, or "executed". */
    const execute = () =>
      client.simulateContract({ account: owner, address: contract, abi, functionName: "executeGuardianRotation" }).then(
        async ({ request }) => {
          await ownerWallet.writeContract(request).then(mined)
          return "executed"
        },
        (error: unknown) => {
          const name = error instanceof Error ? /NoGuardianRotationPending|GuardianRotationNotReady/.exec(error.message)?.[0] : undefined
          if (name === undefined) throw error
          return name
        }
      )
    const guardianSigner = () => client.readContract({ address: contract, abi, functionName: "guardianSigner" })
    return { anvil, contract, relayKey, propose, pending, passDelay, execute, guardianSigner }
  }),
  ({ anvil }) => Effect.promise(() => anvil.stop())
)

class ChainFixture extends Context.Service<ChainFixture, Effect.Success<typeof setup>>()("test/RotationChainFixture") {}

/** `pnpm guardian cancel-rotation`, as the operator runs it (the key in the environment only). */
const relayVeto = (rpcUrl: string, relayKey: Hex, contract: string, signature: string) =>
  Effect.promise(() =>
    promisify(execFile)(
      process.execPath,
      [...childNodeFlags(), mainEntry, "cancel-rotation", "--rpc-url", rpcUrl, "--contract", contract, "--signature", signature],
      { env: { ...childEnvironment(), HOME: process.env.HOME ?? "", RELAY_PRIVATE_KEY: relayKey, LOG_LEVEL: "Warn" }, timeout: 60_000 }
    )
  )

describe("guardian rotation veto", () => {
  layer(
    Layer.unwrap(Effect.gen(function*() {
      const chain = yield* setup
      return Layer.merge(
        makeTarget("in-process/pglite", {
          chains: [{ chainId, rpcUrl: chain.anvil.rpcUrl }],
          timing: { chainPollIntervalMs: 0 },
          approvedRotations: [approvedSigner]
        }),
        Layer.succeed(ChainFixture, chain)
      )
    })),
    { timeout: "180 seconds", excludeTestServices: true }
  )("anvil", (it) => {
    it.effect("vetoes an unapproved rotation; the relayed veto cancels it; an approved one goes through", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract = chain.contract.toLowerCase()

        // An unapproved proposal: the follower signs the cancellation and lists it.
        const proposed = yield* Effect.promise(() => chain.propose(unapprovedSigner))
        assert.deepStrictEqual(yield* guardian.client.sync({ chainId, txHash: proposed }), { status: "synced" })
        const firstPending = yield* Effect.promise(() => chain.pending())
        assert.strictEqual(firstPending.newSigner, unapprovedSigner)
        const health = yield* guardian.client.health
        const vetoes = health.alerts.filter((alert) => alert.kind === "guardian_rotation_vetoed")
        assert.strictEqual(vetoes.length, 1)
        const [alert] = vetoes
        assert.strictEqual(alert?.contract, contract)
        assert.strictEqual(alert?.account, unapprovedSigner.toLowerCase())
        assert.strictEqual(alert?.veto?.proposalId, firstPending.proposalId)
        assert.strictEqual(alert?.veto?.newSigner, unapprovedSigner.toLowerCase())
        const signature = alert?.veto?.signature ?? assert.fail("the alert carries no veto")
        const rows = yield* guardian.sql<{ readonly proposal_id: string; readonly new_signer: string; readonly signature: string }>`
          SELECT proposal_id, new_signer, signature FROM guardian_rotation_vetoes WHERE contract = ${contract}`.pipe(Effect.orDie)
        assert.deepStrictEqual(rows, [{ proposal_id: firstPending.proposalId.toString(), new_signer: unapprovedSigner.toLowerCase(), signature }])
        // An error-level alert line naming the proposal and the signer.
        assert.isTrue(guardian.logs.some((line) =>
          line.includes("guardian alert") && line.includes("guardian_rotation_vetoed") && line.includes(`"level":"ERROR"`) &&
          line.includes(unapprovedSigner.toLowerCase()) && line.includes(`rotation ${firstPending.proposalId} `)
        ))

        // Relayed from the operator's own key, the veto cancels the proposal; execution after the delay reverts.
        yield* relayVeto(chain.anvil.rpcUrl, chain.relayKey, chain.contract, signature)
        assert.strictEqual((yield* Effect.promise(() => chain.pending())).newSigner, zeroAddress)
        yield* Effect.promise(() => chain.passDelay())
        assert.strictEqual(yield* Effect.promise(() => chain.execute()), "NoGuardianRotationPending")

        // A proposal to an approved signer: no veto, and it executes after the delay.
        const approved = yield* Effect.promise(() => chain.propose(approvedSigner))
        assert.deepStrictEqual(yield* guardian.client.sync({ chainId, txHash: approved }), { status: "synced" })
        const after = yield* guardian.client.health
        assert.strictEqual(after.alertCount, health.alertCount)
        assert.isFalse(after.alerts.some((alert) => alert.account === approvedSigner.toLowerCase()))
        const vetoRows = yield* guardian.sql<{ readonly count: string }>`
          SELECT count(*)::text AS count FROM guardian_rotation_vetoes`.pipe(Effect.orDie)
        assert.strictEqual(vetoRows[0]?.count, "1")
        assert.strictEqual(yield* Effect.promise(() => chain.execute()), "GuardianRotationNotReady")
        yield* Effect.promise(() => chain.passDelay())
        assert.strictEqual(yield* Effect.promise(() => chain.execute()), "executed")
        assert.strictEqual(yield* Effect.promise(() => chain.guardianSigner()), approvedSigner)
      }))
  })
})
