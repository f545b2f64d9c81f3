/**
 * `npm run cluster`: the distributed deployment of docker-compose.yml as processes on
 * this machine, for machines without Docker. The same topology (topology.ts) from the
 * same env file: the machine's PostgreSQL and NATS (CLUSTER_POSTGRES_URL,
 * CLUSTER_NATS_URL), anvil from npm as the chain node, the guardians (one serves, the
 * others stand by for its lease), the contracts'
 * deployment step, the api nodes and the workers, and the machine's HAProxy as the TLS
 * balancer (Debian's `haproxy` package; haproxy.ts renders its configuration into
 * `DIR/haproxy.cfg`), each its own process.
 *
 *   npm run -s cluster -- --init-env deploy/cluster.env     # once: the env file, secrets generated
 *   npm run -s cluster -- --env-file deploy/cluster.env [--dir .data/cluster] [--api-nodes 2] [--workers 2] [--guardians 2]
 *
 * It creates the two databases when missing, a self-signed certificate for the balancer
 * when `DIR/tls` has none (and the one PEM file HAProxy reads, certificate then key), starts everything in dependency order (each waits for the
 * previous to be ready, as compose's depends_on conditions say), prints one JSON line
 * with the addresses, and runs until SIGINT/SIGTERM, which stop every process in reverse
 * order (SIGTERM, then SIGKILL after a grace period). Each process runs in its own
 * process group, so killing one (the multi-node test SIGKILLs an api node) touches no
 * other; an exit hook kills every group left if this script itself dies.
 */
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { PgClient } from "@effect/sql-pg"
import { Anvil } from "@pps/contracts"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { initEnvFile, readEnvFile } from "./envFile.ts"
import { haproxyArguments, haproxyBinary, writeHaproxyConfig } from "./haproxy.ts"
import { freePort, registerGroup, unregisterGroup, waitGroupGone } from "./processGroups.ts"
import {
  type Addresses,
  apiNodeName,
  balancerSettings,
  chainBlockTimeSeconds,
  defaultWorkerNodes,
  nodeServices,
  type NodeService,
  standInChainStateIntervalSeconds,
  substitute,
  testnetChainId
} from "./topology.ts"

const repositoryRoot = fileURLToPath(new URL("../../../../", import.meta.url))

/** The loopback address the balancer connects to the api nodes from, and the one they trust. */
const balancerSourceAddress = "127.0.0.2"

/** How long a process may take to become ready on a loaded 2-core machine (PostgreSQL migrations, the crypto backend). */
const readyTimeoutMs = 180_000
const readyPollMs = 200
/** A clean stop drains requests (SHUTDOWN_TIMEOUT_MS, 10 s by default) before SIGKILL. */
const stopGraceMs = 15_000
/** How long a group may take to vanish after SIGKILL. */
const killTimeoutMs = 10_000

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// ---- processes ----

/** One process of the topology: started, killed (SIGKILL) and started again on the same settings. */
export interface ClusterProcess {
  readonly name: string
  readonly logFile: string
  readonly pid: () => number | undefined
  /** Starts it and resolves once it is ready (or, for a one-shot step, once it exited 0). */
  readonly start: () => Promise<void>
  /** SIGKILL to its process group, as a crash would; resolves once nothing of it is left. */
  readonly kill: () => Promise<void>
  /** SIGTERM, SIGKILL after the grace period; resolves once it is gone. */
  readonly stop: () => Promise<void>
  /** How many times it was started. */
  readonly starts: () => number
}

const isReady = async (url: string): Promise<boolean> => {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) })
    await response.body?.cancel()
    return response.status === 200
  } catch {
    return false
  }
}

