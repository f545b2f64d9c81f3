/**
 * kill -9 with deliveries due, then restart (D32's persisted schedule): the restarted node
 * attempts every due delivery, and no delivery is ever sent twice at the same
 * time — nor two deliveries of one subscription at once. The node runs as a
 * real process on embedded PGlite; the receiver is real HTTPS on loopback.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { makeTestCa, removeTestCa, startReceiver } from "./support/webhooks-receiver.ts"
import { childNodeFlags } from "../../../scripts/childEnvironment.ts"

const node = fileURLToPath(new URL("./support/webhooks-node.ts", import.meta.url))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
})

const start = (env: Record<string, string>) => {
  const child = spawn(process.execPath, [...childNodeFlags(), node], {
    env: { ...process.env, LOG_LEVEL: "Warn", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let output = ""
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  return { child, exited, output: () => output }
}

const until = async (check: () => boolean, what: string, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe("webhook delivery across a crash", () => {
  it("after kill -9 and a restart every due delivery is attempted, none twice concurrently", { timeout: 120_000 }, async () => {
    const ca = makeTestCa()
    // Phase 1: the receiver holds every request open, so the node dies mid-attempt.
    let answering = false
    const receiver = await startReceiver(ca, () => (answering ? { status: 200, delayMs: 5 } : { status: 200, hang: true }))
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-crash-"))
    const subscriptions = 3
    const eventsPerAccount = 10
    const env = {
      DATA_DIR: dataDir,
      WEBHOOK_CA_FILE: ca.caFile,
      WEBHOOK_ALLOW_INSECURE_LOOPBACK: "1",
      PPS_TEST_RECEIVER: receiver.url,
      PPS_TEST_SUBSCRIPTIONS: String(subscriptions),
      PPS_TEST_EVENTS: String(eventsPerAccount)
    }
    try {
      const first = start({ ...env, PPS_TEST_SEED: "1" })
      // One request per subscription goes out and hangs; the other 27 wait their turn.
      await until(() => receiver.requests.length === subscriptions, "the first attempts", 60_000)
      await new Promise((resolve) => setTimeout(resolve, 300))
      assert.strictEqual(receiver.requests.length, subscriptions, "one delivery at a time per subscription")
      first.child.kill("SIGKILL")
      await first.exited
      // The dead node's sockets close; nothing is left open at the receiver.
      await until(() => [...receiver.openByDelivery.values()].every((open) => open === 0), "the killed node's requests to close")

      answering = true
      const second = start(env)
      await until(() => {
        const delivered = new Set(
          receiver.requests.slice(subscriptions).map((request) => String(request.headers["x-service-delivery-id"]))
        )
        return delivered.size === subscriptions * eventsPerAccount
      }, "every delivery after the restart", 60_000)
      // Let any (wrong) extra attempt surface.
      await new Promise((resolve) => setTimeout(resolve, 500))
      const afterRestart = receiver.requests.slice(subscriptions)
      const ids = afterRestart.map((request) => String(request.headers["x-service-delivery-id"]))
      assert.strictEqual(new Set(ids).size, subscriptions * eventsPerAccount, "every due delivery was attempted")
      assert.strictEqual(ids.length, subscriptions * eventsPerAccount, "and each exactly once after the restart")
      const events = new Set(afterRestart.map((request) => String(request.headers["x-service-event-id"])))
      assert.strictEqual(events.size, subscriptions * eventsPerAccount)
      // The three deliveries in flight at the kill were attempted again (at least once semantics)...
      for (const hung of receiver.requests.slice(0, subscriptions)) {
        assert.include(ids, String(hung.headers["x-service-delivery-id"]))
      }
      // ...but never while the first attempt was still open, and never two of a subscription at once.
      assert.deepStrictEqual(receiver.concurrentDuplicates, [])
      for (const [pathname, max] of receiver.maxOpenByPath) assert.strictEqual(max, 1, pathname)
      second.child.kill("SIGTERM")
      await second.exited
    } finally {
      await receiver.close()
      removeTestCa(ca)
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
