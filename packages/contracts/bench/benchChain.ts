/**
 * The chain the gas benchmarks run on: a fresh anvil, its clients, funded accounts, and one
 * pipelined sender per account (transactions sent without waiting for each other's receipts).
 */
import { createPublicClient, createTestClient, type Hex, http, type LocalAccount, parseEther } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as Anvil from "../src/anvil.ts"
import { makeSender, type Sender } from "../src/internal/transactions.ts"

export const startBenchChain = async (options: Anvil.StartOptions) => {
  const anvil = await Anvil.start(options)
  const transport = http(anvil.rpcUrl)
  const client = createPublicClient({ transport, pollingInterval: 20 })
  const testClient = createTestClient({ mode: "anvil", transport })
  const senders = new Map<string, Sender>()
  const send = (account: LocalAccount, to: `0x${string}` | null, data: Hex, gas = 6_000_000n) => {
    const sender = senders.get(account.address) ?? makeSender(client, account, 20)
    senders.set(account.address, sender)
    return sender.send({ to, data, gas })
  }
  const newAccount = async () => {
    const account = privateKeyToAccount(generatePrivateKey())
    await testClient.setBalance({ address: account.address, value: parseEther("100") })
    return account
  }
  return { anvil, client, testClient, send, newAccount }
}
