/**
 * The guardian's explicit context: the services and the state that its steps (the decision
 * path, settlement and expiry, the chain follower, reconciliation, the read-only queries) work
 * over. The layer (Guardian.ts) builds it once and its methods are thin calls
 * `step(context, request)`, so a step is a top-level function a reader can find by its module's
 * name, and says in its signature what it uses (Svix's `WorkerContext`).
 *
 * Everything here is built once per guardian: a step reads fields, it never looks a service up
 * per call (the decision path is the system's serialization point).
 *
 * @since 0.5.0
 */
import type { Semaphore } from "effect"
import type { SqlClient } from "effect/sql"
import type { Address } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import type { ChainReaderShape } from "../ChainReader.ts"
import type { Timing } from "../Guardian.ts"
import type { GuardianKeys } from "../GuardianKeys.ts"
import type { AccountLane } from "../internal/accountLane.ts"
import type { GroupCommit } from "../internal/groupCommit.ts"
import type { AccountRef, ReservationRow, RotationHold, RowHints, Store } from "../internal/store.ts"
import type { PartyKeyCache } from "./PartyKeys.ts"

/**
 * @since 0.5.0
 * @category models
 */
export interface GuardianContext {
  readonly keys: GuardianKeys
  readonly timing: Timing
  readonly sql: SqlClient.SqlClient
  readonly chain: ChainReaderShape
  readonly store: Store
  /** Decisions, settlements and booked credits run through it (internal/groupCommit.ts). */
  readonly group: GroupCommit<RowHints>
  /** Serializes, per account, the writers that run outside the group committer. */
  readonly accountLane: AccountLane
  /** Keys known for good and key lookups under way (PartyKeys.ts). */
  readonly partyKeys: PartyKeyCache
  /**
   * D55: accounts whose key rotation is attested, by `refKey`, with the instant (ms) the hold lasts
   * until and the latest attestation it took: no transfer to or from them is attested until that
   * attestation is mined, or reported failed and shown dead on chain, or past its deadline plus
   * margin. The in-memory copy of `guardian_key_rotation_holds`, read back at start-up (KeyRotation.ts).
   */
  readonly rotationsPending: Map<string, RotationHold>
  /** One follower step at a time per chain (the loop and `sync` share it). */
  readonly followLocks: ReadonlyMap<bigint, Semaphore.Semaphore>
  /** The guardian's signer, whose appointments the follower looks for. */
  readonly signer: Address
  /** Signs rotation vetoes (the same key as `keys.signer`, as a viem account). */
  readonly signerAccount: PrivateKeyAccount
  /** GUARDIAN_APPROVED_ROTATIONS, lower-case: the signers a rotation may hand over to unvetoed. */
  readonly approvedRotations: ReadonlySet<string>
}

/**
 * A balance's identity as the store keys it: decimal chain id, lower-case addresses.
 *
 * @since 0.5.0
 * @category constructors
 */
export const refFor = (chainId: bigint, contract: string, account: string): AccountRef => ({
  chainId: chainId.toString(),
  contract: contract.toLowerCase(),
  account: account.toLowerCase()
})

/**
 * The account a reservation debits.
 *
 * @since 0.5.0
 * @category constructors
 */
export const senderOf = (reservation: ReservationRow): AccountRef => ({
  chainId: reservation.chainId,
  contract: reservation.contract,
  account: reservation.fromAccount
})
