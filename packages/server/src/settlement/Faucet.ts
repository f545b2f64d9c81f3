/**
 * The testnet faucet's plumbing: mint test USDG and shield it into an address's
 * confidential balance, from the operator account (the USDG minter). Testnet
 * only: there is no faucet on mainnet.
 *
 * The amount is public, as every shield's is (the ERC-20 `transferFrom` shows
 * it); the confidential balance it credits is (a·G, 0, 0).
 *
 * @since 0.1.0
 */
import { Faucet as ContractsFaucet } from "@pps/contracts"
import { Context, Effect, Layer, Option } from "effect"
import type { Address, Hash } from "viem"
import { ChainError } from "./Chains.ts"
import { ChainUnavailable, Settlement } from "./Settlement.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class Faucet extends Context.Service<Faucet, {
  /** Mints `amount` base units of USDG and shields them to `to`; resolves once mined. */
  readonly grantUsdg: (to: Address, amount: bigint) => Effect.Effect<Hash, ChainError | ChainUnavailable>
}>()("server/settlement/Faucet") {
  static readonly layer = Layer.effect(
    Faucet,
    Effect.gen(function*() {
      const settlement = yield* Settlement
      const chain = settlement.chain("test")
      const faucet = Option.map(chain, (c) =>
        ContractsFaucet.make({
          client: c.client,
          minter: c.operator,
          usdg: c.contracts.usdg,
          confidentialUsdg: c.contracts.confidentialUsdg,
          receiptPollingMs: 50
        }))
      return Faucet.of({
        grantUsdg: (to, amount) =>
          Option.match(faucet, {
            onNone: () => Effect.fail(new ChainUnavailable("test")),
            onSome: (f) =>
              Effect.tryPromise({
                try: () => f.shieldUsdg(to, amount),
                catch: (cause) => new ChainError({ message: "the faucet grant failed", cause })
              })
          })
      })
    })
  )
}
