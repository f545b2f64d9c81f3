/**
 * `pnpm guardian cancel-rotation`: submits the guardian's signed veto of a rotation
 * proposal (`cancelGuardianRotationBySignature`) from any funded key of the guardian's
 * operator, straight to a chain endpoint. The guardian itself sends nothing (its signer
 * holds no ether), and the api tier's relayers cannot be relied on when its operator is
 * the one proposing, so the guardian's operator needs a path that depends on neither.
 *
 *   RELAY_PRIVATE_KEY=0x… pnpm guardian cancel-rotation \
 *     --rpc-url http://… --contract 0x… --signature 0x…
 *
 * `--contract` and `--signature` come from the `guardian_rotation_vetoed` alert (the
 * `Health` RPC's `veto`, or the guardian's error log). The signature covers one proposal
 * id: it cancels that proposal and nothing later.
 *
 * @since 0.3.0
 */
import { parseArgs } from "node:util"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { Config, Data, Effect, Redacted } from "effect"
import { createPublicClient, createWalletClient, getAddress, type Hex, http, isAddress, isHex, zeroAddress } from "viem"
import { privateKeyToAccount } from "viem/accounts"

/**
 * Why the veto was not submitted (or did not take).
 *
 * @since 0.3.0
 * @category errors
 */
export class CancelRotationError extends Data.TaggedError("CancelRotationError")<{ readonly message: string }> {}

const usage = "usage: RELAY_PRIVATE_KEY=0x… pnpm guardian cancel-rotation --rpc-url <url> --contract <0x…> --signature <0x…>"

const failure = (what: string) => (cause: unknown) =>
  new CancelRotationError({ message: `${what}: ${cause instanceof Error ? cause.message.split("\n")[0] : String(cause)}` })

/**
 * Parses the arguments, submits the veto and waits for its receipt; answers the
 * transaction hash of the cancellation.
 *
 * @since 0.3.0
 * @category constructors
 */
export const run = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { values } = yield* Effect.try({
      try: () =>
        parseArgs({
          args: [...argv],
          options: { "rpc-url": { type: "string" }, contract: { type: "string" }, signature: { type: "string" } },
          strict: true
        }),
      catch: failure(usage)
    })
    const rpcUrl = values["rpc-url"]
    const contract = values.contract
    const signature = values.signature
    if (rpcUrl === undefined || contract === undefined || !isAddress(contract, { strict: false }) || signature === undefined || !isHex(signature)) {
      return yield* new CancelRotationError({ message: usage })
    }
    // From the environment, never the command line: argv is visible to every local user.
    const key = yield* Config.Redacted("RELAY_PRIVATE_KEY").pipe(Effect.mapError(failure("RELAY_PRIVATE_KEY")))
    const relayer = yield* Effect.try({ try: () => privateKeyToAccount(Redacted.value(key) as Hex), catch: failure("RELAY_PRIVATE_KEY") })
    const transport = http(rpcUrl)
    const client = createPublicClient({ transport })
    const address = getAddress(contract)
    const abi = ConfidentialTokenArtifact.abi
    const pending = yield* Effect.tryPromise({
      try: () => client.readContract({ address, abi, functionName: "pendingGuardianRotation" }),
      catch: failure("reading pendingGuardianRotation")
    })
    // Said plainly rather than as the contract's revert: the proposal was executed, cancelled or never existed.
    if (pending.newSigner === zeroAddress) {
      return yield* new CancelRotationError({ message: `no rotation is pending on ${address}: nothing to cancel` })
    }
    const chain = yield* Effect.tryPromise({ try: () => client.getChainId(), catch: failure("reading the chain id") })
    const wallet = createWalletClient({ account: relayer, transport })
    // writeContract simulates first: a signature for another proposal or signer fails here, before any gas is spent.
    const hash = yield* Effect.tryPromise({
      try: () =>
        wallet.writeContract({
          address,
          abi,
          functionName: "cancelGuardianRotationBySignature",
          args: [signature],
          chain: { id: chain, name: "target", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } }
        }),
      catch: failure("submitting cancelGuardianRotationBySignature")
    })
    const receipt = yield* Effect.tryPromise({
      try: () => client.waitForTransactionReceipt({ hash }),
      catch: failure(`waiting for ${hash}`)
    })
    if (receipt.status !== "success") return yield* new CancelRotationError({ message: `${hash} reverted` })
    yield* Effect.logWarning("guardian rotation cancelled by the guardian's veto").pipe(
      Effect.annotateLogs({ contract: address.toLowerCase(), proposal_id: pending.proposalId.toString(), new_signer: pending.newSigner.toLowerCase(), tx_hash: hash })
    )
    return hash
  })
