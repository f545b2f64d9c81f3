/** Rotation vetoes: the guardian's signed vetoes of proposals to replace it (docs/guardian.md, "Rotation vetoes"). */
import { Effect } from "effect"
import type { StoreContext } from "./context.ts"
import type { RotationVetoRow } from "./rows.ts"

/** Records a veto; false when this proposal was vetoed already (a re-read log). */
export const insertRotationVeto = ({ sql }: StoreContext, veto: RotationVetoRow, nowMs: number) =>
  sql<{ readonly proposal_id: string }>`
    INSERT INTO guardian_rotation_vetoes (chain_id, contract, proposal_id, new_signer, executable_at, tx_hash, block_number,
      signature, seen_at_ms)
    VALUES (${veto.chainId}, ${veto.contract}, ${veto.proposalId.toString()}, ${veto.newSigner},
      ${veto.executableAt.toString()}::bigint, ${veto.txHash}, ${veto.blockNumber.toString()}::bigint, ${veto.signature},
      ${String(nowMs)}::bigint)
    ON CONFLICT DO NOTHING
    RETURNING proposal_id`.pipe(Effect.map((rows) => rows.length === 1))

/** The veto of one proposal, if the guardian made one. */
export const rotationVetoOf = ({ sql }: StoreContext, chainId: string, contract: string, proposalId: bigint) =>
  sql<{ readonly proposal_id: string; readonly new_signer: string; readonly executable_at: string; readonly signature: string }>`
    SELECT proposal_id, new_signer, executable_at::text AS executable_at, signature
    FROM guardian_rotation_vetoes
    WHERE chain_id = ${chainId} AND contract = ${contract.toLowerCase()} AND proposal_id = ${proposalId.toString()}`.pipe(
    Effect.map((rows) => {
      const row = rows[0]
      return row === undefined ? undefined : {
        proposalId: BigInt(row.proposal_id),
        newSigner: row.new_signer,
        executableAt: BigInt(row.executable_at),
        signature: row.signature
      }
    })
  )

/** The latest veto of a proposal to `newSigner` on this contract (what its alert carries). */
export const latestRotationVeto = ({ sql }: StoreContext, chainId: string, contract: string, newSigner: string) =>
  sql<{
    readonly proposal_id: string
    readonly new_signer: string
    readonly executable_at: string
    readonly tx_hash: string
    readonly block_number: string
    readonly signature: string
  }>`
    SELECT proposal_id, new_signer, executable_at::text AS executable_at, tx_hash, block_number::text AS block_number, signature
    FROM guardian_rotation_vetoes
    WHERE chain_id = ${chainId} AND contract = ${contract} AND new_signer = ${newSigner}
    ORDER BY proposal_id::numeric DESC LIMIT 1`.pipe(
    Effect.map((rows) => {
      const row = rows[0]
      return row === undefined ? undefined : {
        chainId,
        contract,
        proposalId: BigInt(row.proposal_id),
        newSigner: row.new_signer,
        executableAt: BigInt(row.executable_at),
        txHash: row.tx_hash,
        blockNumber: BigInt(row.block_number),
        signature: row.signature
      } satisfies RotationVetoRow
    })
  )
