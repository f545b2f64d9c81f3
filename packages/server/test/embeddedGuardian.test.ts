/**
 * The embedded default tells the truth: the server started as `npm start` starts it runs
 * the guardian as its own child process, on its own directory and secret, which the api
 * process never opens nor receives; transfers go through it; a guardian that dies is
 * started again and transfers resume; a server killed with SIGKILL leaves no guardian
 * behind, and the next start on the same data directory is not blocked by one.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { ProcessMemory } from "@pps/guardian"
import { Effect, Schema } from "effect"
import { freePort as freeLoopbackPort } from "../../../scripts/freePort.ts"
import { guardianMainPath, listenerIsChilds, pidFileName } from "../src/guardian/EmbeddedGuardian.ts"
import { registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, postJson, send } from "./support/http.ts"
import { childNodeFlags } from "../../../scripts/childEnvironment.ts"

const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))

const freePort = Effect.promise(freeLoopbackPort)

interface ProcessInfo {
  readonly pid: number
  readonly ppid: number
  readonly cmdline: string
  readonly environ: string
}

const readOr = (file: string, fallback: string): string => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return fallback
  }
}

/** Every process we may inspect, from /proc (Linux). */
const processes = (): Array<ProcessInfo> =>
  fs.readdirSync("/proc").filter((name) => /^[0-9]+$/.test(name)).flatMap((name) => {
    const stat = readOr(`/proc/${name}/stat`, "")
    if (stat === "") return []
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
    return [{ pid: Number(name), ppid, cmdline: readOr(`/proc/${name}/cmdline`, ""), environ: readOr(`/proc/${name}/environ`, "") }]
  })

/** The guardian processes started for this data directory (whoever their parent is now). */
const guardiansOf = (dataDir: string) =>
  processes().filter((p) => p.cmdline.includes(guardianMainPath) && p.environ.split("\0").includes(`DATA_DIR=${dataDir}`))

const isAlive = (pid: number) => fs.existsSync(`/proc/${pid}`) && !readOr(`/proc/${pid}/stat`, "").includes(") Z ")

const waitFor = <A>(what: string, probe: () => A | undefined, timeoutMs: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const found = probe()
      if (found !== undefined) return found
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep(200)
    }
  })

interface ServerProcess {
  readonly child: ChildProcess
  readonly pid: number
  readonly output: () => string
  readonly exited: Promise<number | null>
}

/**
 * The server as `npm start` runs it (with this test process's WebAssembly flags, D95), in its own
 * process group (killed at the end); its anvil (a group of its own) and guardians of the data
 * directory are killed too, whatever happened.
 */
const startServer = (dataDir: string, port: number, adminPort: number) =>
  Effect.acquireRelease(
    Effect.sync((): ServerProcess => {
      const child = spawn(process.execPath, [...childNodeFlags(), main], {
        env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), ADMIN_PORT: String(adminPort), LOG_LEVEL: "Info" },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true
      })
      let output = ""
      child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
      return { child, pid: child.pid!, output: () => output, exited }
    }),
    (server) =>
      Effect.sync(() => {
        try {
          process.kill(-server.pid, "SIGKILL")
        } catch {
          // already gone
        }
        for (const guardian of guardiansOf(dataDir)) process.kill(guardian.pid, "SIGKILL")
        try {
          // Still running only if the server did not stop it (its pid file is removed then).
          process.kill(Number.parseInt(fs.readFileSync(path.join(dataDir, "chain", "anvil.pid"), "utf8"), 10), "SIGKILL")
        } catch {
          // stopped by the server, or gone
        }
      })
  )

/** On failure, the end of the server's log (its guardian's lines included) says why. */
const explainFailure = (server: ServerProcess) =>
  Effect.onError(() => Effect.sync(() => process.stderr.write(`\n--- server output (tail) ---\n${server.output().slice(-12_000)}\n`)))

const waitHealthy = (server: ServerProcess, port: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 120_000
    for (;;) {
      const healthy = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status === 200, () => false)
      )
      if (healthy) return
      if (server.child.exitCode !== null) return yield* Effect.die(new Error(`server exited: ${server.output()}`))
      if (Date.now() > deadline) return yield* Effect.die(new Error(`server did not become healthy: ${server.output()}`))
      yield* Effect.sleep(250)
    }
  })

