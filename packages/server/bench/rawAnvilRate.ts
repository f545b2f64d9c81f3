/**
 * anvil's raw rate for confidential transfers, the yardstick both benchmarks
 * report beside their own figures: pre-signed raw transactions from 8 fresh
 * funded accounts, blasted with the chain's own JSON-RPC client, timed from the
 * first send to the last receipt.
 */
import { Effect } from "effect"
import { createTestClient, http, keccak256 } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import type { ChainContext } from "../src/settlement/Chains.ts"
import type { SubmissionRequest } from "../src/settlement/domain.ts"

export const rawAnvilRate = (chain: ChainContext, requests: ReadonlyArray<SubmissionRequest>, concurrency: number) =>
  Effect.gen(function*() {
    const cheats = createTestClient({ mode: "anvil", transport: http(chain.rpcUrl) })
    const blasters = Array.from({ length: 8 }, () => privateKeyToAccount(generatePrivateKey()))
    for (const account of blasters) yield* Effect.promise(() => cheats.setBalance({ address: account.address, value: 10n ** 24n }))
    const block = yield* Effect.promise(() => chain.client.getBlock())
    const maxFeePerGas = (block.baseFeePerGas ?? 0n) * 2n + 1_000_000_000n
    const raws = yield* Effect.promise(() =>
      Promise.all(requests.map((request, i) =>
        blasters[i % blasters.length]!.signTransaction({
          type: "eip1559",
          chainId: chain.chainId,
          nonce: Math.floor(i / blasters.length),
          to: request.target,
          data: request.data,
          gas: request.gasLimit,
          maxPriorityFeePerGas: 1_000_000_000n,
          maxFeePerGas
        })
      ))
    )
    const started = Date.now()
    yield* Effect.forEach(raws, (raw) => Effect.promise(() => chain.client.sendRawTransaction({ serializedTransaction: raw })), {
      concurrency,
      discard: true
    })
    const lastHash = keccak256(raws[raws.length - 1]!)
    yield* Effect.promise(() => chain.client.waitForTransactionReceipt({ hash: lastHash, pollingInterval: 50, timeout: 120_000 }))
    return requests.length / ((Date.now() - started) / 1000)
  })
