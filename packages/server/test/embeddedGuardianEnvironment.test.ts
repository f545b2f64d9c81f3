/**
 * What the embedded guardian child is started with: the server's confirmation depth carried
 * over (the guardian counts the blocks on top of an event's block, the server the block
 * itself), an explicit GUARDIAN_CONFIRMATIONS kept, nothing of the server's own secrets,
 * D67's malloc settings (the server's own when it has them), and a measurement's CPU profile
 * directory, but not NODE_OPTIONS (whatever it preloads would run in the process that decrypts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Redacted } from "effect"
import { childEnvironment, cpuProfileFlags, type EmbeddedGuardianOptions } from "../src/guardian/EmbeddedGuardian.ts"

const options: EmbeddedGuardianOptions = {
  dataDir: "/data",
  chains: [{ chainId: 46630n, rpcUrl: "http://127.0.0.1:8545" }],
  logLevel: "info",
  confirmations: 3,
  startTimeoutMs: 60_000
}
const token = Redacted.make("shared")

describe("the embedded guardian's environment", () => {
  it("books chain events at the server's depth unless GUARDIAN_CONFIRMATIONS says otherwise", () => {
    assert.strictEqual(childEnvironment(options, 9000, token, {}).GUARDIAN_CONFIRMATIONS, "2")
    assert.strictEqual(childEnvironment({ ...options, confirmations: 1 }, 9000, token, {}).GUARDIAN_CONFIRMATIONS, "0")
    assert.strictEqual(childEnvironment(options, 9000, token, { GUARDIAN_CONFIRMATIONS: "5" }).GUARDIAN_CONFIRMATIONS, "5")
  })

  it("passes none of the server's own settings or secrets", () => {
    const environment: Record<string, string> = childEnvironment(options, 9000, token, {
      DATABASE_URL: "postgres://server",
      SERVER_SECRET: "server",
      GUARDIAN_SECRET: "must come from the guardian's own directory",
      PATH: "/usr/bin"
    })
    assert.strictEqual(environment["PATH"], "/usr/bin")
    for (const name of ["DATABASE_URL", "SERVER_SECRET", "GUARDIAN_SECRET"]) assert.isUndefined(environment[name], name)
    assert.strictEqual(environment["GUARDIAN_SHARED_SECRET"], "shared")
  })

  it("bounds glibc's malloc as npm start does, unless the server's environment sets it otherwise", () => {
    const plain: Record<string, string> = childEnvironment(options, 9000, token, {})
    assert.strictEqual(plain["MALLOC_ARENA_MAX"], "2")
    const set: Record<string, string> = childEnvironment(options, 9000, token, { MALLOC_ARENA_MAX: "4" })
    assert.strictEqual(set["MALLOC_ARENA_MAX"], "4")
  })

  it("profiles the guardian when PPS_CPU_PROF_DIR names a directory, and never passes NODE_OPTIONS on", () => {
    const environment: Record<string, string> = childEnvironment(options, 9000, token, {
      PPS_CPU_PROF_DIR: "/tmp/profiles",
      NODE_OPTIONS: "--require /tmp/preload.js"
    })
    assert.isUndefined(environment["NODE_OPTIONS"])
    assert.deepStrictEqual(cpuProfileFlags(environment), ["--cpu-prof", "--cpu-prof-dir=/tmp/profiles", "--cpu-prof-interval=500"])
    assert.deepStrictEqual(cpuProfileFlags(childEnvironment(options, 9000, token, {})), [])
  })
})
