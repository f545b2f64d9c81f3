/**
 * Anvil: a launcher for a local anvil node, used by the contract tests and by the server's
 * embedded chain mode (which wraps it in an Effect Layer).
 *
 * The platform binary from `@foundry-rs/anvil-<os>-<arch>` is spawned directly: the package's
 * `.bin/anvil` is a Node wrapper, and killing the wrapper leaves anvil running. Anvil listens
 * on 127.0.0.1 only, mines on an interval (automine jams under concurrent load, GitHub
 * foundry-rs/foundry#10122) or, with `mining: "onDemand"`, only when asked (the server's embedded
 * chain mines it itself, D88) and, given a state path, dumps its state every `stateIntervalSeconds`
 * (default 1) so that even a SIGKILL loses at most that much of the chain (`--state` alone dumps only
 * on a clean exit), or, with `stateIntervalSeconds: "byCaller"`, only loads it: the caller writes it
 * with `writeState` when it chooses (the server's embedded chain, D89). The state holds the blocks,
 * not the pool of transactions waiting.
 *
 * Every process started here is killed when the Node process exits, so no anvil outlives a
 * test run. A parent that is itself SIGKILLed cannot run that hook; the server stops anvil in
 * its Layer finaliser and restarts it from the state file. With `ownProcessGroup` (the server's
 * embedded chain) anvil is out of reach of a signal to its parent's group.
 *
 * @since 0.1.0
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createReadStream, createWriteStream, existsSync, readFileSync, renameSync, rmSync, statSync } from "node:fs"
import { open, rm } from "node:fs/promises"
import { type IncomingMessage, request } from "node:http"
import { createRequire } from "node:module"
import { createServer } from "node:net"
import { dirname, join } from "node:path"
import { Transform, type TransformCallback } from "node:stream"
import { pipeline } from "node:stream/promises"
import { createGunzip } from "node:zlib"

/**
 * The chain id of the service's testnet; the embedded node uses it unless told otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const testnetChainId = 46630

/**
 * How to start anvil. Every field has a default suited to tests and the embedded mode.
 *
 * @since 0.1.0
 * @category models
 */
export interface StartOptions {
  /** TCP port on 127.0.0.1; 0 (the default) picks a free one. */
  readonly port?: number
  /** Default 46630, the testnet chain id. */
  readonly chainId?: number
  /** Seconds between blocks, fractions allowed (0.1 is ten blocks a second). Default 1. */
  readonly blockTimeSeconds?: number
  /**
   * `interval` (the default): anvil mines a block every `blockTimeSeconds`, empty or not.
   * `onDemand`: anvil mines only when asked (`--no-mining`; `evm_mine`, `anvil_mine`); the caller
   * runs the miner (the server's DevChain mines while transactions wait, D88). `blockTimeSeconds`
   * is then unused.
   */
  readonly mining?: "interval" | "onDemand"
  /** Block gas limit. Default anvil's (30M); raise it for throughput runs. */
  readonly blockGasLimit?: bigint
  /**
   * EVM hardfork (`--hardfork`, e.g. "prague"). Default anvil's newest; the gas profile uses an
   * older one to price precompiles as chains that have not upgraded do (D66).
   */
  readonly hardfork?: string
  /** File to load state from and dump it to; none keeps the chain in memory only. */
  readonly statePath?: string
  /**
   * When `statePath` is set: anvil writes its state every this many seconds and at a clean exit
   * (default 1); or, `"byCaller"`, never of its own accord: it loads the state, and the caller
   * writes it with `writeState` (atomically, gzipped beside it, when it chooses). Which file is
   * loaded, and how a gzipped one is unzipped for anvil: `stateToLoad`.
   */
  readonly stateIntervalSeconds?: number | "byCaller"
  /** How long to wait for the node to answer eth_chainId. Default 15,000. */
  readonly readyTimeoutMs?: number
  /** Path of the anvil binary; default the platform package's binary. */
  readonly binaryPath?: string
  /**
   * Runs anvil in a process group of its own (`detached`). A signal to the parent's group (a
   * terminal's Ctrl-C, `kill -TERM -<pgid>` to `npm start`) then reaches the parent alone, which
   * stops anvil once nothing needs it any more: the chain must outlive the server's last chain
   * read, or that read fails and is logged. A parent killed with SIGKILL leaves it running, as a
   * chain node would be; the server's DevChain stops such a leftover at its next start. Default
   * false: anvil shares its parent's group, and a signal to that group stops both.
   */
  readonly ownProcessGroup?: boolean
}

