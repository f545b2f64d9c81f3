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
import { ConfidentialTokenArtifact, Faucet as ContractsFaucet } from "@pps/contracts"
import { Context, Effect, Layer, Option } from "effect"
import { type Address, getAbiItem, type Hash } from "viem"
import { type ChainContext, ChainError } from "./Chains.ts"
import { ChainUnavailable, Settlement } from "./Settlement.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class Faucet extends Context.Service<Faucet, {
  /** Mints `amount` base units of USDG and shields them to `to`; resolves once mined. */
  readonly grantUsdg: (to: Address, amount: bigint) => Effect.Effect<Hash, ChainError | ChainUnavailable>
  /** The test chain's latest block number: where to look for a grant made from now on. */
  readonly blockNumber: Effect.Effect<bigint, ChainError | ChainUnavailable>
  /**
   * The faucet's shields of `amount` into `to` mined since `fromBlock`, oldest first: how a
   * grant whose request was cut off is found on chain (D36).
   */
  readonly grantsSince: (
    to: Address,
    amount: bigint,
    fromBlock: bigint
  ) => Effect.Effect<ReadonlyArray<Hash>, ChainError | ChainUnavailable>
}>()("server/settlement/Faucet") {
  static readonly layer = Layer.effect(
    Faucet,
    Effect.gen(function*() {
      const settlement = yield* Settlement
      const chain = settlement.chain("test")
      const faucet = Option.flatMap(chain, (c) =>
        Option.map(c.faucet, (minter) =>
          ContractsFaucet.make({
            client: c.client,
            minter,
          usdg: c.contracts.usdg,
          confidentialUsdg: c.contracts.confidentialUsdg,
            receiptPollingMs: 50
          })))
      const read = <A>(what: string, run: (c: ChainContext, minter: Address) => Promise<A>) =>
        Option.match(Option.flatMap(chain, (c) => Option.map(c.faucet, (minter) => [c, minter.address] as const)), {
          onNone: () => Effect.fail(new ChainUnavailable("test")),
          onSome: ([c, minter]) =>
            Effect.tryPromise({ try: () => run(c, minter), catch: (cause) => new ChainError({ message: what, cause, retryable: true }) })
        })
      const shielded = getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "Shielded" })
      return Faucet.of({
        blockNumber: read("reading the block number failed", (c) => c.client.getBlockNumber({ cacheTime: 0 })),
        grantsSince: (to, amount, fromBlock) =>
          read("reading the faucet's grants failed", async (c, minter) => {
            const logs = await c.client.getLogs({
              address: c.contracts.confidentialUsdg,
              event: shielded,
              args: { from: minter, to },
              fromBlock,
              toBlock: "latest"
            })
            return logs.filter((log) => log.args.amount === amount && log.transactionHash !== null).map((log) => log.transactionHash)
          }),
        grantUsdg: (to, amount) =>
          Option.match(faucet, {
            onNone: () => Effect.fail(new ChainUnavailable("test")),
            onSome: (f) =>
              Effect.tryPromise({
                try: () => f.shieldUsdg(to, amount),
                catch: (cause) => new ChainError({ message: "the faucet grant failed", cause, retryable: true })
              })
          })
      })
    })
  )
}