const managedProcess = (options: {
  readonly name: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly environment: Readonly<Record<string, string>>
  readonly logDir: string
  /** Resolves true once the process serves; undefined: a one-shot step, ready when it exits 0. */
  readonly ready: (() => Promise<boolean>) | undefined
}): ClusterProcess => {
  const logFile = path.join(options.logDir, `${options.name}.log`)
  let group: number | undefined
  let starts = 0
  const start = async () => {
    starts++
    const log = fs.openSync(logFile, "a")
    fs.writeSync(log, `\n--- start at ${new Date().toISOString()} ---\n`)
    const child = spawn(options.command, [...options.args], {
      cwd: repositoryRoot,
      // Only the topology's variables and what a process needs to run (PATH, HOME): the
      // deployment must work from the env file alone, not from this shell's leftovers.
      env: { PATH: process.env["PATH"] ?? "", HOME: process.env["HOME"] ?? "", ...options.environment },
      stdio: ["ignore", log, log],
      detached: true
    })
    fs.closeSync(log)
    if (child.pid === undefined) throw new Error(`${options.name} started without a pid`)
    group = child.pid
    registerGroup(child.pid)
    let exit: number | null | undefined
    child.once("exit", (code, signal) => (exit = code ?? (signal === null ? null : -1)))
    const deadline = Date.now() + readyTimeoutMs
    for (;;) {
      if (options.ready === undefined) {
        if (exit === 0) {
          unregisterGroup(child.pid)
          group = undefined
          return
        }
        if (exit !== undefined) throw new Error(`${options.name} failed (exit ${exit}); see ${logFile}`)
      } else {
        if (exit !== undefined) throw new Error(`${options.name} exited during start-up (exit ${exit}); see ${logFile}`)
        if (await options.ready()) return
      }
      if (Date.now() > deadline) throw new Error(`${options.name} was not ready in ${readyTimeoutMs} ms; see ${logFile}`)
      await sleep(readyPollMs)
    }
  }
  const finish = async (signal: "SIGKILL" | "SIGTERM") => {
    const current = group
    if (current === undefined) return
    try {
      process.kill(-current, signal)
    } catch {
      // already gone
    }
    let gone = await waitGroupGone(current, signal === "SIGKILL" ? killTimeoutMs : stopGraceMs)
    if (!gone) {
      try {
        process.kill(-current, "SIGKILL")
      } catch {
        // gone meanwhile
      }
      gone = await waitGroupGone(current, killTimeoutMs)
    }
    if (!gone) throw new Error(`${options.name} (process group ${current}) survived SIGKILL`)
    unregisterGroup(current)
    group = undefined
  }
  return { name: options.name, logFile, pid: () => group, start, kill: () => finish("SIGKILL"), stop: () => finish("SIGTERM"), starts: () => starts }
}

// ---- preparation ----

/** Database names become SQL identifiers unquoted: refuse anything but a plain one. */
const databaseName = /^[a-z_][a-z0-9_]{0,62}$/

/** Runs statements on the server's maintenance database. */
const onMaintenanceDatabase = <A>(serverUrl: string, run: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) => {
  const url = new URL(serverUrl)
  url.pathname = "/postgres"
  return Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* run(sql)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url.toString()), applicationName: "pps-cluster" })))
  )
}

/** Creates each database that does not exist yet. */
export const ensureDatabases = (serverUrl: string, names: ReadonlyArray<string>) =>
  onMaintenanceDatabase(serverUrl, (sql) =>
    Effect.forEach(names, (name) =>
      Effect.gen(function*() {
        if (!databaseName.test(name)) return yield* Effect.fail(new Error(`${name} is not a plain database name`))
        const found = yield* sql`SELECT 1 FROM pg_database WHERE datname = ${name}`
        if (found.length === 0) yield* sql.unsafe(`CREATE DATABASE ${name}`)
      }), { discard: true }))

/** Drops the databases (the test's clean-up; never run by `npm run cluster`). */
export const dropDatabases = (serverUrl: string, names: ReadonlyArray<string>) =>
  onMaintenanceDatabase(serverUrl, (sql) =>
    Effect.forEach(names, (name) =>
      databaseName.test(name) ? sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) : Effect.void, { discard: true }))

