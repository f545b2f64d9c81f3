/**
 * Rotation vetoes: a proposal to replace this guardian's signer is let through when the
 * operator approved the new signer (GUARDIAN_APPROVED_ROTATIONS), and vetoed otherwise. Without
 * the veto the owner key alone would, after the delay, name a signer of its choosing, which can
 * then sign any debit.
 *
 * @since 0.5.0
 */
import { TypedData } from "@pps/contracts"
import { Effect } from "effect"
import type { RotationProposal } from "../ChainReader.ts"
import type { RotationVetoRequest, RotationVetoResult } from "../Domain.ts"
import * as Invariant from "../internal/Invariant.ts"
import type { RotationVetoRow } from "../internal/store.ts"
import { alert, isoOfMs } from "./Alerts.ts"
import { storage } from "./Failures.ts"
import type { GuardianContext } from "./GuardianContext.ts"

/** The guardian's signature of the cancellation of `proposal`. */
const signCancellation = (context: GuardianContext, chainId: bigint, proposal: RotationProposal) =>
  Effect.tryPromise(() =>
    context.signerAccount.signTypedData({
      domain: TypedData.domain(Number(chainId), proposal.contract),
      types: TypedData.cancelGuardianRotationTypes,
      primaryType: "CancelGuardianRotation",
      message: { proposalId: proposal.proposalId, newSigner: proposal.newSigner }
    })
  ).pipe(Invariant.orDie("the guardian's local signing key signs any well-formed typed data"))

/**
 * Vetoes `proposal` unless its signer is approved (then it is logged). The guardian sends
 * nothing (its signer holds no ether): it signs the cancellation, records it (so a restart
 * keeps it listed) and raises an alert that carries it, for anyone to relay.
 *
 * @since 0.5.0
 * @category steps
 */
export const vetoIfUnapproved = (context: GuardianContext, chainId: bigint, proposal: RotationProposal, nowMs: number) =>
  Effect.gen(function*() {
    const annotations = {
      chain_id: chainId.toString(),
      contract: proposal.contract.toLowerCase(),
      proposal_id: proposal.proposalId.toString(),
      new_signer: proposal.newSigner.toLowerCase(),
      tx_hash: proposal.txHash
    }
    if (context.approvedRotations.has(proposal.newSigner.toLowerCase())) {
      return yield* Effect.logWarning("guardian rotation proposed to an approved signer: not vetoed").pipe(
        Effect.annotateLogs(annotations)
      )
    }
    const veto: RotationVetoRow = {
      chainId: chainId.toString(),
      contract: proposal.contract.toLowerCase(),
      proposalId: proposal.proposalId,
      newSigner: proposal.newSigner.toLowerCase(),
      executableAt: proposal.executableAt,
      txHash: proposal.txHash.toLowerCase(),
      blockNumber: proposal.blockNumber,
      signature: yield* signCancellation(context, chainId, proposal)
    }
    const executableAt = isoOfMs(Number(proposal.executableAt) * 1000)
    yield* storage(context.sql.withTransaction(Effect.gen(function*() {
      if (!(yield* context.store.insertRotationVeto(veto, nowMs))) return
      yield* alert(
        context,
        { chainId: veto.chainId, contract: veto.contract, account: veto.newSigner },
        "guardian_rotation_vetoed",
        `rotation ${veto.proposalId} to an unapproved signer vetoed; relay the signed cancellation ` +
          `(its Health alert, or pnpm guardian cancel-rotation) before ${executableAt}`,
        nowMs
      )
    })))
  }).pipe(Effect.withSpan("Guardian.vetoRotation"))

/**
 * The signed cancellation of one rotation proposal, if the guardian vetoed it.
 *
 * @since 0.5.0
 * @category steps
 */
export const rotationVeto = Effect.fn("Guardian.rotationVeto")(function*(
  context: GuardianContext,
  request: typeof RotationVetoRequest.Type
) {
  const veto = yield* storage(context.store.rotationVetoOf(request.chainId.toString(), request.contract, request.proposalId))
  if (veto === undefined) return null
  return {
    proposalId: veto.proposalId,
    newSigner: veto.newSigner,
    executableAt: isoOfMs(Number(veto.executableAt) * 1000),
    signature: veto.signature
  } satisfies typeof RotationVetoResult.Type
})
