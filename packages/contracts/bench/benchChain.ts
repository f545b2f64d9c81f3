/**
 * The chain the gas benchmarks run on: a fresh anvil, its clients, funded accounts, and one
 * pipelined sender per account (transactions sent without waiting for each other's receipts).
 */
import { type Address, createPublicClient, createTestClient, encodeFunctionData, type Hex, http, type LocalAccount, parseEther, type PublicClient } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as Anvil from "../src/anvil.ts"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import { hintedAccounts, rootHints } from "../src/rootHints.ts"
import type { ConfidentialTransferRequest } from "../test/helpers/transfers.ts"
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

/**
 * `confidentialTransferBatch` calldata for signed items, with root hints (D70) read as the
 * relayer reads them (one `encryptedBalancesOf`), or none when `hinted` is false.
 */
export const batchCalldata = async (
  client: PublicClient,
  token: Address,
  items: ReadonlyArray<{ readonly request: ConfidentialTransferRequest; readonly signature: Hex; readonly accountSignature: Hex }>,
  hinted = true
): Promise<Hex> => {
  const abi = ConfidentialToken.abi
  const requests = items.map((item) => item.request)
  const hints = hinted
    ? rootHints(requests, await client.readContract({ address: token, abi, functionName: "encryptedBalancesOf", args: [hintedAccounts(requests)] }))
    : []
  return encodeFunctionData({ abi, functionName: "confidentialTransferBatch", args: [requests, items.map((item) => item.signature), items.map((item) => item.accountSignature), hints] })
}