const TransferAnswer = Schema.Struct({ transfer_id: Schema.String, status: Schema.String })

/**
 * Two fresh accounts, keys, a faucet grant and a transfer between them: the guardian
 * authorizes it (and refuses an overdraft) and it settles.
 */
const transferWorks = (baseUrl: string, adminUrl: string, adminToken: string, round: string) =>
  Effect.gen(function*() {
    const admin = { adminUrl, adminToken }
    const payer = yield* createAccount(admin, `payer.${round}`)
    const payee = yield* createAccount(admin, `payee.${round}`)
    yield* registerKey(baseUrl, payer.api_key)
    yield* registerKey(baseUrl, payee.api_key)
    const post = (amount: string) =>
      send(`${baseUrl}/v1/transfers`, postJson(bearer(payer.api_key), { to: `@payee.${round}`, amount }))
    // Before any funds: the guardian itself answers that the balance does not cover it.
    const overdraft = yield* post("1")
    assert.strictEqual(overdraft.status, 402, overdraft.text)
    const grant = yield* send(`${baseUrl}/v1/test/faucet`, postJson(bearer(payer.api_key), { amount: "10" }))
    assert.strictEqual(grant.status, 200, grant.text)
    const created = yield* post("3")
    assert.strictEqual(created.status, 201, created.text)
    const transfer = Schema.decodeUnknownSync(TransferAnswer)(created.json)
    // Under load settlement may outlast the create timeout (D14): then it answers pending first.
    const deadline = Date.now() + 60_000
    let status = transfer.status
    while (status === "pending" && Date.now() < deadline) {
      yield* Effect.sleep(500)
      const read = yield* send(`${baseUrl}/v1/transfers/${transfer.transfer_id}`, { headers: bearer(payer.api_key) })
      status = Schema.decodeUnknownSync(TransferAnswer)(read.json).status
    }
    assert.strictEqual(status, "confirmed")
  })

describe("the guardian's port is the child's before the token is sent", () => {
  it.effect("a listener is recognised as its own process's, and as no other process's", () =>
    Effect.gen(function*() {
      const listener = net.createServer()
      const port = yield* Effect.promise(() =>
        new Promise<number>((resolve) => listener.listen(0, "127.0.0.1", () => resolve((listener.address() as net.AddressInfo).port)))
      )
      // Someone else's process (here: a sleeping child) does not own this listener; this process does.
      const other = spawn("sleep", ["5"], { stdio: "ignore" })
      try {
        assert.strictEqual(listenerIsChilds(process.pid, port), true)
        assert.strictEqual(listenerIsChilds(other.pid!, port), false)
      } finally {
        other.kill()
        yield* Effect.promise(() => new Promise<void>((resolve) => listener.close(() => resolve())))
      }
      // Nobody listens any more: not the child's.
      assert.strictEqual(listenerIsChilds(process.pid, port), false)
    }))
})

