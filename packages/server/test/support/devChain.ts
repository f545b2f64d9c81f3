/**
 * The embedded chain on its own (`DevChain.layer`, real anvil, the server's miner and state
 * writer) for the tests of D88 and D89: the layer over a data directory, and viem clients on it
 * that pay from anvil's first development account.
 */
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { createPublicClient, createWalletClient, type Hex, http } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { chainIdOfMode } from "@pps/api/ApiKeys"
import { AppConfig, type AppConfigShape } from "../../src/config/AppConfig.ts"
import { DataDir } from "../../src/platform/DataDir.ts"
import { DevChain } from "../../src/settlement/DevChain.ts"
import { testConfig } from "./TestServer.ts"

/** Anvil's first development account: funded in every fresh chain anvil starts. */
const fundedKey: Hex = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

/** The block time these tests run the chain at. */
export const devChainBlockTimeMs = 100

export const devChainIn = (dataDir: string, overrides: Partial<AppConfigShape>) =>
  DevChain.layer.pipe(
    Layer.provideMerge(DataDir.layer),
    Layer.provideMerge(Layer.succeed(AppConfig, testConfig(dataDir, { chainBlockTimeMs: devChainBlockTimeMs, ...overrides })))
  )

export const clientsOf = (rpcUrl: string) => {
  const chain = {
    id: chainIdOfMode.test,
    name: "embedded",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } }
  } as const
  return {
    reader: createPublicClient({ chain, transport: http(rpcUrl) }),
    wallet: createWalletClient({ chain, account: privateKeyToAccount(fundedKey), transport: http(rpcUrl) })
  }
}

/** A fresh data directory for `body`, removed afterwards. */
export const withDataDir = <A, E, R>(body: (dataDir: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "pps-devchain-"))),
    body,
    (dataDir) => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  )
