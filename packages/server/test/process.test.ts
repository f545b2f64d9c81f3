/**
 * The server as a process, started the way `pnpm start` starts it: it serves,
 * refuses a second start on the same data directory with a clear message,
 * shuts down on SIGTERM releasing its lock, and takes over the stale lock of a
 * process killed with SIGKILL.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { freePort } from "../../../scripts/freePort.ts"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { childNodeFlags } from "../../../scripts/childEnvironment.ts"

const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
})

const start = (dataDir: string, port: number, adminPort: number) => {
  const child = spawn(process.execPath, [...childNodeFlags(), main], {
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), ADMIN_PORT: String(adminPort), LOG_LEVEL: "Warn" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  let output = ""
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, exited, output: () => output }
}

const waitHealthy = async (port: number, timeoutMs = 120_000) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`)
      if (response.status === 200) return
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`server on ${port} did not become healthy`)
}

describe("server process", () => {
  it("serves, refuses a second start on its data dir, stops on SIGTERM, survives SIGKILL", { timeout: 360_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-proc-"))
    try {
      const [port, adminPort, port2, adminPort2] = await Promise.all([freePort(), freePort(), freePort(), freePort()])
      const first = start(dataDir, port, adminPort)
      await waitHealthy(port)
      // The banner says what the embedded default is (it follows the listeners by a moment).
      const bannerDeadline = Date.now() + 10_000
      while (!first.output().includes("every key on it") && Date.now() < bannerDeadline) await new Promise((r) => setTimeout(r, 100))
      assert.include(first.output(), "Embedded default: one machine, one user, every key on it.")
      assert.include(first.output(), "can read every amount and move every account's funds")
      assert.isTrue(fs.existsSync(path.join(dataDir, "server.lock")))
      assert.isTrue(fs.existsSync(path.join(dataDir, "secrets.json")))
      assert.strictEqual(fs.statSync(path.join(dataDir, "secrets.json")).mode & 0o777, 0o600)
      const admin = JSON.parse(fs.readFileSync(path.join(dataDir, "admin.json"), "utf8")) as { admin_url: string }
      assert.strictEqual(admin.admin_url, `http://127.0.0.1:${adminPort}`)

      const second = start(dataDir, port2, adminPort2)
      assert.strictEqual(await second.exited, 1)
      assert.match(second.output(), /already running on data directory/)

      // A port in use (here: the first server's) is named in the refusal, not left blank.
      const otherDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-proc-port-"))
      try {
        const clash = start(otherDir, port, adminPort2)
        assert.strictEqual(await clash.exited, 1)
        assert.include(clash.output(), `pps: cannot start: Cannot listen on 127.0.0.1:${port}: listen EADDRINUSE`)
      } finally {
        fs.rmSync(otherDir, { recursive: true, force: true })
      }

      first.child.kill("SIGTERM")
      const code = await first.exited
      // An orderly stop is a clean exit (main.ts's teardown), not the runtime's 130 for an interruption.
      assert.strictEqual(code, 0, `exit code ${code}`)
      assert.isFalse(fs.existsSync(path.join(dataDir, "server.lock")), "the lock is released on shutdown")

      // kill -9 leaves the lock behind; the next start takes it over and keeps the data.
      const third = start(dataDir, port, adminPort)
      await waitHealthy(port)
      third.child.kill("SIGKILL")
      await third.exited
      assert.isTrue(fs.existsSync(path.join(dataDir, "server.lock")))
      const fourth = start(dataDir, port, adminPort)
      await waitHealthy(port)
      fourth.child.kill("SIGTERM")
      await fourth.exited
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
