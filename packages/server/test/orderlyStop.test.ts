/**
 * An orderly stop of `npm start` (docs/operations.md, "Modes"): SIGTERM to its whole process
 * group, as a terminal's Ctrl-C or a supervisor's `kill -TERM -<pgid>` sends it, while the
 * server is busy (chain work done, an event stream open). The stream ends at once with a closing
 * comment naming the stop, so the drain does not wait SHUTDOWN_TIMEOUT_MS for it (before, every
 * restart of a server someone listened to took the whole timeout). The server stops first, then
 * the guardian child and the embedded anvil: npm exits 0, no line at WARN or above is written
 * (before that fix anvil died at once with the group's signal and every chain read of the drain
 * was logged as failed), and neither the guardian nor anvil is left.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { freePort, groupAlive } from "../scripts/cluster/processGroups.ts"

const repositoryRoot = fileURLToPath(new URL("../../../", import.meta.url))
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-orderly-stop-"))
/** How long the server may drain: long, so a drain held by the open stream shows. */
const shutdownTimeoutMs = 20_000

const processAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const pidIn = (file: string): number | undefined => {
  try {
    const pid = Number(fs.readFileSync(path.join(dataDir, file), "utf8").trim())
    return Number.isSafeInteger(pid) && pid > 1 ? pid : undefined
  } catch {
    return undefined
  }
}

let npm: ChildProcess | undefined
const leftovers: Array<number> = []
afterAll(() => {
  // Whatever a failed run left: the group, then the guardian and anvil (groups of their own).
  if (npm?.pid !== undefined && groupAlive(npm.pid)) process.kill(-npm.pid, "SIGKILL")
  for (const pid of leftovers) if (processAlive(pid)) process.kill(pid, "SIGKILL")
  fs.rmSync(dataDir, { recursive: true, force: true })
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("npm start, stopped with SIGTERM to its process group", () => {
  it("stops the server, then the guardian and anvil: exit 0, no warning or error line, nothing left", { timeout: 300_000 }, async () => {
    const [port, adminPort] = [await freePort(), await freePort()]
    const child = spawn("npm", ["start"], {
      cwd: repositoryRoot,
      env: {
        ...process.env,
        DATA_DIR: dataDir,
        PORT: String(port),
        ADMIN_PORT: String(adminPort),
        LOG_LEVEL: "Info",
        SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs),
        // The page is served as last built: the dashboard's own tests build it concurrently.
        PPS_SKIP_DASHBOARD_BUILD: "1"
      },
      stdio: ["ignore", "pipe", "pipe"],
      // A group of its own, as a terminal gives `npm start`: npm, its shell, the server.
      detached: true
    })
    npm = child
    let output = ""
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once("exit", (code, signal) => resolve({ code, signal }))
    )
    const baseUrl = `http://127.0.0.1:${port}`
    const deadline = Date.now() + 240_000
    for (;;) {
      const ready = await fetch(`${baseUrl}/readyz`).then((response) => response.status === 200, () => false)
      if (ready) break
      if (child.exitCode !== null || Date.now() > deadline) assert.fail(`npm start did not become ready:\n${output.slice(-6_000)}`)
      await sleep(250)
    }
    const guardian = pidIn("guardian.pid")
    const anvil = pidIn(path.join("chain", "anvil.pid"))
    assert.isDefined(guardian, "the embedded guardian's pid file")
    assert.isDefined(anvil, "the embedded anvil's pid file")
    leftovers.push(guardian!, anvil!)

    // Work on the chain, then an open event stream, which the stop must end.
    const { admin_token: adminToken } = JSON.parse(fs.readFileSync(path.join(dataDir, "secrets.json"), "utf8")) as { admin_token: string }
    const created = await fetch(`http://127.0.0.1:${adminPort}/admin/accounts`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ handle: "stopper", kyc_status: "verified" })
    })
    assert.strictEqual(created.status, 201)
    const { api_key: apiKey } = (await created.json()) as { api_key: string }
    const grant = await fetch(`${baseUrl}/v1/test/faucet`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ amount: "5" })
    })
    assert.strictEqual(grant.status, 200, await grant.text())
    const stream = await fetch(`${baseUrl}/v1/events/stream`, { headers: { authorization: `Bearer ${apiKey}` } })
    assert.strictEqual(stream.status, 200)
    let received = ""
    const reading = stream.body!.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({ write: (chunk) => void (received += chunk) })
    ).catch(() => undefined)
    const linesBeforeStop = output.split("\n").length

    const stoppedAt = Date.now()
    process.kill(-child.pid!, "SIGTERM")
    const exit = await exited
    const stopMs = Date.now() - stoppedAt
    await reading
    const log = output.split("\n")
    const context = `npm ${JSON.stringify(exit)} after ${stopMs} ms; output after the signal:\n${log.slice(linesBeforeStop - 1).join("\n").slice(-8_000)}`
    assert.deepStrictEqual(exit, { code: 0, signal: null }, context)
    // The stream ended with the stop, saying so; the drain did not wait for it.
    assert.include(received, ": closed: the server is stopping; resume with Last-Event-ID\n\n", context)
    assert.isBelow(stopMs, shutdownTimeoutMs / 2, context)
    const failures = log.filter((line) => /"level":"(WARN|ERROR|FATAL)"/.test(line) || /^npm (error|ERR!)/.test(line))
    assert.deepStrictEqual(failures, [], context)
    // Nothing is left: not the group, not the guardian or anvil (each in a group of its own).
    for (let waited = 0; waited < 10_000 && groupAlive(child.pid!); waited += 100) await sleep(100)
    assert.isFalse(groupAlive(child.pid!), "npm's process group is gone")
    assert.isFalse(processAlive(guardian!), "the guardian stopped")
    assert.isFalse(processAlive(anvil!), "anvil stopped")
    assert.isUndefined(pidIn("guardian.pid"), "the guardian's pid file is removed")
    assert.isUndefined(pidIn(path.join("chain", "anvil.pid")), "anvil's pid file is removed")
    assert.isFalse(fs.existsSync(path.join(dataDir, "server.lock")), "the data directory's lock is released")
  })
})
