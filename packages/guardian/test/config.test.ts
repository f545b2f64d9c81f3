/**
 * The guardian's configuration refuses what would be unsafe on a real chain: booking
 * credits at depth 0 with a mainnet endpoint (a reorganisation would leave credit with no
 * tokens behind it). Test chains may use depth 0 (anvil never reorganises).
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import { GuardianConfig } from "../src/index.ts"

const secret = Buffer.alloc(32, 7).toString("base64")
const optionsWith = (env: Record<string, string>) =>
  GuardianConfig.options.pipe(
    Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({
      DATA_DIR: path.join(os.tmpdir(), "pps-guardian-config-test"),
      GUARDIAN_SECRET: secret,
      GUARDIAN_DATABASE_URL: "postgres://unused@127.0.0.1:1/unused",
      ...env
    }))),
    Effect.result
  )

describe("guardian configuration", () => {
  it.effect("refuses GUARDIAN_CONFIRMATIONS 0 with a mainnet endpoint, and allows it on a test chain", () =>
    Effect.gen(function*() {
      const mainnetAtZero = yield* optionsWith({ GUARDIAN_RPC_URLS: "4663=http://127.0.0.1:8545" })
      assert.strictEqual(mainnetAtZero._tag, "Failure")
      if (mainnetAtZero._tag === "Failure") assert.match(String(mainnetAtZero.failure), /GUARDIAN_CONFIRMATIONS must be at least 1/)
      const mainnetDeep = yield* optionsWith({ GUARDIAN_RPC_URLS: "4663=http://127.0.0.1:8545", GUARDIAN_CONFIRMATIONS: "6" })
      assert.strictEqual(mainnetDeep._tag, "Success")
      const testnet = yield* optionsWith({ GUARDIAN_RPC_URLS: "46630=http://127.0.0.1:8545" })
      assert.strictEqual(testnet._tag, "Success")
    }))
})
