/**
 * The anvil launcher: it starts the platform binary on loopback with the requested chain,
 * persists state across a SIGKILL (or, byCaller, only where the caller wrote it), refuses a port owned by another chain, gives up after its
 * readiness timeout, and leaves no process behind.
 */
import { chmod, mkdtemp, readdir, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
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

  it("a switch of who writes the state keeps the chain: anvil's own file, then the caller's, then anvil's again", async () => {
    const statePath = join(directory, "switch.json")
    const holder = "0x00000000000000000000000000000000000000cc"
    const balanceAfter = async (options: Parameters<typeof Anvil.start>[0], set: bigint | undefined) => {
      const node = await Anvil.start({ chainId: 4665, statePath, mining: "onDemand", ...options })
      try {
        const balance = await createPublicClient({ transport: http(node.rpcUrl) }).getBalance({ address: holder })
        if (set !== undefined) {
          const cheats = createTestClient({ mode: "anvil", transport: http(node.rpcUrl) })
          await cheats.setBalance({ address: holder, value: set })
          await cheats.mine({ blocks: 1 })
          if (options?.stateIntervalSeconds === "byCaller") await Anvil.writeState(node.rpcUrl, statePath, AbortSignal.timeout(30_000))
        }
        return balance
      } finally {
        await node.stop() // anvil's own mode writes its state at SIGTERM
      }
    }
    expect(await balanceAfter({ stateIntervalSeconds: 60 }, 5n)).toBe(0n)
    expect(await balanceAfter({ stateIntervalSeconds: "byCaller" }, 6n)).toBe(5n)
    // The caller's first write removed the older unzipped file: only the gzipped state is left.
    expect((await readdir(directory)).filter((name) => name.startsWith("switch.json"))).toEqual(["switch.json.gz"])
    expect(await balanceAfter({ stateIntervalSeconds: 60 }, 7n)).toBe(6n)
    // Anvil's own mode unzipped it and writes the unzipped file from then on: the gzip is gone.
    expect((await readdir(directory)).filter((name) => name.startsWith("switch.json"))).toEqual(["switch.json"])
    expect(await balanceAfter({ stateIntervalSeconds: "byCaller" }, undefined)).toBe(7n)
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

/** What `ResultHexDigits` makes of an answer that arrives in these chunks. */
const resultBytes = async (chunks: ReadonlyArray<string>): Promise<string> => {
  const out: Array<Buffer> = []
  await pipeline(Readable.from(chunks.map((chunk) => Buffer.from(chunk, "latin1"))), new Anvil.ResultHexDigits(), async (source) => {
    for await (const chunk of source) out.push(chunk as Buffer)
  })
  return Buffer.concat(out).toString("hex")
}

describe("ResultHexDigits (anvil_dumpState's answer, streamed)", () => {
  const answer = `{"jsonrpc":"2.0","id":1,"result":"0x0a1b2c3d4e5fA0"}`

  it("reads the result's bytes however the answer is split into chunks", async () => {
    for (let first = 1; first < answer.length; first++) {
      for (let second = first; second < answer.length; second++) {
        const chunks = [answer.slice(0, first), answer.slice(first, second), answer.slice(second)].filter((chunk) => chunk !== "")
        expect(await resultBytes(chunks)).toBe("0a1b2c3d4e5fa0")
      }
    }
  })

  it("fails on an error answer, a truncated one, an odd number of digits, and a digit that is not hex", async () => {
    await expect(resultBytes([`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"no"}}`])).rejects.toThrow(/without a result/)
    await expect(resultBytes([`{"jsonrpc":"2.0","id":1,"result":"0x0a1b`])).rejects.toThrow(/ended inside/)
    await expect(resultBytes([`{"jsonrpc":"2.0","id":1,"result":"0x0a1"}`])).rejects.toThrow(/ended inside/)
    await expect(resultBytes([`{"jsonrpc":"2.0","id":1,"result":"0x0a`, `1g"}`])).rejects.toThrow(/not hex/)
  })
})
