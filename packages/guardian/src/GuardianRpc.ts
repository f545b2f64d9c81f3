/**
 * The guardian's RPC surface (effect/rpc): the contract shared by the guardian process
 * (`GuardianServer`) and its clients (`GuardianClient.layerHttp`). Every RPC can fail
 * with `GuardianError`; none returns an amount.
 *
 * | rpc | who calls it | answers |
 * |---|---|---|
 * | `Authorize` | server, per transfer (and per approval) | Authorized (ciphertext + signature) or a refusal |
 * | `Settle` | settlement, once the chain decided | the reservation's final status |
 * | `Credit` | server, for shields and incoming transfers seen on chain | applied / duplicate |
 * | `NonZero` | balances endpoint without a proof (D19) | per asset, a boolean |
 * | `SealedBalance` | balances / client decryption | the balance sealed to the account's key |
 * | `Reconcile` | operators, tests (the guardian also sweeps) | matched / mismatched |
 * | `Health` | readiness probes | ready, frozen account count |
 * | `Info` | deployment | signer address, encryption key |
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { Rpc, RpcGroup } from "effect/rpc"
import {
  AccountKeyMismatch,
  AuthorizeRequest,
  AuthorizeResult,
  CreditIdReused,
  CreditRequest,
  CreditResult,
  GuardianError,
  HealthResult,
  InfoResult,
  NonZeroRequest,
  NonZeroResult,
  ReconcileRequest,
  ReconcileResult,
  ReservationNotFound,
  SealedBalanceRequest,
  SealedBalanceResult,
  SettleRequest,
  SettleResult
} from "./Domain.ts"

/**
 * @since 0.1.0
 * @category rpcs
 */
export class GuardianRpcs extends RpcGroup.make(
  Rpc.make("Authorize", { payload: AuthorizeRequest, success: AuthorizeResult, error: GuardianError }),
  Rpc.make("Settle", { payload: SettleRequest, success: SettleResult, error: Schema.Union([ReservationNotFound, GuardianError]) }),
  Rpc.make("Credit", { payload: CreditRequest, success: CreditResult, error: Schema.Union([CreditIdReused, GuardianError]) }),
  Rpc.make("NonZero", { payload: NonZeroRequest, success: NonZeroResult, error: GuardianError }),
  Rpc.make("SealedBalance", {
    payload: SealedBalanceRequest,
    success: SealedBalanceResult,
    error: Schema.Union([AccountKeyMismatch, GuardianError])
  }),
  Rpc.make("Reconcile", { payload: ReconcileRequest, success: ReconcileResult, error: GuardianError }),
  Rpc.make("Health", { success: HealthResult }),
  Rpc.make("Info", { success: InfoResult })
) {}

/**
 * The path the guardian serves its RPCs on (HTTP POST, JSON).
 *
 * @since 0.1.0
 * @category constants
 */
export const rpcPath = "/rpc"
