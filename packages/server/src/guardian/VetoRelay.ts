/**
 * The api tier relays the guardian's rotation vetoes (docs/contracts.md, "Guardian
 * rotation"): the guardian signs the cancellation of a rotation its operator did not
 * approve but sends no transactions, so every api node looks at the guardian's alerts and
 * submits each veto through its relayers while its proposal is still pending.
 *
 * This is a convenience, not the safeguard: an api tier that colludes with the owner need
 * not relay, which is why the guardian's operator can relay the same signature from any
 * funded key (`pnpm guardian cancel-rotation`). The submission id is the proposal's, so
 * every node and every round submits a veto at most once (Settlement), and a proposal
 * already cancelled or executed is left alone.
 *
 * @since 0.3.0
 */
import { GuardianClient } from "@pps/guardian"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { Duration, Effect, Layer, Option, Schedule } from "effect"
import { encodeFunctionData, getAddress, type Hex } from "viem"
import { chainIdOfMode } from "../apikeys/domain.ts"
import { gasLimits } from "../settlement/domain.ts"
import { Settlement } from "../settlement/Settlement.ts"

/** How often the guardian's alerts are read: far inside any rotation delay (48 h on mainnet). */
const relayEveryMs = 15_000

/**
 * @since 0.3.0
 * @category layers
 */
export const VetoRelayLive = Layer.effectDiscard(Effect.gen(function*() {
  const guardian = yield* GuardianClient.GuardianClient
  const settlement = yield* Settlement

  const relayRound = Effect.gen(function*() {
    const health = yield* guardian.health
    for (const alert of health.alerts) {
      if (alert.kind !== "guardian_rotation_vetoed" || alert.veto === undefined) continue
      const mode = Number(alert.chainId) === chainIdOfMode.test ? "test" as const : "live" as const
      const chain = settlement.chain(mode)
      if (Option.isNone(chain) || chain.value.chainId !== Number(alert.chainId)) continue
      const contract = getAddress(alert.contract)
      const pending = yield* Effect.tryPromise(() =>
        chain.value.client.readContract({
          address: contract,
          abi: ConfidentialTokenArtifact.abi,
          functionName: "pendingGuardianRotation"
        })
      )
      // Only the very proposal the guardian vetoed: never resend one already cancelled or executed.
      if (pending.newSigner === "0x0000000000000000000000000000000000000000" || pending.proposalId !== alert.veto.proposalId) {
        continue
      }
      yield* settlement.submit({
        submissionId: `veto_${alert.chainId}_${contract}_${alert.veto.proposalId}`,
        mode,
        kind: "rotation_veto",
        target: contract,
        data: encodeFunctionData({
          abi: ConfidentialTokenArtifact.abi,
          functionName: "cancelGuardianRotationBySignature",
          args: [alert.veto.signature as Hex]
        }),
        gasLimit: gasLimits.rotation_veto,
        deadlineSeconds: null,
        replayKey: null
      })
      yield* Effect.logWarning("relayed the guardian's veto of a guardian rotation").pipe(
        Effect.annotateLogs({ contract, proposal_id: alert.veto.proposalId.toString(), new_signer: alert.veto.newSigner })
      )
    }
  })

  yield* Effect.forkScoped(
    relayRound.pipe(
      Effect.catchCause((cause) => Effect.logWarning("relaying the guardian's vetoes failed; will retry", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(relayEveryMs)))
    )
  )
}))