/**
 * A running anvil node.
 *
 * @since 0.1.0
 * @category models
 */
export interface Instance {
  readonly rpcUrl: string
  readonly port: number
  readonly chainId: number
  readonly pid: number
  /** Stops anvil with SIGTERM (it dumps its state, unless the caller writes it), SIGKILL after a grace period; waits for exit. */
  readonly stop: () => Promise<void>
  /** Kills anvil with SIGKILL, as a crash would, and waits for exit. */
  readonly kill: () => Promise<void>
}

/** Grace period between SIGTERM and SIGKILL in `stop`. */
const stopGraceMs = 5_000
/** Poll interval while waiting for the RPC to answer. */
const readyPollMs = 25
/** Free-port picking races with other processes; a lost race is retried this many times. */
const portAttemptsMax = 3
/** Bytes of anvil's stderr kept for error messages. */
const stderrTailBytesMax = 4_096

const liveProcesses = new Set<ChildProcess>()
let exitHookInstalled = false

const installExitHook = (): void => {
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.once("exit", () => {
    for (const child of liveProcesses) child.kill("SIGKILL")
  })
}

const platformPackageName = (): string => {
  const arch = process.arch === "x64" ? "amd64" : process.arch
  return `@foundry-rs/anvil-${process.platform}-${arch}`
}

/**
 * Path of the anvil binary shipped in the platform package that `@foundry-rs/anvil` depends
 * on, resolved from that package's own location (pnpm keeps it out of our node_modules).
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolveBinaryPath = (): string => {
  const require = createRequire(import.meta.url)
  const wrapperManifest = require.resolve("@foundry-rs/anvil/package.json")
  const platformManifest = createRequire(wrapperManifest).resolve(`${platformPackageName()}/package.json`)
  const binaryName = process.platform === "win32" ? "anvil.exe" : "anvil"
  return join(dirname(platformManifest), "bin", binaryName)
}

const pickFreePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => (port > 0 ? resolve(port) : reject(new Error("no free port"))))
    })
  })

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** The node's chain id, or undefined while it does not answer yet. */
const queryChainId = async (rpcUrl: string): Promise<number | undefined> => {
  try {
    const response = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(1_000)
    })
    const body = (await response.json()) as { result?: string }
    return typeof body.result === "string" ? Number(BigInt(body.result)) : undefined
  } catch {
    return undefined
  }
}

const commandLine = (port: number, chainId: number, options: StartOptions, loadStatePath: string | undefined): Array<string> => {
  const args = [
    "--host", "127.0.0.1",
    "--port", String(port),
    "--chain-id", String(chainId),
    ...(options.mining === "onDemand" ? ["--no-mining"] : ["--block-time", String(options.blockTimeSeconds ?? 1)]),
    "--silent"
  ]
  if (options.blockGasLimit !== undefined) args.push("--gas-limit", options.blockGasLimit.toString())
  if (options.hardfork !== undefined) args.push("--hardfork", options.hardfork)
  if (options.stateIntervalSeconds === "byCaller") {
    // `--load-state` refuses a file that does not exist: a first start begins empty.
    if (loadStatePath !== undefined) args.push("--load-state", loadStatePath)
  } else if (options.statePath !== undefined) {
    args.push("--state", options.statePath, "--state-interval", String(options.stateIntervalSeconds ?? 1))
  }
  return args
}