/**
 * A self-signed P-256 certificate for localhost, made with the machine's openssl when none is
 * there, and `pem`: the certificate followed by its key, the one file HAProxy reads.
 */
export const ensureCertificate = (tlsDir: string) => {
  const cert = path.join(tlsDir, "cert.pem")
  const key = path.join(tlsDir, "key.pem")
  const pem = path.join(tlsDir, "balancer.pem")
  if (!fs.existsSync(cert) || !fs.existsSync(key)) {
    fs.mkdirSync(tlsDir, { recursive: true, mode: 0o700 })
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
      "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-keyout", key, "-out", cert
    ], { stdio: "ignore" })
  }
  fs.writeFileSync(pem, Buffer.concat([fs.readFileSync(cert), fs.readFileSync(key)]), { mode: 0o600 })
  return { cert, key, pem }
}

// ---- the cluster ----

export interface ClusterOptions {
  readonly envFile: string
  /** Working directory: logs, the chain's state, the nodes' data directories, the certificate. */
  readonly dir: string
  readonly apiNodes: number
  /** Worker nodes (NODE_ROLE=worker); the api nodes run NODE_ROLE=api. */
  readonly workers: number
  /** Guardian processes on the one guardian database (2: one serving, one standby). */
  readonly guardians: number
  /** The machine's PostgreSQL server (no database in the path). */
  readonly postgresUrl: string
  readonly natsUrl: string
  readonly log: (line: string) => void
  /** The chain's block time (the topology's `chainBlockTimeSeconds` unless set): anvil's and the nodes'. */
  readonly chainBlockTimeMs?: number
}

export interface Cluster {
  /** The balancer's https URL. */
  readonly baseUrl: string
  readonly certFile: string
  readonly env: ReadonlyMap<string, string>
  readonly apiNodes: ReadonlyArray<ClusterProcess & { readonly baseUrl: string; readonly adminUrl: string }>
  /** Worker nodes (NODE_ROLE=worker): their public port serves health only. */
  readonly workers: ReadonlyArray<ClusterProcess & { readonly baseUrl: string; readonly adminUrl: string }>
  /** In start order: the first serves, the others stand by. */
  readonly guardians: ReadonlyArray<ClusterProcess & { readonly baseUrl: string }>
  readonly databases: ReadonlyArray<string>
  /** The chain node (anvil). */
  readonly chain: ClusterProcess
  /** Stops every process in reverse start order. */
  readonly stop: () => Promise<void>
}

