/**
 * The processes the fault harness kills: each is started in its own process
 * group (`detached`), so that one SIGKILL to the group also takes the children
 * the process started itself. The embedded mode's anvil and guardian run in groups
 * of their own (so that a signal to the server's group reaches the server alone,
 * which stops them in order); they are registered too, found by their pid files.
 * Nothing outlives the harness: a group is known dead only when signal 0 to it
 * fails with ESRCH, and an exit hook kills every group still registered if the
 * harness itself dies.
 *
 * `FaultTarget` is the hook for more than one process. The embedded guardian is
 * moving into a child process of the server (src/guardian/EmbeddedGuardian.ts,
 * `DATA_DIR/guardian.pid`, its own process group): when that file exists, a server
 * kill also SIGKILLs the guardian's group (a host crash: nobody shuts down cleanly),
 * and `guardianTarget` lets the schedule kill the guardian alone (the server's
 * supervisor restarts it). Where the guardian runs inside the server, the file is
 * absent and the server is the only target.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { ProcessMemory } from "@pps/guardian"
import { childNodeFlags } from "../../../../scripts/childEnvironment.ts"
import { freePort, groupAlive, registerGroup, strayGroups, unregisterGroup, waitGroupGone } from "../../scripts/cluster/processGroups.ts"

export { freePort, strayGroups }

/** A process (group) the harness can start, SIGKILL at any moment, and restart on the same data. */
export interface FaultTarget {
  readonly name: string
  /** Starts the process and resolves once it serves. */
  readonly start: () => Promise<void>
  /** SIGKILL to the whole group; resolves once no process of the group is left. */
  readonly kill: () => Promise<void>
  /** SIGTERM, then SIGKILL after a grace period; resolves once the group is gone. */
  readonly stop: () => Promise<void>
  /** How many times it was started (the first start included). */
  readonly starts: () => number
}

/** How long a group may take to vanish after SIGKILL: the kernel reaps it at once, anvil included. */
const groupGoneTimeoutMs = 10_000
/** A clean stop drains requests (SHUTDOWN_TIMEOUT_MS, 10 s by default) and stops anvil. */
const stopGraceMs = 15_000
/** Start-up on a loaded 2-core machine: PGlite (WASM), anvil from its state file, deployment checks. */
const readyTimeoutMs = 180_000
const readyPollMs = 200

/** Whether a process exists (signal 0); an exited child of ours is reaped by Node at once. */
const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const guardianPidFile = (dataDir: string) => path.join(dataDir, "guardian.pid")

/** The embedded guardian's pid (its group id too: it runs detached), when the topology has one. */
export const guardianPidOf = (dataDir: string): number | undefined => {
  try {
    const pid = Number(fs.readFileSync(guardianPidFile(dataDir), "utf8").trim())
    return Number.isSafeInteger(pid) && pid > 1 ? pid : undefined
  } catch {
    return undefined
  }
}

/** The embedded anvil's pid (its group id too: it runs in a group of its own), while it runs. */
const anvilPidOf = (dataDir: string): number | undefined => {
  try {
    const pid = Number(fs.readFileSync(path.join(dataDir, "chain", "anvil.pid"), "utf8").trim())
    return Number.isSafeInteger(pid) && pid > 1 ? pid : undefined
  } catch {
    return undefined
  }
}

/** SIGKILL to a group, then wait until none of it is left. */
const killGroup = async (group: number): Promise<void> => {
  try {
    process.kill(-group, "SIGKILL")
  } catch {
    // already gone
  }
  if (!(await waitGroupGone(group, groupGoneTimeoutMs))) throw new Error(`process group ${group} survived SIGKILL`)
  unregisterGroup(group)
}

/** Poll interval while the server's supervisor starts a new guardian. */
const guardianPollMs = 100

/**
 * The embedded guardian alone: killed with SIGKILL, "started" by waiting for the
 * server's supervisor to start the next one (a new pid in the pid file, alive).
 * Calls in between fail as unavailable, which clients retry.
 */
export const guardianTarget = (dataDir: string): FaultTarget => {
  let starts = 1
  let killed: number | undefined
  return {
    name: "guardian",
    start: async () => {
      const deadline = Date.now() + readyTimeoutMs
      for (;;) {
        const pid = guardianPidOf(dataDir)
        if (pid !== undefined && pid !== killed && groupAlive(pid)) {
          registerGroup(pid)
          starts++
          return
        }
        if (Date.now() > deadline) throw new Error(`the server did not start a new guardian in ${readyTimeoutMs} ms`)
        await sleep(guardianPollMs)
      }
    },
    kill: async () => {
      killed = guardianPidOf(dataDir)
      if (killed !== undefined) await killGroup(killed)
    },
    // The server stops its guardian in order on SIGTERM (serverTarget's stop checks it is gone).
    stop: async () => {},
    starts: () => starts
  }
}

const mainPath = fileURLToPath(new URL("../../src/main.ts", import.meta.url))

export interface ServerTargetOptions {
  readonly dataDir: string
  readonly port: number
  readonly adminPort: number
  /** Extra environment (e.g. WEBHOOK_ALLOW_INSECURE_LOOPBACK). */
  readonly env: Record<string, string>
  /** Every line the server writes, appended here (kept for a failed run). */
  readonly logFile: string
}

