/**
 * The anvil launcher: it starts the platform binary on loopback with the requested chain,
 * persists state across a SIGKILL (or, byCaller, only where the caller wrote it), refuses a port owned by another chain, gives up after its
 * readiness timeout, and leaves no process behind.
 */
import { chmod, mkdtemp, readdir, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createPublicClient, createTestClient, http, parseEther } from "viem"
import * as Anvil from "../src/anvil.ts"

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

let directory: string
beforeAll(async () => {
  directory = await mkdtemp(join(tmpdir(), "pps-anvil-"))
})
afterAll(async () => {
  await rm(directory, { recursive: true, force: true })
})

describe("Anvil", () => {
  it("resolves the platform binary, not the .bin wrapper", () => {
    expect(Anvil.resolveBinaryPath()).toMatch(/@foundry-rs[\\/]anvil-[a-z0-9]+-[a-z0-9]+[\\/]bin[\\/]anvil(\.exe)?$/)
  })

  it("starts on a free loopback port with chain 46630 and the requested gas limit, and stops", async () => {
    const anvil = await Anvil.start({ blockGasLimit: 1_000_000_000n, blockTimeSeconds: 0.1 })
    try {
      expect(anvil.rpcUrl).toBe(`http://127.0.0.1:${anvil.port}`)
      const client = createPublicClient({ transport: http(anvil.rpcUrl) })
      expect(await client.getChainId()).toBe(46_630)
      expect((await client.getBlock()).gasLimit).toBe(1_000_000_000n)
      // Interval mining: blocks keep coming without transactions.
      const first = await client.getBlockNumber({ cacheTime: 0 })
      await new Promise((resolve) => setTimeout(resolve, 350))
      expect(await client.getBlockNumber({ cacheTime: 0 })).toBeGreaterThan(first)
      expect(isAlive(anvil.pid)).toBe(true)
    } finally {
      await anvil.stop()
    }
    expect(isAlive(anvil.pid)).toBe(false)
    await anvil.stop() // stopping twice is harmless
  })

  it("keeps state across a SIGKILL when given a state path", async () => {
    const statePath = join(directory, "state.json")
    const holder = "0x00000000000000000000000000000000000000aa"
    const first = await Anvil.start({ chainId: 4663, statePath, blockTimeSeconds: 0.1 })
    try {
      await createTestClient({ mode: "anvil", transport: http(first.rpcUrl) }).setBalance({ address: holder, value: parseEther("7") })
      // --state-interval 1: one full interval plus margin guarantees a dump after the change.
      await new Promise((resolve) => setTimeout(resolve, 2_200))
    } finally {
      await first.kill()
    }
    expect(isAlive(first.pid)).toBe(false)
    const second = await Anvil.start({ chainId: 4663, statePath, blockTimeSeconds: 0.1 })
    try {
      const client = createPublicClient({ transport: http(second.rpcUrl) })
      expect(await client.getBalance({ address: holder })).toBe(parseEther("7"))
      expect(await client.getChainId()).toBe(4663)
    } finally {
      await second.stop()
    }
  })

  it("byCaller: anvil writes no state of its own, and writeState writes what the next start loads, atomically", async () => {
    const statePath = join(directory, "by-caller.json")
    const holder = "0x00000000000000000000000000000000000000bb"
    const options = { chainId: 4664, statePath, mining: "onDemand", stateIntervalSeconds: "byCaller" } as const
    const first = await Anvil.start(options)
    try {
      const cheats = createTestClient({ mode: "anvil", transport: http(first.rpcUrl) })
      await cheats.setBalance({ address: holder, value: parseEther("3") })
      await cheats.mine({ blocks: 4 })
      await Anvil.writeState(first.rpcUrl, statePath, AbortSignal.timeout(30_000))
      await cheats.setBalance({ address: holder, value: parseEther("9") })
      await cheats.mine({ blocks: 1 })
      // An abandoned write changes nothing and leaves no temporary file behind.
      await expect(Anvil.writeState(first.rpcUrl, statePath, AbortSignal.abort())).rejects.toThrow()
      expect((await readdir(directory)).filter((name) => name.endsWith(".writing"))).toEqual([])
    } finally {
      // SIGTERM: a `--state` node would write its state now; a byCaller one does not.
      await first.stop()
    }
    const second = await Anvil.start(options)
    try {
      const client = createPublicClient({ transport: http(second.rpcUrl) })
      expect(await client.getBalance({ address: holder })).toBe(parseEther("3"))
      expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(4n)
    } finally {
      await second.stop()
    }
  })

  it("refuses a port where another chain answers", async () => {
    const occupant = await Anvil.start({ chainId: 31_337 })
    try {
      await expect(Anvil.start({ port: occupant.port, readyTimeoutMs: 3_000 })).rejects.toThrow(/anvil/)
      // The occupant is untouched.
      expect(await createPublicClient({ transport: http(occupant.rpcUrl) }).getChainId()).toBe(31_337)
    } finally {
      await occupant.stop()
    }
  })

  it("gives up after the readiness timeout and kills what it started", async () => {
    const silent = join(directory, "silent.sh")
    await writeFile(silent, `#!/bin/sh\necho $$ > "${join(directory, "silent.pid")}"\nexec sleep 30\n`)
    await chmod(silent, 0o755)
    await expect(Anvil.start({ binaryPath: silent, readyTimeoutMs: 400 })).rejects.toThrow(/did not answer/)
    const { readFile } = await import("node:fs/promises")
    const pid = Number((await readFile(join(directory, "silent.pid"), "utf8")).trim())
    expect(isAlive(pid)).toBe(false)
  })
})