/** The command that runs anvil: in its parent's process group, or in one of its own. */
const spawnAnvil = (binaryPath: string, args: Array<string>, options: StartOptions): ChildProcess =>
  spawn(binaryPath, args, { stdio: ["ignore", "ignore", "pipe"], detached: options.ownProcessGroup === true })

const waitForExit = (child: ChildProcess, timeoutMs: number): Promise<boolean> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(true)
    const timer = setTimeout(() => resolve(false), timeoutMs)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve(true)
    })
  })

type Launch = { readonly _tag: "Ready"; readonly instance: Instance } | { readonly _tag: "Exited"; readonly stderr: string }

const launch = async (
  binaryPath: string,
  port: number,
  chainId: number,
  options: StartOptions,
  loadStatePath: string | undefined
): Promise<Launch> => {
  const child = spawnAnvil(binaryPath, commandLine(port, chainId, options, loadStatePath), options)
  liveProcesses.add(child)
  installExitHook()
  let stderr = ""
  child.stderr?.setEncoding("utf8")
  child.stderr?.on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-stderrTailBytesMax)
  })
  let exited = false
  child.once("exit", () => {
    exited = true
    liveProcesses.delete(child)
  })
  const spawnFailure = new Promise<Error>((resolve) => child.once("error", resolve))

  const rpcUrl = `http://127.0.0.1:${port}`
  const deadline = Date.now() + (options.readyTimeoutMs ?? 15_000)
  for (;;) {
    if (exited) return { _tag: "Exited", stderr }
    const answeredChainId = await Promise.race([queryChainId(rpcUrl), spawnFailure])
    if (answeredChainId instanceof Error) throw answeredChainId
    if (answeredChainId !== undefined) {
      if (answeredChainId !== chainId) {
        child.kill("SIGKILL")
        // Another node already owns the port and answered in our place.
        return { _tag: "Exited", stderr: `port ${port} answered chain id ${answeredChainId}` }
      }
      break
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL")
      await waitForExit(child, stopGraceMs)
      throw new Error(`anvil did not answer on ${rpcUrl} in time; stderr: ${stderr}`)
    }
    await delay(readyPollMs)
  }

  const terminate = async (signal: "SIGTERM" | "SIGKILL"): Promise<void> => {
    if (exited) return
    child.kill(signal)
    if (await waitForExit(child, stopGraceMs)) return
    child.kill("SIGKILL")
    await waitForExit(child, stopGraceMs)
  }
  const pid = child.pid
  if (pid === undefined) throw new Error("anvil started without a pid")
  return {
    _tag: "Ready",
    instance: { rpcUrl, port, chainId, pid, stop: () => terminate("SIGTERM"), kill: () => terminate("SIGKILL") }
  }
}

/**
 * Starts anvil and resolves once it answers eth_chainId with the requested chain id.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = async (options: StartOptions = {}): Promise<Instance> => {
  const binaryPath = options.binaryPath ?? resolveBinaryPath()
  const load = await stateToLoad(options)
  try {
    return await startOnAFreePort(binaryPath, options, load.path)
  } finally {
    // Anvil has read it before it answers, or has exited.
    if (load.temporary && load.path !== undefined) await rm(load.path, { force: true })
  }
}

/** Launches anvil, on a free port unless one is asked for: a lost race for the port is tried again. */
const startOnAFreePort = async (binaryPath: string, options: StartOptions, loadStatePath: string | undefined): Promise<Instance> => {
  const chainId = options.chainId ?? testnetChainId
  const requestedPort = options.port ?? 0
  const attempts = requestedPort === 0 ? portAttemptsMax : 1
  let lastStderr = ""
  for (let attempt = 0; attempt < attempts; attempt++) {
    const port = requestedPort === 0 ? await pickFreePort() : requestedPort
    const launched = await launch(binaryPath, port, chainId, options, loadStatePath)
    if (launched._tag === "Ready") return launched.instance
    lastStderr = launched.stderr
  }
  throw new Error(`anvil exited before it was ready; stderr: ${lastStderr}`)
}

