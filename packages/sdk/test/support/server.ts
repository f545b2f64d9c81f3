/**
 * The real server for the command-line tests: `packages/server/src/main.ts` as
 * a child process, exactly as `npm start` runs it (embedded PGlite, anvil and
 * guardian), in a fresh data directory on free loopback ports; the admin command
 * (server/test/support/adminCli.ts) and `pps` (`runPps`) run against it in this process
 * through their command lines' entries, or any entry point as a child process (`runNode`).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as ppsCommands from "../../src/cli/ppsCommands.ts"
import { rpcUrlOfProcess } from "../../../contracts/src/anvil.ts"
import { runAdmin } from "../../../server/test/support/adminCli.ts"
import { freePort } from "../../../../scripts/freePort.ts"
import { childEnvironment, childNodeFlags } from "../../../../scripts/childEnvironment.ts"
import { runCaptured } from "../../../../scripts/commandLineRun.ts"

export const repositoryRoot = path.resolve(import.meta.dirname, "../../../..")
const nodeFlags = childNodeFlags()

/** What a child process printed and how it ended. */
export interface Run {
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
}

/** The stderr line of a `pps` POST command telling the Idempotency-Key it drew (cli/Connection.ts); group 1 is the key. */
export const drawnKeyLine = /^pps: Idempotency-Key (pps-[0-9a-f-]{36}) \(to repeat this request safely: --idempotency-key \1\)\n/gm

/** A run's output without that line: what the command said besides. */
export const withoutKeyLine = (run: Run): Run => ({ ...run, stderr: run.stderr.replace(drawnKeyLine, "") })

/** Runs a TypeScript entry point of the repository with Node and the given environment. */
export const runNode = (entry: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>>, timeoutMs = 30_000): Promise<Run> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [...nodeFlags, path.join(repositoryRoot, entry), ...args],
      // Only PATH (and the compile cache) is inherited, so no PPS_* variable of the machine leaks into a test.
      { cwd: repositoryRoot, env: { ...childEnvironment(), ...env }, timeout: timeoutMs },
      (error, stdout, stderr) => {
        const exitCode = error === null ? 0 : typeof error.code === "number" ? error.code : -1
        resolve({ exitCode, stdout, stderr })
      }
    )
  })

/**
 * Runs `pps ARGS` in this process, as `node packages/sdk/src/cli.ts ARGS` runs it in its own
 * (the same command tree, conventions and exit statuses, through `CommandLine.run`), with `env`
 * as its whole environment (nothing of this process's leaks in, as `runNode`'s only PATH does),
 * the repository root as its working directory and `env.HOME` (else this user's) as its home;
 * what it printed is captured. Starting Node on the sources costs 1-5 s a run on this machine:
 * the command-line tests run dozens. `quickstart.test.ts` and `listen` still run the real command.
 */
export const runPps = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>): Promise<Run> =>
  runCaptured({ root: ppsCommands.pps, program: ppsCommands.program, describe: ppsCommands.describe }, args, {
    env,
    cwd: repositoryRoot,
    homeDirectory: env["HOME"] ?? os.homedir()
  })

export interface ServerProcess {
  readonly baseUrl: string
  readonly dataDir: string
  /** Creates an account with verified KYC through the admin command; its API key. */
  readonly createAccount: (handle: string) => Promise<{ readonly account_id: string; readonly api_key: string }>
  /** Issues another key for an account (an agent's too) through the admin command; `mode` test (the default) or live. */
  readonly issueKey: (accountId: string, name: string, mode?: "test" | "live") => Promise<{ readonly key_id: string; readonly api_key: string }>
  /** Stops the server (SIGTERM, or with `kill` SIGKILL: nothing of it runs on) and starts it again on the same data directory and ports. */
  readonly restart: (options?: { readonly kill?: boolean }) => Promise<void>
  readonly stop: () => Promise<void>
}

/** How long a cold start (PGlite, anvil, contract deployment) may take on a loaded 2-core machine. */
const startTimeoutMs = 90_000

