/**
 * Faucet: the testnet faucet's plumbing. It mints USDG test tokens and shields them into an
 * account's confidential balance, from one minter wallet.
 *
 * Shielding is done by the faucet wallet itself (mint to itself, approve once, `shield(to, a)`),
 * so the receiving account needs neither gas nor an approval. The mint, approve and shield
 * transactions get consecutive nonces and are sent without waiting for each other, so a grant
 * usually settles in one block.
 *
 * @since 0.1.0
 */
import { type Address, encodeFunctionData, type Hash, type LocalAccount, maxUint256, type PublicClient } from "viem"
import * as ConfidentialToken from "./artifacts/ConfidentialToken.ts"
import * as TestUSDG from "./artifacts/TestUSDG.ts"
import { makeSender } from "./internal/transactions.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Faucet {
  /** The faucet wallet; it must be a USDG minter. */
  readonly address: Address
  /** Mints `amount` base units (6 decimals) of USDG to `to`; resolves with the mined transaction. */
  readonly mintUsdg: (to: Address, amount: bigint) => Promise<Hash>
  /** Mints `amount` to the faucet and shields it into `to`'s confidential balance. */
  readonly shieldUsdg: (to: Address, amount: bigint) => Promise<Hash>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface FaucetOptions {
  readonly client: PublicClient
  readonly minter: LocalAccount
  readonly usdg: Address
  readonly confidentialUsdg: Address
  /** Receipt polling interval. Default 100 ms. */
  readonly receiptPollingMs?: number
}

/** Explicit gas limits, about twice the measured use (a first mint to a new holder is the dearest). */
const gas = { mint: 120_000n, approve: 100_000n, shield: 250_000n } as const

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: FaucetOptions): Faucet => {
  const { client, minter, usdg, confidentialUsdg } = options
  const sender = makeSender(client, minter, options.receiptPollingMs ?? 100)
  // Approve once, for good: the faucet wallet holds nothing between grants. The promise resolves
  // once the approval (if one is needed) has been handed to the sender, so its nonce precedes
  // the first shield's; its receipt is awaited separately.
  let approvalSubmitted: Promise<{ readonly mined: Promise<unknown> }> | undefined

  const mint = (to: Address, amount: bigint) =>
    sender.send({
      to: usdg,
      data: encodeFunctionData({ abi: TestUSDG.abi, functionName: "mint", args: [to, amount] }),
      gas: gas.mint
    })

  const submitApproval = async (): Promise<{ readonly mined: Promise<unknown> }> => {
    const allowance = await client.readContract({
      address: usdg,
      abi: TestUSDG.abi,
      functionName: "allowance",
      args: [minter.address, confidentialUsdg]
    })
    if (allowance === maxUint256) return { mined: Promise.resolve() }
    const mined = sender.send({
      to: usdg,
      data: encodeFunctionData({ abi: TestUSDG.abi, functionName: "approve", args: [confidentialUsdg, maxUint256] }),
      gas: gas.approve
    })
    // A failed approval is reported by the shield that waits for it; start over next time.
    mined.catch(() => {
      approvalSubmitted = undefined
    })
    return { mined }
  }

  const mintUsdg = async (to: Address, amount: bigint): Promise<Hash> => (await mint(to, amount)).transactionHash

  const shieldUsdg = async (to: Address, amount: bigint): Promise<Hash> => {
    approvalSubmitted ??= submitApproval()
    const approval = await approvalSubmitted.catch((error: unknown) => {
      approvalSubmitted = undefined
      throw error
    })
    const minted = mint(minter.address, amount)
    const shielded = sender.send({
      to: confidentialUsdg,
      data: encodeFunctionData({ abi: ConfidentialToken.abi, functionName: "shield", args: [to, amount] }),
      gas: gas.shield
    })
    const [, , receipt] = await Promise.all([approval.mined, minted, shielded])
    return receipt.transactionHash
  }

  return { address: minter.address, mintUsdg, shieldUsdg }
}
