/**
 * The test faucet (ext): `POST /v1/test/faucet {asset, amount}` mints test USDG
 * and shields it into the caller's confidential balance. The guardian books the
 * credit from the chain's `Shielded` event (D39), so a grant mined for a request
 * that was then dropped is credited all the same; once the grant is mined the
 * faucet asks the guardian to read the chain up to it (`sync`, no amount), so the
 * balance is spendable when the faucet answers. `hc_test_` keys only; live keys
 * get 403 `test_mode_only`. `GET /v1/test/faucet/grants` lists the caller's grants (D50).
 *
 * @since 0.1.0
 */
import { GuardianClient } from "@pps/guardian"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { getAddress } from "viem"
import { Accounts } from "../accounts/Accounts.ts"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { InvalidRequest, ServiceUnavailable, TestModeOnly } from "@pps/api/Errors"
import { Settlement } from "../settlement/Settlement.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable } from "../platform/Unavailable.ts"
import { FaucetGrants } from "./FaucetGrants.ts"
import { assets, parseAmount } from "@pps/api/Transfers"
import { grantWholeUnitsMax } from "@pps/api/Faucet"
import { pageLimitDefault } from "@pps/api/Page"

/**
 * @since 0.1.0
 * @category layers
 */
export const FaucetHttpLive = HttpApiBuilder.group(PublicApi, "test", (handlers) =>
  Effect.gen(function*() {
    const grants = yield* FaucetGrants
    const accounts = yield* Accounts
    const settlement = yield* Settlement
    const guardian = yield* GuardianClient.GuardianClient
    return handlers.handle("grants", ({ query }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        if (principal.mode !== "test") return yield* Effect.fail(TestModeOnly.of())
        return yield* grants.list(principal, { limit: query.limit ?? pageLimitDefault, offset: query.offset ?? 0 })
      })).handle("faucet", ({ payload }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        if (principal.mode !== "test") return yield* Effect.fail(TestModeOnly.of())
        if ((payload.asset ?? "USDG") !== "USDG") {
          return yield* Effect.fail(InvalidRequest.of("The faucet grants USDG only.", { param: "asset" }))
        }
        const amount = parseAmount(payload.amount, "USDG")
        if (amount === undefined || amount > grantWholeUnitsMax * 10n ** BigInt(assets.USDG)) {
          return yield* Effect.fail(InvalidRequest.of(
            `\`amount\` must be a decimal string above 0, at most ${grantWholeUnitsMax} USDG.`,
            { param: "amount" }
          ))
        }
        const account = yield* accounts.get(principal.accountId).pipe(
          Unavailable.database("Faucet.account"),
          answerServiceUnavailable,
          Effect.flatMap(Invariant.some("an authenticated principal's account exists"))
        )
        const wallet = getAddress(account.walletAddress)
        const chain = yield* Invariant.some("test mode always has its chain (the dev chain or a configured one)")(settlement.chain("test"))
        const unavailable = (error: unknown) =>
          Effect.logError("faucet grant failed", error).pipe(Effect.andThen(Effect.fail(ServiceUnavailable.of())))
        const granted = yield* grants.grant(principal, wallet, amount)
        // `pending` (deeper confirmations asked of the guardian) answers now: the guardian's
        // follower books the grant once it is confirmed.
        yield* guardian.sync({ chainId: BigInt(chain.chainId), txHash: granted.tx_hash }).pipe(Effect.catch(unavailable))
        return granted
      }))
  }))
