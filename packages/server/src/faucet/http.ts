/**
 * The test faucet (ext): `POST /v1/test/faucet {asset, amount}` mints test USDG
 * and shields it into the caller's confidential balance, then books the credit
 * with the guardian (the amount is public: a shield's always is). `hc_test_`
 * keys only; live keys get 403 `test_mode_only`.
 *
 * @since 0.1.0
 */
import { GuardianClient } from "@pps/guardian"
import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { getAddress } from "viem"
import { Accounts } from "../accounts/Accounts.ts"
import { CurrentPrincipal, PublicApi } from "../http/Api.ts"
import { InvalidRequest, ServiceUnavailable, TestModeOnly } from "../http/errors.ts"
import { Settlement } from "../settlement/Settlement.ts"
import { FaucetGrants } from "./FaucetGrants.ts"
import { assets, parseAmount } from "../transfers/domain.ts"
import { grantWholeUnitsMax } from "./domain.ts"

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
    return handlers.handle("faucet", ({ payload }) =>
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
        const account = Option.getOrThrow(yield* accounts.get(principal.accountId).pipe(Effect.orDie))
        const wallet = getAddress(account.walletAddress)
        const chain = Option.getOrThrow(settlement.chain("test"))
        const unavailable = (error: unknown) =>
          Effect.logError("faucet grant failed", error).pipe(Effect.andThen(Effect.fail(ServiceUnavailable.of())))
        const granted = yield* grants.grant(principal, wallet, amount)
        const txHash = granted.tx_hash
        yield* guardian.credit({
          chainId: BigInt(chain.chainId),
          contract: chain.contracts.confidentialUsdg,
          account: wallet,
          amount,
          creditId: `faucet:${txHash}`
        }).pipe(Effect.catch(unavailable))
        return granted
      }))
  }))
