/**
 * The api tier relays the guardian's rotation vetoes (docs/contracts.md, "Guardian
 * rotation"): the guardian signs the cancellation of a rotation its operator did not
 * approve but sends no transactions, so every api node reads the proposal pending on each of
 * its own token contracts, asks the guardian for its veto of that very proposal
 * (`RotationVeto`), and submits it through its relayers while the proposal is pending.
 *
 * This is a convenience, not the safeguard: an api tier that colludes with the owner need
 * not relay, which is why the guardian's operator can relay the same signature from any
 * funded key (`pnpm guardian cancel-rotation`). The submission id is the proposal's, so
 * every node and every round submits a veto at most once (Settlement), and a proposal
 * already cancelled or executed is left alone.
 *
 * D52 bounds the vetoes: a guardian may veto proposals of the same new signer
 * `MAX_GUARDIAN_VETOES_PER_SIGNER` times. The relay reads the contract's count first and submits
 * nothing past the bound (the call could only revert and spend gas); it says once, at info, that
 * the proposal will execute after its delay, which is the bound working as designed.
 *
 * @since 0.3.0
 */
import { GuardianClient } from "@pps/guardian"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { Cause, Duration, Effect, Layer, Option, Schedule } from "effect"
import { type Address, encodeFunctionData, getAddress, type Hex } from "viem"
import { AppConfig } from "../config/AppConfig.ts"
import { gasLimits } from "../settlement/domain.ts"
import type { ChainContext } from "../settlement/Chains.ts"
import { Settlement } from "../settlement/Settlement.ts"

/**
 * Whether the contract's current guardian has used its vetoes of proposals naming `newSigner`
 * (D52): a veto submitted now would revert with `GuardianVetoesExhausted`.
 */
const vetoesExhausted = (chain: ChainContext, contract: Address, newSigner: Address) =>
  Effect.tryPromise(async () => {
    const token = { address: contract, abi: ConfidentialTokenArtifact.abi } as const
    const [signer, vetoesMax] = await Promise.all([
      chain.client.readContract({ ...token, functionName: "guardianSigner" }),
      chain.client.readContract({ ...token, functionName: "MAX_GUARDIAN_VETOES_PER_SIGNER" })
    ])
    const used = await chain.client.readContract({ ...token, functionName: "guardianVetoesUsed", args: [signer, newSigner] })
    return used >= vetoesMax
  })

/**
 * @since 0.3.0
 * @category layers
 */
export const VetoRelayLive = Layer.effectDiscard(Effect.gen(function*() {
  const guardian = yield* GuardianClient.GuardianClient
  const settlement = yield* Settlement
  // How often pending proposals are looked at: far inside any rotation delay (48 h on mainnet).
  const { vetoRelayIntervalMs } = yield* AppConfig
  /** Proposals already said to be past the bound, so the log says it once per proposal and node. */
  const exhaustedSaid = new Set<string>()

  // Our own contracts only, each asked for the very proposal it holds: a contract anyone can
  // deploy, or a flood of alerts, neither costs the relayers gas nor hides a veto from the relay.
  const relayOne = (chain: ChainContext, contract: Address) =>
    Effect.gen(function*() {
      const pending = yield* Effect.tryPromise(() =>
        chain.client.readContract({
          address: contract,
          abi: ConfidentialTokenArtifact.abi,
          functionName: "pendingGuardianRotation"
        })
      )
      if (pending.newSigner === "0x0000000000000000000000000000000000000000") return
      if (yield* vetoesExhausted(chain, contract, pending.newSigner)) {
        const key = `${chain.chainId}_${getAddress(contract)}_${pending.proposalId}`
        if (exhaustedSaid.has(key)) return
        exhaustedSaid.add(key)
        return yield* Effect.logInfo(
          "the guardian's vetoes of this signer are used up (D52): the proposal executes after its delay unless the owner cancels it"
        ).pipe(Effect.annotateLogs({
          contract,
          proposal_id: pending.proposalId.toString(),
          new_signer: pending.newSigner,
          executable_at: pending.executableAt.toString()
        }))
      }
      const veto = yield* guardian.rotationVeto({
        chainId: BigInt(chain.chainId),
        contract,
        proposalId: pending.proposalId
      })
      // Not vetoed (an approved signer), or not seen by the guardian's follower yet: next round.
      if (veto === null) return
      yield* settlement.submit({
        submissionId: `veto_${chain.chainId}_${getAddress(contract)}_${veto.proposalId}`,
        mode: chain.mode,
        kind: "rotation_veto",
        target: contract,
        data: encodeFunctionData({
          abi: ConfidentialTokenArtifact.abi,
          functionName: "cancelGuardianRotationBySignature",
          args: [veto.signature as Hex]
        }),
        gasLimit: gasLimits.rotation_veto,
        deadlineSeconds: null,
        replayKey: null
      })
      yield* Effect.logWarning("relayed the guardian's veto of a guardian rotation").pipe(
        Effect.annotateLogs({ contract, proposal_id: veto.proposalId.toString(), new_signer: veto.newSigner })
      )
    }).pipe(
      // One contract's failure (its chain's node down, the guardian unreachable for it) is
      // that contract's only: the other contracts and the other mode's chain are still
      // looked at this round, so an outage of the test chain never holds back a mainnet
      // veto. Interruption (shutdown) is not a failure to swallow. Ids only in the log:
      // nothing on this path carries an amount.
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.logWarning("relaying the guardian's veto failed for one contract; will retry", cause).pipe(
          Effect.annotateLogs({ mode: chain.mode, chain_id: chain.chainId, contract })
        ))
    )

  const relayRound = Effect.gen(function*() {
    for (const mode of ["test", "live"] as const) {
      const chain = settlement.chain(mode)
      if (Option.isNone(chain)) continue
      for (const contract of [chain.value.contracts.confidentialUsdg, chain.value.contracts.confidentialEth]) {
        yield* relayOne(chain.value, contract)
      }
    }
  })

  yield* Effect.forkScoped(
    relayRound.pipe(
      // A defect outside any one contract's step (none expected): the next round still runs.
      Effect.catchCause((cause) => Effect.logWarning("relaying the guardian's vetoes failed; will retry", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(vetoRelayIntervalMs)))
    )
  )
}))
