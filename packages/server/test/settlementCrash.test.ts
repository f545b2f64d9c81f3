/**
 * Settlement exactly once across a crash: kill -9 of the process during a 500-transfer batch, then
 * a restart on the same data dir: every transfer ends confirmed or failed exactly
 * once on chain — each transfer id has exactly one event, no submission stays
 * open, and none is applied twice.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Anvil } from "@pps/contracts"
import { createPublicClient, http } from "viem"
import { transferIdFrom } from "./support/chainFixtures.ts"
import { childNodeFlags } from "../../../scripts/childEnvironment.ts"

const worker = fileURLToPath(new URL("./support/settlementWorker.ts", import.meta.url))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
})

const run = (env: Record<string, string>, onLine: (line: string) => void) => {
  const child = spawn(process.execPath, [...childNodeFlags(), worker], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let buffered = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    buffered += chunk.toString()
    const lines = buffered.split("\n")
    buffered = lines.pop() ?? ""
    lines.forEach(onLine)
  })
  let errors = ""
  child.stderr!.on("data", (chunk: Buffer) => (errors += chunk.toString()))
  const exited = new Promise<{ code: number | null; errors: string }>((resolve) =>
    child.once("exit", (code) => resolve({ code, errors }))
  )
  return { child, exited }
}

describe("settlement survives kill -9", () => {
  it("every one of 500 transfers ends exactly once on chain after a crash and a restart", { timeout: 300_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-crash-"))
    const env = { DATA_DIR: dataDir, BATCH_SIZE: "500", SEED: "crash-test" }
    try {
      // First run: SIGKILL once 200 transfers have been submitted.
      let killedAt = 0
      const first = run(env, (line) => {
        const submitted = /^submitted (\d+)$/.exec(line)
        if (submitted !== null && Number(submitted[1]) >= 200 && killedAt === 0) {
          killedAt = Number(submitted[1])
          first.child.kill("SIGKILL")
        }
      })
      const firstExit = await first.exited
      assert.isAbove(killedAt, 0, `the first run should be killed mid-batch (exit ${firstExit.code}: ${firstExit.errors})`)
      assert.isTrue(fs.existsSync(path.join(dataDir, "server.lock")), "a SIGKILLed process leaves its lock")

      // Second run: recovers what was in flight and finishes the batch.
      let result: { confirmed: number; failed: number; pending: number; open: number; contract: `0x${string}`; rpcUrl: string } | undefined
      const second = run(env, (line) => {
        if (line.startsWith("result ")) result = JSON.parse(line.slice("result ".length))
      })
      const secondExit = await second.exited
      assert.strictEqual(secondExit.code, 0, secondExit.errors)
      assert.isDefined(result)
      assert.strictEqual(result!.confirmed + result!.failed, 500, JSON.stringify(result))
      assert.strictEqual(result!.pending, 0)
      assert.strictEqual(result!.open, 0)
      // Nothing here should fail: every request is valid and its nonce unique.
      assert.strictEqual(result!.confirmed, 500, JSON.stringify(result))

      // On chain: exactly one transfer event per transfer id. The worker stopped its
      // anvil gracefully (state written), so a node started on that state shows it all.
      const node = await Anvil.start({ statePath: path.join(dataDir, "chain", "state.json"), blockTimeSeconds: 1 })
      try {
        const client = createPublicClient({ transport: http(node.rpcUrl) })
        const logs = await client.request({
          method: "eth_getLogs",
          params: [{ address: result!.contract, fromBlock: "0x0", toBlock: "latest" }]
        })
        const counts = new Map<string, number>()
        for (const log of logs) {
          const transferId = log.topics[3]
          if (transferId !== undefined) counts.set(transferId, (counts.get(transferId) ?? 0) + 1)
        }
        for (let i = 0; i < 500; i++) {
          const id = transferIdFrom(`crash-test-${i}`)
          assert.strictEqual(counts.get(id), 1, `transfer ${i} should have exactly one event`)
        }
      } finally {
        await node.stop()
      }
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
