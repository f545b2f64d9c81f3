/**
 * HAProxy, the deployment's balancer, as a process of a test: the configuration
 * `npm run cluster` and compose run (scripts/cluster/haproxy.ts) with the test's upstreams.
 * Whether the balancer suites run: they need HAProxy on this machine (Debian's `haproxy`).
 * `.ci/run` installs it and sets PPS_REQUIRE_HAPROXY=1, so in CI a missing one fails the run
 * instead of skipping; locally it skips with a warning.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as path from "node:path"
import { type BalancerSettings, haproxyArguments, haproxyBinary, writeHaproxyConfig } from "../../scripts/cluster/haproxy.ts"
import { freePort } from "../../scripts/cluster/processGroups.ts"

export const haproxyAvailable = spawnSync(haproxyBinary(), ["-v"], { stdio: "ignore" }).status === 0

if (!haproxyAvailable) {
  if (process.env["PPS_REQUIRE_HAPROXY"] === "1") {
    throw new Error(`HAProxy is required (PPS_REQUIRE_HAPROXY=1) but ${haproxyBinary()} does not run: apt-get install haproxy`)
  }
  console.warn(`\n*** HAProxy (${haproxyBinary()}) is not installed: SKIPPING the balancer suites (apt-get install haproxy) ***\n`)
}

export interface TestBalancer {
  readonly port: number
  readonly healthPort: number
  readonly process: ChildProcess
  /** Everything HAProxy wrote (its log goes to stdout). */
  readonly output: () => string
  /** SIGKILL, as a crash would; resolves once it exited. */
  readonly kill: () => Promise<void>
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether `/healthz` on the health port answers 200: HAProxy runs and sees a node in. */
export const balancerHealthy = (healthPort: number): Promise<boolean> =>
  fetch(`http://127.0.0.1:${healthPort}/healthz`, { signal: AbortSignal.timeout(2_000) }).then(
    (response) => response.status === 200,
    () => false
  )

/**
 * Writes the configuration into `dir` and starts HAProxy on it; resolves once its health port
 * answers 200 (`untilHealthy: false`: once it answers at all, for a balancer with no node in).
 */
export const startBalancer = async (options: {
  readonly dir: string
  readonly pemFile: string
  readonly upstreams: BalancerSettings["upstreams"]
  readonly port?: number
  readonly untilHealthy?: boolean
  /** The address it connects to the nodes from (the cluster's: 127.0.0.2); the system's by default. */
  readonly sourceAddress?: string
}): Promise<TestBalancer> => {
  const port = options.port ?? await freePort()
  const healthPort = await freePort()
  const configFile = path.join(options.dir, `haproxy-${port}.cfg`)
  writeHaproxyConfig(configFile, { bindHost: "127.0.0.1", port, healthPort, pemFile: options.pemFile, upstreams: options.upstreams, resolver: undefined, sourceAddress: options.sourceAddress })
  const child = spawn(haproxyBinary(), haproxyArguments(configFile), { stdio: ["ignore", "pipe", "pipe"] })
  let output = ""
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const deadline = Date.now() + 30_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`HAProxy exited at start:\n${output}`)
    const answered = await fetch(`http://127.0.0.1:${healthPort}/healthz`, { signal: AbortSignal.timeout(2_000) }).then(
      (response) => options.untilHealthy === false || response.status === 200,
      () => false
    )
    if (answered) break
    if (Date.now() > deadline) {
      child.kill("SIGKILL")
      throw new Error(`HAProxy did not become healthy in 30 s:\n${output}`)
    }
    await sleep(100)
  }
  return {
    port,
    healthPort,
    process: child,
    output: () => output,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      await exited
    }
  }
}