export const startCluster = async (options: ClusterOptions): Promise<Cluster> => {
  const env = readEnvFile(options.envFile)
  const logDir = path.join(options.dir, "logs")
  fs.mkdirSync(logDir, { recursive: true })
  const databases = [env.get("PPS_DATABASE") ?? "", env.get("PPS_GUARDIAN_DATABASE") ?? ""]
  await ensureDatabases(options.postgresUrl, databases)
  const tls = ensureCertificate(path.join(options.dir, "tls"))
  const serverUrl = options.postgresUrl.replace(/\/+$/, "")

  const [chainPort, balancerPort, balancerHealthPort] = [await freePort(), await freePort(), await freePort()]
  const guardians: Array<{ host: string; port: number }> = []
  for (let index = 0; index < options.guardians; index++) guardians.push({ host: "127.0.0.1", port: await freePort() })
  const api: Array<{ host: string; port: number; adminPort: number }> = []
  for (let index = 0; index < options.apiNodes; index++) api.push({ host: "127.0.0.1", port: await freePort(), adminPort: await freePort() })
  const workers: Array<{ host: string; port: number; adminPort: number }> = []
  for (let index = 0; index < options.workers; index++) workers.push({ host: "127.0.0.1", port: await freePort(), adminPort: await freePort() })
  const addresses: Addresses = {
    bindHost: "127.0.0.1",
    apiDatabaseUrl: `${serverUrl}/\${PPS_DATABASE}`,
    guardianDatabaseUrl: `${serverUrl}/\${PPS_GUARDIAN_DATABASE}`,
    natsUrl: options.natsUrl,
    chainRpcUrl: `http://127.0.0.1:${chainPort}`,
    guardians,
    api,
    workers,
    balancerPort,
    balancerHealthPort,
    // The api nodes are addresses here.
    balancerResolver: undefined,
    // A loopback address of the balancer's own (Linux routes all of 127/8 to loopback): the api
    // nodes believe X-Forwarded-For from it alone, not from any other process of this machine.
    balancerSourceAddress: balancerSourceAddress,
    // The certificate names localhost (WebAuthn refuses an IP address as its relying party).
    publicOrigin: `https://localhost:${balancerPort}`,
    trustedProxies: balancerSourceAddress,
    tlsPemFile: tls.pem,
    nodeDataDir: (name) => path.join(options.dir, name)
  }

  const blockTimeMs = options.chainBlockTimeMs ?? chainBlockTimeSeconds * 1000
  const started: Array<ClusterProcess> = []
  const stop = async () => {
    for (const member of [...started].reverse()) await member.stop()
  }
  try {
    const chainDir = path.join(options.dir, "chain")
    fs.mkdirSync(chainDir, { recursive: true })
    const chain = managedProcess({
      name: "chain",
      command: Anvil.resolveBinaryPath(),
      args: [
        "--host", "127.0.0.1", "--port", String(chainPort), "--chain-id", String(testnetChainId),
        "--block-time", String(blockTimeMs / 1000), "--state", path.join(chainDir, "state.json"),
        "--state-interval", String(standInChainStateIntervalSeconds),
        // Four blocks a second would otherwise be four log lines a second.
        "--silent"
      ],
      environment: {},
      logDir,
      ready: async () => {
        try {
          const response = await fetch(addresses.chainRpcUrl, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
            signal: AbortSignal.timeout(2_000)
          })
          return response.status === 200
        } catch {
          return false
        }
      }
    })
    await chain.start()
    started.push(chain)
    options.log(`chain ready at ${addresses.chainRpcUrl}`)

    const asProcess = (service: NodeService): ClusterProcess => {
      const environment: Record<string, string> = {}
      for (const [name, value] of Object.entries(service.environment)) environment[name] = substitute(value, env)
      if ("CHAIN_BLOCK_TIME_MS" in environment) environment["CHAIN_BLOCK_TIME_MS"] = String(blockTimeMs)
      const health = service.health
      return managedProcess({
        name: service.name,
        command: process.execPath,
        args: service.args,
        environment,
        logDir,
        ready: health._tag === "none" ? undefined : () => isReady(health.url)
      })
    }
    const services = nodeServices(addresses)
    const byRole = (role: NodeService["role"]) => services.filter((service) => service.role === role).map(asProcess)
    const guardianProcesses = byRole("guardian")
    const [deploy] = byRole("deploy")
    const apiProcesses = byRole("api")
    const workerProcesses = byRole("worker")
    const balancerConfig = path.join(options.dir, "haproxy.cfg")
    writeHaproxyConfig(balancerConfig, balancerSettings(addresses))
    const balancer = managedProcess({
      name: "balancer",
      command: haproxyBinary(),
      args: haproxyArguments(balancerConfig),
      environment: {},
      logDir,
      ready: () => isReady(`http://127.0.0.1:${balancerHealthPort}/healthz`)
    })
    // One after the other, so the first takes the lease and serves.
    for (const [index, guardian] of guardianProcesses.entries()) {
      await guardian.start()
      started.push(guardian)
      options.log(`${guardian.name} up at http://127.0.0.1:${guardians[index]!.port} (${index === 0 ? "serving" : "standby"})`)
    }
    await deploy!.start()
    options.log("contracts deployed and recorded")
    // Api nodes start together, as they would behind a balancer (migrations lock their table).
    const apiStarts = [...apiProcesses, ...workerProcesses].map((member) => member.start().then(() => started.push(member)))
    const outcomes = await Promise.allSettled(apiStarts)
    const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected")
    if (failed !== undefined) throw failed.reason
    options.log(`api nodes ready: ${api.map((self, index) => `${apiNodeName(index)} http://127.0.0.1:${self.port}`).join(", ")}; workers: ${workers.length}`)
    await balancer.start()
    started.push(balancer)
    const baseUrl = `https://127.0.0.1:${balancerPort}`
    options.log(`balancer ready at ${baseUrl}`)
    return {
      baseUrl,
      certFile: tls.cert,
      env,
      workers: workerProcesses.map((member, index) => Object.assign(member, {
        baseUrl: `http://127.0.0.1:${workers[index]!.port}`,
        adminUrl: `http://127.0.0.1:${workers[index]!.adminPort}`
      })),
      apiNodes: apiProcesses.map((member, index) => Object.assign(member, {
        baseUrl: `http://127.0.0.1:${api[index]!.port}`,
        adminUrl: `http://127.0.0.1:${api[index]!.adminPort}`
      })),
      guardians: guardianProcesses.map((member, index) => Object.assign(member, { baseUrl: `http://127.0.0.1:${guardians[index]!.port}` })),
      databases,
      chain,
      stop
    }
  } catch (error) {
    await stop()
    throw error
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      "env-file": { type: "string", default: "deploy/cluster.env" },
      "init-env": { type: "string" },
      dir: { type: "string", default: ".data/cluster" },
      "api-nodes": { type: "string", default: "2" },
      workers: { type: "string", default: String(defaultWorkerNodes) },
      guardians: { type: "string", default: "2" }
    }
  })
  // npm runs scripts from the repository root and passes the caller's directory.
  const fromCaller = (file: string) => path.resolve(process.env["INIT_CWD"] ?? process.cwd(), file)
  if (values["init-env"] !== undefined) {
    const target = fromCaller(values["init-env"])
    const outcome = initEnvFile(path.join(repositoryRoot, "deploy/cluster.env.example"), target)
    process.stdout.write(`${JSON.stringify({ env_file: target, outcome })}\n`)
    process.exit(0)
  }
  const apiNodes = Number(values["api-nodes"])
  const guardianCount = Number(values.guardians)
  const workerCount = Number(values.workers)
  if (!Number.isInteger(workerCount) || workerCount < 1) throw new Error("--workers must be a positive integer: api nodes run no background work")
  if (!Number.isInteger(apiNodes) || apiNodes < 1) throw new Error("--api-nodes must be a positive integer")
  if (!Number.isInteger(guardianCount) || guardianCount < 1) throw new Error("--guardians must be a positive integer")
  const log = (line: string) => process.stderr.write(`cluster: ${line}\n`)
  const cluster = await startCluster({
    envFile: fromCaller(values["env-file"]),
    dir: fromCaller(values.dir),
    apiNodes,
    guardians: guardianCount,
    workers: workerCount,
    postgresUrl: process.env["CLUSTER_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432",
    natsUrl: process.env["CLUSTER_NATS_URL"] ?? "nats://127.0.0.1:4222",
    log
  })
  process.stdout.write(`${JSON.stringify({
    base_url: cluster.baseUrl,
    ca_file: cluster.certFile,
    api_nodes: cluster.apiNodes.map((node) => ({ name: node.name, base_url: node.baseUrl, admin_url: node.adminUrl })),
    workers: cluster.workers.map((node) => ({ name: node.name, admin_url: node.adminUrl })),
    logs: path.join(fromCaller(values.dir), "logs")
  })}\n`)
  const shutdown = () => {
    log("stopping")
    void cluster.stop().then(() => process.exit(0), (error: unknown) => {
      log(`stop failed: ${String(error)}`)
      process.exit(1)
    })
  }
  process.once("SIGINT", shutdown)
  process.once("SIGTERM", shutdown)
}
