/**
 * x402's public `exact` scheme on the test server's anvil, for the side-by-side canary and the
 * benchmark (D57): an EIP-3009 test token deployed from a fresh funded key, a resource server on
 * `@x402/express` with `@x402/evm`'s exact server and facilitator (the facilitator's own fresh
 * key submits `transferWithAuthorization`), and a payer key holding the token.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { x402Facilitator } from "@x402/core/facilitator"
import { x402ResourceServer } from "@x402/core/server"
import { toClientEvmSigner, toFacilitatorEvmSigner } from "@x402/evm"
import { ExactEvmScheme as ExactClient } from "@x402/evm/exact/client"
import { ExactEvmScheme as ExactFacilitator } from "@x402/evm/exact/facilitator"
import { ExactEvmScheme as ExactServer } from "@x402/evm/exact/server"
import { paymentMiddleware } from "@x402/express"
import express from "express"
import { createPublicClient, createWalletClient, defineChain, type Hex, http as viemHttp } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as Token from "../../../contracts/src/artifacts/Eip3009TestToken.ts"
import { chainRpc } from "../../../sdk/test/support/server.ts"
import { Facilitator, Scheme } from "../../src/index.ts"

export interface ExactShop {
  readonly baseUrl: string
  readonly token: Hex
  readonly payer: Hex
  readonly clientScheme: ExactClient
  readonly close: () => Promise<void>
}

const fundedAccount = async (rpcUrl: string) => {
  const account = privateKeyToAccount(generatePrivateKey())
  await chainRpc(rpcUrl, "anvil_setBalance", [account.address, "0x8AC7230489E80000"])
  return account
}

/** A shop selling `/weather` for `amountUnits` of the token with `exact`; the payer holds 1 token. */
export const startExactShop = async (rpcUrl: string, amountUnits: string): Promise<ExactShop> => {
  const chain = defineChain({ id: 46630, name: "pps-test", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } })
  // viem polls for a receipt every 4 s by default; the blocks come every 100 ms.
  const publicClient = createPublicClient({ chain, transport: viemHttp(rpcUrl), pollingInterval: 50 })
  const [deployer, facilitatorAccount, payerAccount, payee] = [await fundedAccount(rpcUrl), await fundedAccount(rpcUrl), await fundedAccount(rpcUrl), privateKeyToAccount(generatePrivateKey())]
  const deployerWallet = createWalletClient({ chain, transport: viemHttp(rpcUrl), account: deployer })
  const deployed = await publicClient.waitForTransactionReceipt({ hash: await deployerWallet.deployContract({ abi: Token.abi, bytecode: Token.bytecode }) })
  const token = deployed.contractAddress!
  await publicClient.waitForTransactionReceipt({
    hash: await deployerWallet.writeContract({ address: token, abi: Token.abi, functionName: "mint", args: [payerAccount.address, 1_000_000n] })
  })
  const facilitatorWallet = createWalletClient({ chain, transport: viemHttp(rpcUrl), account: facilitatorAccount })
  const signer = toFacilitatorEvmSigner({
    address: facilitatorAccount.address,
    readContract: (args) => publicClient.readContract(args as Parameters<typeof publicClient.readContract>[0]),
    verifyTypedData: (args) => publicClient.verifyTypedData(args as Parameters<typeof publicClient.verifyTypedData>[0]),
    writeContract: (args) => facilitatorWallet.writeContract(args as Parameters<typeof facilitatorWallet.writeContract>[0]),
    sendTransaction: (args) => facilitatorWallet.sendTransaction(args),
    waitForTransactionReceipt: (args) => publicClient.waitForTransactionReceipt(args),
    getCode: (args) => publicClient.getCode(args)
  })
  const facilitator = new x402Facilitator().register(Scheme.networks.test, new ExactFacilitator(signer))
  const resourceServer = new x402ResourceServer(Facilitator.localClient(facilitator)).register(Scheme.networks.test, new ExactServer())
  const app = express()
  app.use(paymentMiddleware({
    "GET /weather": {
      accepts: {
        scheme: "exact",
        network: Scheme.networks.test,
        payTo: payee.address,
        price: { amount: amountUnits, asset: token, extra: { name: "x402 test dollar", version: "2" } },
        maxTimeoutSeconds: 60
      }
    }
  }, resourceServer))
  app.get("/weather", (_request, response) => response.json({ path: "/weather", answer: 42 }))
  const server = http.createServer(app)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    token,
    payer: payerAccount.address,
    clientScheme: new ExactClient(toClientEvmSigner(payerAccount, publicClient)),
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