/** `env`: more settings for the server process (e.g. WEBHOOK_ALLOW_INSECURE_LOOPBACK for a local receiver). */
export const startServer = async (options: { readonly env?: Readonly<Record<string, string>> } = {}): Promise<ServerProcess> => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-sdk-cli-"))
  const [port, adminPort] = [await freePort(), await freePort()]
  const output: Array<string> = []
  const baseUrl = `http://127.0.0.1:${port}`

  /** One server process on the data dir and ports, ready. */
  const launch = async () => {
    const child: ChildProcess = spawn(process.execPath, [...nodeFlags, path.join(repositoryRoot, "packages/server/src/main.ts")], {
      cwd: repositoryRoot,
      env: {
        ...childEnvironment(),
        DATA_DIR: dataDir,
        PORT: String(port),
        ADMIN_PORT: String(adminPort),
        CHAIN_BLOCK_TIME_MS: "100",
        LOG_LEVEL: "Warn",
        ...options.env
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stdout?.on("data", (chunk: Buffer) => output.push(chunk.toString()))
    child.stderr?.on("data", (chunk: Buffer) => output.push(chunk.toString()))
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    const halt = async (signal: NodeJS.Signals = "SIGTERM") => {
      child.kill(signal)
      const killTimer = setTimeout(() => child.kill("SIGKILL"), 15_000)
      await exited
      clearTimeout(killTimer)
    }
    const deadline = Date.now() + startTimeoutMs
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the server exited at start:\n${output.join("")}`)
      const ready = await fetch(`${baseUrl}/readyz`).then((response) => response.ok, () => false)
      if (ready) break
      if (Date.now() > deadline) {
        await halt()
        throw new Error(`the server was not ready within ${startTimeoutMs} ms:\n${output.join("")}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    return halt
  }

  let halt = await launch()
  const stop = async () => {
    await halt()
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
  const restart = async (restartOptions: { readonly kill?: boolean } = {}) => {
    await halt(restartOptions.kill === true ? "SIGKILL" : "SIGTERM")
    halt = await launch()
  }

  const createAccount = async (handle: string) => {
    const run = await runAdmin(["accounts", "create", "--handle", handle, "--kyc", "verified"], { DATA_DIR: dataDir })
    if (run.exitCode !== 0) throw new Error(`admin accounts create failed: ${run.stderr}`)
    return JSON.parse(run.stdout) as { account_id: string; api_key: string }
  }
  const issueKey = async (accountId: string, name: string, mode: "test" | "live" = "test") => {
    const run = await runAdmin(["keys", "create", "--account", accountId, "--name", name, "--mode", mode], { DATA_DIR: dataDir })
    if (run.exitCode !== 0) throw new Error(`admin keys create failed: ${run.stderr}`)
    return JSON.parse(run.stdout) as { key_id: string; api_key: string }
  }
  return { baseUrl, dataDir, createAccount, issueKey, restart, stop }
}

/**
 * The embedded anvil's RPC URL. The server does not print it; its pid file names the
 * process, whose command line names the port (Linux /proc, as the server's own checks use).
 */
export const anvilRpcUrl = (dataDir: string): string => {
  const pid = Number.parseInt(fs.readFileSync(path.join(dataDir, "chain", "anvil.pid"), "utf8"), 10)
  const url = rpcUrlOfProcess(pid)
  if (url === undefined) throw new Error(`no --port in the command line of anvil ${pid}`)
  return url
}

/** One JSON-RPC call to a chain node (anvil's controls: `evm_setIntervalMining`, …); its result. */
export const chainRpc = async (rpcUrl: string, method: string, params: ReadonlyArray<unknown>): Promise<unknown> => {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })
  })
  const body = await response.json() as { readonly result?: unknown; readonly error?: unknown }
  if (body.error !== undefined) throw new Error(`${method}: ${JSON.stringify(body.error)}`)
  return body.result
}
