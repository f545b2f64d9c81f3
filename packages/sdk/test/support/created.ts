/**
 * The Transfer of a create that must not be held: a test that gets a held transaction
 * instead fails here, naming it.
 */
import type { PpsTypes } from "../../src/index.ts"

export const transferOf = (created: PpsTypes.CreatedTransfer): PpsTypes.Transfer => {
  if (created.kind !== "transfer") throw new Error(`expected a transfer, got held transaction ${created.held.transaction_id}`)
  return created.transfer
}