/**
 * The api server as `npm start` runs it (src/main.ts, with scripts/start.sh's node flags and
 * malloc settings: ProcessMemory, D67), embedded default: PGlite, its guardian child, anvil as its
 * child, all under `dataDir`. Started from a test process it also takes that process's
 * WebAssembly flags (D95: it lives as briefly as the test); from a benchmark, none.
 */
export const serverTarget = (options: ServerTargetOptions): FaultTarget => {
  let group: number | undefined
  let starts = 0
  const log = fs.openSync(options.logFile, "a")

  const start = async () => {
    starts++
    fs.writeSync(log, `\n--- start ${starts} at ${new Date().toISOString()} ---\n`)
    const spawned = spawn(process.execPath, [...ProcessMemory.nodeFlags, ...childNodeFlags(), mainPath], {
      env: {
        ...process.env,
        ...ProcessMemory.withMallocEnvironment(process.env),
        DATA_DIR: options.dataDir,
        PORT: String(options.port),
        ADMIN_PORT: String(options.adminPort),
        LOG_LEVEL: "Warn",
        ...options.env
      },
      stdio: ["ignore", log, log],
      detached: true
    })
    if (spawned.pid === undefined) throw new Error("the server process started without a pid")
    group = spawned.pid
    registerGroup(spawned.pid)
    let exitCode: number | null | undefined
    spawned.once("exit", (code, signal) => (exitCode = code ?? (signal === null ? null : -1)))
    const deadline = Date.now() + readyTimeoutMs
    for (;;) {
      if (exitCode !== undefined) {
        throw new Error(`the server exited during start-up (code ${exitCode}); see ${options.logFile}`)
      }
      try {
        const response = await fetch(`http://127.0.0.1:${options.port}/readyz`, { signal: AbortSignal.timeout(2_000) })
        if (response.status === 200) {
          for (const own of [guardianPidOf(options.dataDir), anvilPidOf(options.dataDir)]) {
            if (own !== undefined) registerGroup(own)
          }
          return
        }
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`the server did not become ready in ${readyTimeoutMs} ms; see ${options.logFile}`)
      await sleep(readyPollMs)
    }
  }

  /** Groups a killed server left: its anvil's (a group of its own), until the next start stops it. */
  const killedGroups = new Set<number>()

  const finish = async (first: "SIGKILL" | "SIGTERM") => {
    const current = group
    if (current === undefined) return
    if (first === "SIGKILL") {
      // `kill -9 <server pid>`, as an operator or the OOM killer would: the server process
      // dies at whatever line it is on; its anvil child (the chain node, a process of its
      // own) lives on, and the next start writes its state and stops it (DevChain). The
      // guardian child dies at the same instant. Killing anvil too would be a host crash,
      // which the embedded chain does not survive: its state is written once the chain
      // rests and every 30 s under load (D89, docs/reliability.md).
      const guardian = guardianPidOf(options.dataDir)
      const anvil = anvilPidOf(options.dataDir)
      if (guardian !== undefined) {
        try {
          process.kill(-guardian, "SIGKILL")
        } catch {
          // already gone
        }
      }
      try {
        process.kill(current, "SIGKILL")
      } catch {
        // already gone
      }
      const deadline = Date.now() + groupGoneTimeoutMs
      while (processAlive(current)) {
        if (Date.now() > deadline) throw new Error(`server ${current} survived SIGKILL`)
        await sleep(20)
      }
      if (guardian !== undefined) {
        await killGroup(guardian)
        unregisterGroup(guardian)
      }
      killedGroups.add(current)
      if (anvil !== undefined) killedGroups.add(anvil)
      group = undefined
      return
    }
    // SIGTERM: the server stops its guardian and anvil in order.
    const guardian = guardianPidOf(options.dataDir)
    const anvil = anvilPidOf(options.dataDir)
    try {
      process.kill(-current, first)
    } catch {
      // the group is already gone
    }
    let gone = await waitGroupGone(current, stopGraceMs)
    if (!gone) {
      try {
        process.kill(-current, "SIGKILL")
      } catch {
        // gone meanwhile
      }
      gone = await waitGroupGone(current, groupGoneTimeoutMs)
    }
    if (!gone) throw new Error(`process group ${current} survived SIGKILL`)
    unregisterGroup(current)
    group = undefined
    // Anything a killed server left (an anvil no later start stopped) goes too.
    for (const killed of killedGroups) {
      if (groupAlive(killed)) await killGroup(killed)
      unregisterGroup(killed)
    }
    killedGroups.clear()
    for (const own of [guardian, anvil]) {
      if (own === undefined) continue
      // One still there after the server is gone is a leftover, killed all the same.
      if (!(await waitGroupGone(own, stopGraceMs))) await killGroup(own)
      unregisterGroup(own)
    }
  }

  return {
    name: "server",
    start,
    kill: () => finish("SIGKILL"),
    stop: async () => {
      await finish("SIGTERM")
      fs.closeSync(log)
    },
    starts: () => starts
  }
}

/**
 * `serverTarget` in a fresh work directory under the system's temporary one (named after `prefix`):
 * its `data` folder the server's DATA_DIR, its `server.log` the server's output, on two free ports.
 * Not started.
 */
export const freshServerTarget = async (prefix: string, env: Record<string, string>) => {
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  const dataDir = path.join(workDir, "data")
  fs.mkdirSync(dataDir)
  const [port, adminPort] = [await freePort(), await freePort()]
  const server = serverTarget({ dataDir, port, adminPort, logFile: path.join(workDir, "server.log"), env })
  return { workDir, dataDir, port, adminPort, server }
}
