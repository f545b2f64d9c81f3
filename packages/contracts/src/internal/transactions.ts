/**
 * A sequential transaction sender for one local account, used by deployment and the faucet.
 *
 * Transactions are signed locally with gas, fees, nonce and chain id all given, then sent raw:
 * viem otherwise adds an eth_fillTransaction round trip and estimates gas against state that
 * may be stale. Nonces are handed out under a lock so concurrent callers of one sender never
 * collide; the receipt is awaited outside the lock, so calls pipeline.
 */
import type { Address, Hex, LocalAccount, PublicClient, TransactionReceipt } from "viem"

/** Tip offered per gas: enough for any dev chain or quiet testnet to include us at once. */
const priorityFeeWei = 1_000_000_000n
/** Base fee can rise between signing and inclusion; paying up to twice the current one absorbs that. */
const baseFeeMultiplier = 2n

export interface Call {
  readonly to: Address | null
  readonly data: Hex
  /** Gas limit, given explicitly: estimates run against state that may be stale by inclusion. */
  readonly gas: bigint
  readonly value?: bigint
}

export interface Sender {
  readonly address: Address
  /** Sends the call and resolves with its receipt; rejects when it reverts. */
  readonly send: (call: Call) => Promise<TransactionReceipt>
}

export const makeSender = (client: PublicClient, account: LocalAccount, receiptPollingMs: number): Sender => {
  let chainId: number | undefined
  let nextNonce: number | undefined
  let lock: Promise<unknown> = Promise.resolve()

  const signAndSend = async (call: Call): Promise<Hex> => {
    chainId ??= await client.getChainId()
    nextNonce ??= await client.getTransactionCount({ address: account.address, blockTag: "pending" })
    const block = await client.getBlock({ blockTag: "latest" })
    const baseFeeWei = block.baseFeePerGas ?? 0n
    const nonce = nextNonce
    const serialized = await account.signTransaction({
      type: "eip1559",
      chainId,
      nonce,
      to: call.to,
      data: call.data,
      gas: call.gas,
      value: call.value ?? 0n,
      maxPriorityFeePerGas: priorityFeeWei,
      maxFeePerGas: baseFeeWei * baseFeeMultiplier + priorityFeeWei
    })
    try {
      const hash = await client.sendRawTransaction({ serializedTransaction: serialized })
      nextNonce = nonce + 1
      return hash
    } catch (error) {
      // The node's view of our nonce is the truth after a failed send: ask again next time.
      nextNonce = undefined
      throw error
    }
  }

  const send = async (call: Call): Promise<TransactionReceipt> => {
    const sent = lock.then(() => signAndSend(call))
    lock = sent.catch(() => undefined)
    const hash = await sent
    const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: receiptPollingMs })
    if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`)
    return receipt
  }

  return { address: account.address, send }
}
