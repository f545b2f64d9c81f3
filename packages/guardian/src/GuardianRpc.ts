/**
 * The guardian's RPC surface (effect/rpc): the contract shared by the guardian process
 * (`GuardianServer`) and its clients (`GuardianClient.layerHttp`). Every RPC can fail
 * with `GuardianError`; none returns an amount.
 *
 * | rpc | who calls it | answers |
 * |---|---|---|
 * | `Authorize` | server, per transfer (and per approval) | Authorized (ciphertext + signature) or a refusal |
 * | `Settle` | settlement, once the chain decided | the reservation's final status |
 * | `Credit` | tests and chain-free deployments only (a followed chain's credits come from its events) | applied / duplicate |
 * | `Sync` | the faucet, once its grant is mined | synced / pending / not_found |
 * | `NonZero` | balances endpoint without a proof (D19) | per asset, a boolean |
 * | `SealedBalance` | balances / client decryption | the balance sealed to the account's key |
 * | `RotationVeto` | the veto relay | the signed cancellation of one proposal, or null |
 * | `SealedKeyTotals` | per-key totals (D40) | each API key's confirmed total sealed to the account's key |
 * | `Reconcile` | operators, tests (the guardian also sweeps) | matched / mismatched |
 * | `Health` | readiness probes, operators | ready, frozen account count, open alerts |
 * | `Info` | deployment | signer address, encryption key |
 *
 * @since 0.1.0
 */
import { Duration, Schema } from "effect"
import { Rpc, RpcGroup, RpcSerialization } from "effect/rpc"
import {
  AccountKeyMismatch,
  AuthorizeManyRequest,
  AuthorizeManyResult,
  AuthorizeRequest,
  AuthorizeResult,
  CreditIdReused,
  CreditRefused,
  CreditRequest,
  CreditResult,
  ForgetKeyRequest,
  GuardianError,
  HealthResult,
  InfoResult,
  KeyRotationBusy,
  KeyRotationNotNeeded,
  KeyRotationRequest,
  KeyRotationResult,
  NonZeroRequest,
  NonZeroResult,
  ReconcileRequest,
  ReconcileResult,
  ReservationNotFound,
  RotationVetoRequest,
  RotationVetoResult,
  SealedBalanceRequest,
  SealedBalanceResult,
  SealedKeyTotalsResult,
  SettleRequest,
  SettleResult,
  SyncRequest,
  SyncResult
} from "./Domain.ts"

/**
 * @since 0.1.0
 * @category rpcs
 */
export class GuardianRpcs extends RpcGroup.make(
  Rpc.make("Authorize", { payload: AuthorizeRequest, success: AuthorizeResult, error: GuardianError }),
  Rpc.make("AuthorizeMany", { payload: AuthorizeManyRequest, success: AuthorizeManyResult, error: GuardianError }),
  Rpc.make("Settle", { payload: SettleRequest, success: SettleResult, error: Schema.Union([ReservationNotFound, GuardianError]) }),
  Rpc.make("Credit", { payload: CreditRequest, success: CreditResult, error: Schema.Union([CreditIdReused, CreditRefused, GuardianError]) }),
  Rpc.make("Sync", { payload: SyncRequest, success: SyncResult, error: GuardianError }),
  Rpc.make("NonZero", { payload: NonZeroRequest, success: NonZeroResult, error: GuardianError }),
  Rpc.make("SealedBalance", {
    payload: SealedBalanceRequest,
    success: SealedBalanceResult,
    error: Schema.Union([AccountKeyMismatch, GuardianError])
  }),
  Rpc.make("SealedKeyTotals", {
    payload: SealedBalanceRequest,
    success: SealedKeyTotalsResult,
    error: Schema.Union([AccountKeyMismatch, GuardianError])
  }),
  Rpc.make("Reconcile", { payload: ReconcileRequest, success: ReconcileResult, error: GuardianError }),
  Rpc.make("RotationVeto", { payload: RotationVetoRequest, success: RotationVetoResult, error: GuardianError }),
  Rpc.make("KeyRotation", { payload: KeyRotationRequest, success: KeyRotationResult, error: Schema.Union([KeyRotationBusy, KeyRotationNotNeeded, GuardianError]) }),
  Rpc.make("ForgetKey", { payload: ForgetKeyRequest, success: Schema.Void, error: GuardianError }),
  Rpc.make("Health", { success: HealthResult }),
  Rpc.make("Info", { success: InfoResult })
) {}

/**
 * The path the guardian serves its RPCs on (HTTP POST, newline-delimited JSON).
 *
 * @since 0.1.0
 * @category constants
 */
export const rpcPath = "/rpc"

/**
 * The wire format of both ends: newline-delimited JSON, so that a POST carrying several
 * calls (see `rpcBatching`) answers each as soon as it is decided, in a streamed body,
 * instead of holding every answer until the slowest (a `Reconcile` reads the chain)
 * is done. Both ends must use the same: upgrade the guardian and its api servers together.
 *
 * @since 0.1.0
 * @category layers
 */
export const rpcSerialization = RpcSerialization.layerNdjson

/**
 * How a client gathers calls into one POST: those made within a millisecond of the first
 * go together, up to 64 (for throughput). One HTTP exchange and one check of the shared
 * secret then serve the authorizations of many concurrent transfers, and the guardian
 * decides them in one group commit.
 *
 * @since 0.1.0
 * @category constants
 */
export const rpcBatching = { window: Duration.millis(1), maxSize: 64 } as const