describe("embedded guardian", () => {
  it.live("runs as the server's child process with its own directory and secret, restarts, dies with its parent", () =>
    Effect.gen(function*() {
      const dataDir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "pps-embedded-guardian-"))),
        (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
      )
      const guardianDir = path.join(dataDir, "guardian")
      const [port, adminPort] = [yield* freePort, yield* freePort]
      const baseUrl = `http://127.0.0.1:${port}`
      const adminUrl = `http://127.0.0.1:${adminPort}`

      const server = yield* startServer(dataDir, port, adminPort)
      yield* waitHealthy(server, port)
      const adminToken = (JSON.parse(fs.readFileSync(path.join(dataDir, "secrets.json"), "utf8")) as { admin_token: string }).admin_token

      // A separate process, the server's child, named by the pid file outside its directory.
      const [guardian] = guardiansOf(dataDir)
      assert.isDefined(guardian, "a guardian process runs")
      assert.notStrictEqual(guardian!.pid, server.pid)
      assert.strictEqual(guardian!.ppid, server.pid)
      assert.strictEqual(guardiansOf(dataDir).length, 1)
      assert.strictEqual(Number(fs.readFileSync(path.join(dataDir, pidFileName), "utf8")), guardian!.pid)

      yield* transferWorks(baseUrl, adminUrl, adminToken, "one").pipe(explainFailure(server))

      // Its directory and secret are private, and the api process holds nothing of them.
      assert.strictEqual(fs.statSync(guardianDir).mode & 0o777, 0o700)
      const secretFile = path.join(guardianDir, "guardian-secret.json")
      assert.strictEqual(fs.statSync(secretFile).mode & 0o777, 0o600)
      const guardianSecret = (JSON.parse(fs.readFileSync(secretFile, "utf8")) as { guardian_secret: string }).guardian_secret
      const openFiles = fs.readdirSync(`/proc/${server.pid}/fd`).map((fd) => {
        try {
          return fs.readlinkSync(`/proc/${server.pid}/fd/${fd}`)
        } catch {
          return ""
        }
      })
      // The probe sees the server's own files (its PGlite, its lock), so an empty answer means something.
      assert.isTrue(openFiles.some((target) => target.startsWith(`${dataDir}/`)), openFiles.join(", "))
      const openGuardianFiles = openFiles.filter((target) => target === guardianDir || target.startsWith(`${guardianDir}/`))
      assert.deepStrictEqual(openGuardianFiles, [], "the api process has no file of the guardian open")
      const serverEnviron = readOr(`/proc/${server.pid}/environ`, "")
      assert.notInclude(serverEnviron, "GUARDIAN_SECRET")
      assert.notInclude(serverEnviron, "GUARDIAN_SHARED_SECRET")
      assert.notInclude(serverEnviron, guardianSecret)
      // The guardian's key never travels: not in its environment, not on its command line.
      assert.notInclude(guardian!.environ, "GUARDIAN_SECRET=")
      assert.notInclude(guardian!.environ, guardianSecret)
      const channelToken = guardian!.environ.split("\0").find((entry) => entry.startsWith("GUARDIAN_SHARED_SECRET="))
      assert.isDefined(channelToken)
      assert.notInclude(guardian!.cmdline, channelToken!.slice("GUARDIAN_SHARED_SECRET=".length))
      // Its node flags: the service's (D67, D94), and the server's WebAssembly compiler flags, which
      // this test process gave the server (D95) and nothing else of the server's command line.
      const guardianWords = guardian!.cmdline.split("\0")
      const guardianNodeFlags = guardianWords.slice(1, guardianWords.indexOf(guardianMainPath))
      assert.deepStrictEqual(
        // A CPU profile's flags come from PPS_CPU_PROF_DIR, which a run of this test may have set.
        guardianNodeFlags.filter((flag) => flag !== "--disable-warning=ExperimentalWarning" && !flag.startsWith("--cpu-prof")),
        [...ProcessMemory.nodeFlags, ...ProcessMemory.webAssemblyFlags(process.execArgv)]
      )
      assert.include(guardianNodeFlags, "--liftoff-only")

      // The guardian dies: the server starts another and transfers resume.
      process.kill(guardian!.pid, "SIGKILL")
      const restarted = yield* waitFor(
        "the restarted guardian",
        () => server.output().includes("embedded guardian restarted") ? guardiansOf(dataDir).find((p) => p.pid !== guardian!.pid) : undefined,
        120_000
      )
      assert.strictEqual(restarted.ppid, server.pid)
      assert.isFalse(isAlive(guardian!.pid))
      yield* transferWorks(baseUrl, adminUrl, adminToken, "two").pipe(explainFailure(server))

      // kill -9 of the server: its guardian notices and exits; the next start is not blocked,
      // even while that guardian may still be shutting down.
      process.kill(server.pid, "SIGKILL")
      yield* Effect.promise(() => server.exited)
      const next = yield* startServer(dataDir, port, adminPort)
      yield* waitFor("the orphaned guardian to exit", () => (isAlive(restarted.pid) ? undefined : true), 30_000)
      yield* waitHealthy(next, port)
      const survivors = guardiansOf(dataDir)
      assert.strictEqual(survivors.length, 1, "exactly one guardian: the new server's")
      assert.strictEqual(survivors[0]!.ppid, next.pid)
      yield* transferWorks(baseUrl, adminUrl, adminToken, "three").pipe(explainFailure(next))

      // SIGTERM: the server stops its guardian and leaves no pid file.
      process.kill(next.pid, "SIGTERM")
      yield* Effect.promise(() => next.exited)
      assert.deepStrictEqual(guardiansOf(dataDir), [])
      assert.isFalse(fs.existsSync(path.join(dataDir, pidFileName)))
    }), { timeout: 420_000 })
})