/**
 * The RPC URL of a running anvil, from the `--port` of its command line (Linux `/proc`): for a
 * process this module started elsewhere (the server's embedded chain names only its pid, in
 * `DATA_DIR/chain/anvil.pid`). Undefined when the process is gone or has no `--port`.
 *
 * @since 0.15.0
 * @category constructors
 */
export const rpcUrlOfProcess = (pid: number): string | undefined => {
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
    const port = args[args.indexOf("--port") + 1]
    return port !== undefined && /^\d+$/.test(port) ? `http://127.0.0.1:${port}` : undefined
  } catch {
    return undefined
  }
}

/**
 * The JSON file anvil loads at start. Anvil reads only unzipped JSON, and `writeState` keeps the
 * state gzipped beside `statePath`:
 * - `byCaller`: the gzipped state is the chain's, and is unzipped into a temporary file that is
 *   removed once anvil has read it. A `statePath` still there (an interval-mining node's, or a
 *   state from before D89) is loaded instead only when it is the newer of the two, at a switch of
 *   mining mode: `writeState` removes it once it has written a state of its own.
 * - Otherwise anvil loads and writes `statePath` itself (`--state`): a gzipped state newer than it
 *   (a switch from on-demand mining) is unzipped into it first, and removed.
 */
const stateToLoad = async (options: StartOptions): Promise<{ readonly path: string | undefined; readonly temporary: boolean }> => {
  const statePath = options.statePath
  if (statePath === undefined) return { path: undefined, temporary: false }
  const zipped = zippedStatePath(statePath)
  const zippedIsNewer = existsSync(zipped) && (!existsSync(statePath) || statSync(zipped).mtimeMs >= statSync(statePath).mtimeMs)
  if (options.stateIntervalSeconds === "byCaller") {
    if (!zippedIsNewer) return { path: existsSync(statePath) ? statePath : undefined, temporary: false }
    const loading = `${statePath}.${process.pid}.loading`
    await unzip(zipped, loading)
    return { path: loading, temporary: true }
  }
  if (zippedIsNewer) {
    const unzipping = `${statePath}.${process.pid}.unzipping`
    await unzip(zipped, unzipping)
    await syncFile(unzipping)
    renameSync(unzipping, statePath)
    // Anvil's own writes replace it from now on: one current file, never an older one that a copy
    // without its times could make look newer.
    rmSync(zipped, { force: true })
  }
  return { path: statePath, temporary: false }
}

const unzip = async (zipped: string, into: string): Promise<void> => {
  try {
    await pipeline(createReadStream(zipped), createGunzip(), createWriteStream(into))
  } catch (cause) {
    await rm(into, { force: true })
    throw cause
  }
}

