/**
 * The confidential x402 scheme's cost (D57): the time a paid request takes from its first GET
 * (402) through the payment to the 200, beside the same request unpaid and beside x402's public
 * `exact` scheme (EIP-3009 `transferWithAuthorization` on the same anvil); and the gas of one
 * payment's chain transaction in each. The real server (child process: embedded PGlite, anvil
 * with 100 ms blocks, the guardian), resource servers on `@x402/express`, clients on
 * `@x402/fetch`, all over loopback. The three kinds of request alternate (free, sealed, exact),
 * one at a time, so a change in the shared machine's speed hits each alike.
 *
 * Run: `npm run -s bench:x402 [-- --rounds 40] [--no-record]`.
 */
import { parseArgs } from "node:util"
import { EncryptionKey } from "@pps/crypto"
import { Pps } from "@pps/sdk"
import { x402Client } from "@x402/core/client"
import { decodePaymentResponseHeader } from "@x402/core/http"
import { wrapFetchWithPayment } from "@x402/fetch"
import { recordOption, recordResults } from "../../../scripts/benchRecord.ts"
import { anvilRpcUrl, chainRpc, startServer } from "../../sdk/test/support/server.ts"
import { Client, Scheme } from "../src/index.ts"
import { startExactShop } from "../test/support/exact.ts"
import { startShop } from "../test/support/shop.ts"

const { values } = parseArgs({ options: { rounds: { type: "string", default: "30" }, ...recordOption } })
const rounds = Number(values.rounds)
/** Requests of each kind before measuring: the first credit to a new party and cold caches are not the steady cost. */
const warmupRounds = 3

const quantile = (samples: ReadonlyArray<number>, q: number): number => {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN
}

const gasOf = async (rpcUrl: string, hash: string): Promise<number> => {
  const receipt = await chainRpc(rpcUrl, "eth_getTransactionReceipt", [hash]) as { readonly gasUsed: string }
  return Number(BigInt(receipt.gasUsed))
}

const timed = async (run: () => Promise<Response>): Promise<{ readonly ms: number; readonly response: Response }> => {
  const started = performance.now()
  const response = await run()
  await response.arrayBuffer()
  if (response.status !== 200) throw new Error(`expected 200, got ${response.status}`)
  return { ms: performance.now() - started, response }
}

const server = await startServer()
try {
  const [aliceAccount, shopAccount] = [await server.createAccount("alice"), await server.createAccount("shop")]
  const alice = new Pps({ baseUrl: server.baseUrl, apiKey: aliceAccount.api_key, keyPair: EncryptionKey.generate() })
  const payee = new Pps({ baseUrl: server.baseUrl, apiKey: shopAccount.api_key, keyPair: EncryptionKey.generate() })
  await alice.encryptionKey.register()
  await payee.encryptionKey.register()
  await alice.faucet({ amount: "100" })
  const rpcUrl = anvilRpcUrl(server.dataDir)
  const shop = await startShop(payee)
  const exact = await startExactShop(rpcUrl, "13217")
  const sealed = Client.paidFetch({ payer: alice, maxPerRequest: "0.05", maxPerSession: "100" })
  const exactFetch = wrapFetchWithPayment(fetch, new x402Client().register(Scheme.networks.test, exact.clientScheme).setSpendControls(false))
  const samples = { free: [] as Array<number>, sealed: [] as Array<number>, exact: [] as Array<number> }
  const gas = { sealed: [] as Array<number>, exact: [] as Array<number> }
  for (let round = 0; round < warmupRounds + rounds; round++) {
    const free = await timed(() => fetch(`${shop.baseUrl}/free`))
    const paid = await timed(() => sealed.fetch(`${shop.baseUrl}/weather`))
    const publicPaid = await timed(() => exactFetch(`${exact.baseUrl}/weather`))
    if (round < warmupRounds) continue
    samples.free.push(free.ms)
    samples.sealed.push(paid.ms)
    samples.exact.push(publicPaid.ms)
    const transfer = await alice.transfers.get(sealed.scheme.lastTransferId!)
    gas.sealed.push(await gasOf(rpcUrl, transfer.tx_hash!))
    gas.exact.push(await gasOf(rpcUrl, decodePaymentResponseHeader(publicPaid.response.headers.get("payment-response")!).transaction))
  }
  await shop.close()
  await exact.close()
  const metrics = [
    { metric: "pps-sealed: 402 → paid → 200, p50", value: quantile(samples.sealed, 0.5), unit: "ms", headline: true },
    { metric: "pps-sealed: 402 → paid → 200, p99", value: quantile(samples.sealed, 0.99), unit: "ms" },
    { metric: "pps-sealed: time added over the unpaid request, p50", value: quantile(samples.sealed, 0.5) - quantile(samples.free, 0.5), unit: "ms", headline: true },
    { metric: "exact: 402 → paid → 200, p50", value: quantile(samples.exact, 0.5), unit: "ms" },
    { metric: "exact: 402 → paid → 200, p99", value: quantile(samples.exact, 0.99), unit: "ms" },
    { metric: "unpaid request, p50", value: quantile(samples.free, 0.5), unit: "ms" },
    { metric: "gas per payment, pps-sealed (confidential transfer), median", value: quantile(gas.sealed, 0.5), unit: "gas", headline: true },
    { metric: "gas per payment, exact (transferWithAuthorization), median", value: quantile(gas.exact, 0.5), unit: "gas", headline: true }
  ]
  for (const metric of metrics) console.log(`${metric.metric}: ${metric.value.toFixed(metric.unit === "ms" ? 1 : 0)} ${metric.unit}`)
  console.log(`${rounds} rounds after ${warmupRounds} warm-up rounds, 100 ms blocks`)
  recordResults("x402", metrics)
} finally {
  await server.stop()
}
