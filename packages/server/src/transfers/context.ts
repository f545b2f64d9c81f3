/**
 * What every step of a transfer works with (`TransfersContext`): the services the steps call and
 * the state they share across requests (completions under way, the batched record and end
 * statements). The layer (`Transfers.layer`) builds it once with `makeTransfersContext`; each step
 * is a top-level function over it, in a module named for the step. Also the two records that
 * travel between steps: the resolved `Recipient` and the sealed `PreparedTransfer`.
 *
 * @since 0.1.0
 */
import { Domain as GuardianDomain, GuardianClient } from "@pps/guardian"
import * as KeyedActors from "@pps/platform/KeyedActors"
import type { Note } from "@pps/crypto"
import { Effect, type Option, Redacted, type RequestResolver, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import type { Address, Hex } from "viem"
import type { Account } from "@pps/api/Accounts"
import type { Mode } from "@pps/api/ApiKeys"
import type { Asset } from "@pps/api/Transfers"
import { Accounts } from "../accounts/Accounts.ts"
import { EncryptionKeys } from "../accounts/EncryptionKeys.ts"
import { AgentStore } from "../agents/AgentStore.ts"
import { AgentTransactionStore } from "../agents/AgentTransactionStore.ts"
import { AppConfig, type AppConfigShape } from "../config/AppConfig.ts"
import { Outbox } from "../events/Outbox.ts"
import { OperationReplay } from "../platform/IdempotentOperations.ts"
import { Lanes } from "../platform/Lanes.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import { Secrets } from "../platform/Secrets.ts"
import { sharedStatements } from "../platform/SharedStatements.ts"
import { GuardianIdentity } from "../settlement/GuardianIdentity.ts"
import { Settlement } from "../settlement/Settlement.ts"
import { answerEnded, type Completion, completionBatchMax, EndTransfer, endInOneTransaction } from "./complete.ts"
import { preparationKey } from "./preparation.ts"
import { answerRecorded, RecordTransfer, recordBatchMax, recordInOneTransaction } from "./record.ts"
import { type DecideError, type Decided, type SenderMail, senderTurn } from "./senderTurn.ts"
import { TransferSealer } from "./TransferSealer.ts"
import { TransferStore } from "./TransferStore.ts"

/**
 * The services and shared state of the transfer steps.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransfersContext {
  readonly config: AppConfigShape
  readonly sql: SqlClient.SqlClient
  readonly store: typeof TransferStore.Service
  readonly accounts: typeof Accounts.Service
  readonly keys: typeof EncryptionKeys.Service
  readonly settlement: typeof Settlement.Service
  readonly guardian: typeof GuardianClient.GuardianClient.Service
  readonly guardianIdentity: typeof GuardianIdentity.Service
  readonly outbox: typeof Outbox.Service
  /** A sender's turns (the sender's lane) and a prepared transfer's. */
  readonly lanes: typeof Lanes.Service
  /** The senders' actors (senderTurn.ts, D73): a sender's new transfers, decided in its turns. */
  readonly senders: KeyedActors.KeyedActors<SenderMail, Decided, DecideError>
  /**
   * When a turn's guardian call last went unanswered (Clock ms; 0: never): creates sent
   * before that are answered 503 at their turn without a call of their own (senderTurn.ts).
   */
  readonly guardianUnanswered: { sinceMs: number }
  readonly agentStore: typeof AgentStore.Service
  readonly heldStore: typeof AgentTransactionStore.Service
  readonly secretBox: typeof SecretBox.Service
  readonly sealer: typeof TransferSealer.Service
  readonly operations: typeof OperationReplay.Service
  /** The layer's scope, for work nobody waits for (interrupted when the server stops). */
  readonly scope: Scope.Scope
  /** The key of prepared transfers' tokens (preparation.ts). */
  readonly preparationSecret: Uint8Array
  /** Completions under way or just done, by transfer id (complete.ts). */
  readonly completions: Map<string, Completion>
  /** The end step's shared statements (complete.ts). */
  readonly endTransfers: RequestResolver.RequestResolver<EndTransfer>
  /** The record step's shared statements (record.ts). */
  readonly recordTransfers: RequestResolver.RequestResolver<RecordTransfer>
}

/**
 * Builds the steps' context from the layer's services, in the layer's scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeTransfersContext = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const context: TransfersContext = {
    config: yield* AppConfig,
    sql,
    store: yield* TransferStore,
    accounts: yield* Accounts,
    keys: yield* EncryptionKeys,
    settlement: yield* Settlement,
    guardian: yield* GuardianClient.GuardianClient,
    guardianIdentity: yield* GuardianIdentity,
    outbox: yield* Outbox,
    lanes: yield* Lanes,
    // The turn reads `context` when it runs, after this object is built.
    guardianUnanswered: { sinceMs: 0 },
    senders: yield* KeyedActors.make<SenderMail, Decided, DecideError>((sender, mail) => senderTurn(context)(sender, mail), GuardianDomain.authorizeManyMax),
    agentStore: yield* AgentStore,
    heldStore: yield* AgentTransactionStore,
    secretBox: yield* SecretBox,
    sealer: yield* TransferSealer,
    operations: yield* OperationReplay,
    scope: yield* Effect.scope,
    preparationSecret: preparationKey(Redacted.value((yield* Secrets).apiKeyPepper)),
    completions: new Map(),
    // The batch bounds a transaction's length, its row locks and the statement shapes it prepares.
    endTransfers: sharedStatements(sql, (entries) => endInOneTransaction(context, entries), answerEnded, completionBatchMax),
    recordTransfers: sharedStatements(sql, (entries) => recordInOneTransaction(context, entries), answerRecorded, recordBatchMax)
  }
  return context
})

/**
 * The recipient as resolved: one of our accounts, or an outside address.
 *
 * @since 0.1.0
 * @category models
 */
export interface Recipient {
  readonly account: Account | null
  readonly address: Address
  readonly display: string
  /** The key its balance is encrypted to (for an agent, its owner's), when registered. */
  readonly key: Option.Option<Uint8Array>
}

/**
 * A transfer once sealed: everything the guardian request, the calldata and the
 * transfer row need. No plaintext, except a standard transfer's public amount.
 *
 * @since 0.1.0
 * @category models
 */
export interface PreparedTransfer {
  readonly transferId: string
  readonly bindingId: Hex
  readonly mode: Mode
  readonly chainId: number
  readonly contract: Address
  readonly sender: Account
  readonly senderAddress: Address
  readonly recipient: { readonly account: Account | null; readonly address: Address; readonly display: string }
  readonly asset: Asset
  readonly confidential: boolean
  readonly apiKeyId: string
  readonly nonce: bigint
  /** The key the sender's balance is encrypted to (an agent's owner's). */
  readonly fromKey: Uint8Array
  /** The recipient's registered key; null for a standard transfer to an address without one. */
  readonly toKey: Uint8Array | null
  readonly boxes: Note.TransferBoxes
  readonly sealedDigest: Hex
  /** Standard transfers only: the amount paid out in clear on chain. */
  readonly publicAmount: bigint | null
  /**
   * The client sealed the boxes (the sealed form): a guardian box that does not open, or
   * holds 0, is the client's mistake (400), not ours.
   */
  readonly clientSealed: boolean
  /** A refund's original (D43): the transfer it sends back, which the guardian checks it against. */
  readonly refundOf: string | null
}