/** Flushes a written file to the disk before it is renamed into place: a crash of the machine then finds the old file or the whole new one. */
const syncFile = async (file: string): Promise<void> => {
  const handle = await open(file, "r+")
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** Tells apart the temporary files of writes that overlap (an abandoned one still unwinding). */
let writesStarted = 0

/** What precedes the state's hex digits in anvil's answer to `anvil_dumpState`. */
const dumpResultOpening = "\"result\":\"0x"
/** Bytes of an answer read while looking for its result before it is taken as an error answer. */
const dumpOpeningBytesMax = 4_096
const hexDigits = /^[0-9a-fA-F]*$/

/**
 * The hex digits of a JSON-RPC answer's `result` string, as bytes, while the answer streams in:
 * `anvil_dumpState`'s answer (gzipped JSON in hex, 19 MB for a 56 MB state) is never held whole.
 * An answer without a result (an error) fails with its opening.
 */
export class ResultHexDigits extends Transform {
  private opening = ""
  private inDigits = false
  private ended = false
  /** A digit whose pair is in the next chunk. */
  private carried = ""

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.ended) return callback()
    let text = chunk.toString("latin1")
    if (!this.inDigits) {
      this.opening += text
      const at = this.opening.indexOf(dumpResultOpening)
      if (at < 0) {
        return callback(this.opening.length > dumpOpeningBytesMax ? this.noResult() : null)
      }
      this.inDigits = true
      text = this.opening.slice(at + dumpResultOpening.length)
      this.opening = ""
    }
    const closing = text.indexOf("\"")
    const digits = this.carried + (closing < 0 ? text : text.slice(0, closing))
    this.ended = closing >= 0
    const paired = digits.length - (digits.length % 2)
    // `Buffer.from` would stop quietly at the first character that is not a hex digit.
    if (!hexDigits.test(digits)) return callback(new Error("anvil_dumpState's result is not hex"))
    this.carried = digits.slice(paired)
    if (paired > 0) this.push(Buffer.from(digits.slice(0, paired), "hex"))
    callback()
  }

  override _flush(callback: TransformCallback): void {
    if (!this.inDigits) return callback(this.noResult())
    if (!this.ended || this.carried !== "") return callback(new Error("anvil_dumpState's answer ended inside its result"))
    callback()
  }

  private noResult(): Error {
    return new Error(`anvil_dumpState answered without a result: ${this.opening.slice(0, 200)}`)
  }
}

const postDumpState = (rpcUrl: string, signal: AbortSignal): Promise<IncomingMessage> =>
  new Promise((resolve, reject) => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "anvil_dumpState", params: [] })
    const sent = request(rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, signal }, resolve)
    sent.once("error", reject)
    sent.end(body)
  })

/**
 * Where `writeState` writes the state of a node whose state file is `statePath`: gzipped, as
 * `anvil_dumpState` gives it (a fifth of the JSON's size; unzipping it in the writer cost as much
 * CPU as anvil's own dump). `start` unzips it for anvil (`stateToLoad`).
 *
 * @since 0.16.0
 * @category state
 */
export const zippedStatePath = (statePath: string): string => `${statePath}.gz`

/**
 * Writes a running anvil's whole state now, to `zippedStatePath(statePath)`: `anvil_dumpState`
 * (gzipped JSON, in hex), decoded as it streams to a file beside it
 * (`<statePath>.gz.<pid>-<n>.writing`), synced, then renamed over it, so a crash at any point
 * leaves the previous state or this one, never a part (and a temporary file, which the caller may
 * remove at its next start). Anvil's own writes (`--state`) truncate the file and then write it.
 * `signal` abandons the write (timeout, the caller stopping): once it is aborted the file is
 * never renamed into place, so an abandoned write cannot land after a later one.
 *
 * @since 0.16.0
 * @category state
 */
export const writeState = async (rpcUrl: string, statePath: string, signal: AbortSignal): Promise<void> => {
  writesStarted += 1
  const zipped = zippedStatePath(statePath)
  const writing = `${zipped}.${process.pid}-${writesStarted}.writing`
  try {
    const answer = await postDumpState(rpcUrl, signal)
    if (answer.statusCode !== 200) {
      answer.resume()
      throw new Error(`anvil_dumpState answered HTTP ${answer.statusCode}`)
    }
    await pipeline(answer, new ResultHexDigits(), createWriteStream(writing), { signal })
    await syncFile(writing)
    // Checked and renamed in one turn of the event loop: nothing aborts in between.
    signal.throwIfAborted()
    renameSync(writing, zipped)
    // An unzipped state left by interval mining, or from before D89, is superseded: removed, it
    // cannot be taken for the newer one by its time of writing.
    rmSync(statePath, { force: true })
  } catch (cause) {
    await rm(writing, { force: true })
    throw cause
  }
}
