/**
 * The distributed deployment's topology, written once: which processes run, with
 * which command, which environment and which dependencies, and the load balancer's
 * settings (HAProxy, haproxy.ts). `docker-compose.yml` and `deploy/haproxy.cfg` are
 * rendered from it (compose.ts; a test checks the committed files are that rendering)
 * and `npm run cluster` starts the same processes on one machine (cluster.ts), both
 * from the same env file (envFile.ts). Only the addresses differ: container names
 * and 0.0.0.0 in compose, loopback ports on a machine.
 *
 * Environment values may name env-file variables as `${NAME}`: compose interpolates
 * them from `--env-file`, the cluster script substitutes them itself.
 */
import type { BalancerSettings } from "./haproxy.ts"

/** The testnet chain id the server checks at start (Deploy.testnetChainId). */
export const testnetChainId = 46630

/** Seconds between the chain's blocks: the api nodes' settlement watcher polls at a quarter of it. */
export const chainBlockTimeSeconds = 0.25

/**
 * Seconds between the stand-in chain node's state writes (anvil's `--state-interval`; it also
 * writes at a clean stop). Each write is the whole history and stalls anvil while it runs, so
 * once a second it set the distributed mode's tail (D90); a crash of the node loses at most
 * this much, the same bound as the embedded chain under continuous load (D89), or the whole file
 * if it lands during a write (anvil truncates first; D89's writes are atomic, anvil's are not).
 */
export const standInChainStateIntervalSeconds = 30

/** How long compose waits for the chain node's exit write before SIGKILL, which would cut it short. */
export const standInChainStopGraceSeconds = 60

/** Where things are reached and bound, the only thing compose and the cluster script do differently. */
export interface Addresses {
  /** Interface the listeners bind: 0.0.0.0 in a container, 127.0.0.1 on a machine. */
  readonly bindHost: string
  /** PostgreSQL URLs of the api tier's database and of the guardian's own. */
  readonly apiDatabaseUrl: string
  readonly guardianDatabaseUrl: string
  readonly natsUrl: string
  readonly chainRpcUrl: string
  /** The guardian processes (one serves, the others stand by: Lease.ts in the guardian package). */
  readonly guardians: ReadonlyArray<{ readonly host: string; readonly port: number }>
  /** Per api node (NODE_ROLE=api, behind the balancer): the host others reach it at and its two ports. */
  readonly api: ReadonlyArray<{ readonly host: string; readonly port: number; readonly adminPort: number }>
  /** Per worker node (NODE_ROLE=worker: relay, webhooks, sweeps, adoption; in no balancer). */
  readonly workers: ReadonlyArray<{ readonly host: string; readonly port: number; readonly adminPort: number }>
  /** The balancer's public TLS port, and its plain-HTTP health port on its own loopback. */
  readonly balancerPort: number
  readonly balancerHealthPort: number
  /** The DNS server the balancer resolves api node names from while running, if they are names (haproxy.ts). */
  readonly balancerResolver: string | undefined
  /** The address the balancer connects to the api nodes from, if it is given one (haproxy.ts). */
  readonly balancerSourceAddress: string | undefined
  /** The origin browsers reach the balancer at (the dashboard's WebAuthn relying party: a host name). */
  readonly publicOrigin: string
  /**
   * The balancer's address as the api nodes see it (`TRUSTED_PROXIES`): its
   * `X-Forwarded-For` then names the client of a dashboard sign-in step, which is
   * rate-limited per client address.
   */
  readonly trustedProxies: string
  /** The balancer's certificate followed by its private key, in one PEM file (HAProxy's format). */
  readonly tlsPemFile: string
  /** Per server node, by name: its own data directory (the server.lock and admin.json live there). */
  readonly nodeDataDir: (name: string) => string
}

/** How compose learns a service is ready; the cluster script polls the same URL. */
export type Health =
  | { readonly _tag: "http"; readonly url: string }
  | { readonly _tag: "none" }

export interface NodeService {
  readonly name: string
  readonly role: "guardian" | "deploy" | "api" | "worker"
  /** The arguments after `node` (the image's working directory is the repository root). */
  readonly args: ReadonlyArray<string>
  readonly environment: Readonly<Record<string, string>>
  /** Services this one needs first, and in what state (compose's depends_on conditions). */
  readonly dependsOn: Readonly<Record<string, "service_healthy" | "service_completed_successfully">>
  readonly health: Health
  /** A one-shot step (the deployment) runs to completion; the others run until stopped. */
  readonly oneShot: boolean
}

// V8's defaults, not the embedded mode's memory flags (ProcessMemory.nodeFlags): measured here they
// cost 1.33x the CPU a transfer at 256 clients for a third less idle memory (D96).
const node = (script: string, ...rest: Array<string>) => ["--disable-warning=ExperimentalWarning", script, ...rest]

/** Names of the guardian processes: guardian-1, guardian-2, ... */
export const guardianName = (index: number) => `guardian-${index + 1}`

/** Names of the api nodes: api-1, api-2, ... */
export const apiNodeName = (index: number) => `api-${index + 1}`

/**
 * The worker nodes compose and `npm run cluster` start by default: two, so no background
 * loop has a single instance (each is safe with several at once: docs/operations.md, Scaling).
 */
export const defaultWorkerNodes = 2

/** Names of the worker nodes: worker-1, ... */
export const workerNodeName = (index: number) => `worker-${index + 1}`

/** The env-file variable holding a node's own relayer keys (nodes must not share a nonce sequence). */
export const relayerKeysVariable = (nodeName: string) => `RELAYER_KEYS_TESTNET_${nodeName.toUpperCase().replace("-", "_")}`

/**
 * The services this repository's image runs, in start order. PostgreSQL, NATS, the
 * chain node and the balancer are third-party programs: compose runs their images, the
 * cluster script the machine's PostgreSQL, NATS and HAProxy and anvil from npm.
 */
export const nodeServices = (at: Addresses): ReadonlyArray<NodeService> => {
  // Every client lists every guardian: calls move to the next one when one is unavailable.
  const guardianUrl = at.guardians.map((self) => `http://${self.host}:${self.port}`).join(",")
  const guardianNames = at.guardians.map((_, index) => guardianName(index))
  const guardians = at.guardians.map((self, index): NodeService => ({
    name: guardianName(index),
    role: "guardian",
    args: node("packages/guardian/src/main.ts"),
    environment: {
      GUARDIAN_HOST: at.bindHost,
      GUARDIAN_PORT: String(self.port),
      GUARDIAN_DATABASE_URL: at.guardianDatabaseUrl,
      GUARDIAN_SECRET: "${GUARDIAN_SECRET}",
      GUARDIAN_SHARED_SECRET: "${GUARDIAN_SHARED_SECRET}",
      GUARDIAN_RPC_URLS: `${testnetChainId}=${at.chainRpcUrl}`,
      LOG_LEVEL: "${LOG_LEVEL}"
    },
    dependsOn: { postgres: "service_healthy", chain: "service_healthy" },
    // /healthz answers in both states, serving and standby (/readyz only when serving).
    health: { _tag: "http", url: `http://127.0.0.1:${self.port}/healthz` },
    oneShot: false
  }))
  const guardiansHealthy = Object.fromEntries(guardianNames.map((name) => [name, "service_healthy" as const]))
  // The operator's administrative step (docs/operations.md): the owner key is in its
  // environment only, never an api node's. Serialized by an advisory lock; api nodes wait
  // for its record.
  const deploy: NodeService = {
    name: "deploy",
    role: "deploy",
    args: node("packages/server/src/admin/cli.ts", "chain", "deploy", "--mode", "test"),
    environment: {
      DATABASE_URL: at.apiDatabaseUrl,
      RPC_URL_TESTNET: at.chainRpcUrl,
      OPERATOR_KEY_TESTNET: "${OPERATOR_KEY_TESTNET}",
      FAUCET_KEY_TESTNET: "${FAUCET_KEY_TESTNET}",
      GUARDIAN_URL: guardianUrl,
      GUARDIAN_SHARED_SECRET: "${GUARDIAN_SHARED_SECRET}"
    },
    dependsOn: { postgres: "service_healthy", chain: "service_healthy", ...guardiansHealthy },
    health: { _tag: "none" },
    oneShot: true
  }
  // Only api nodes are behind the balancer; workers serve no dashboard.
  const behindBalancer = (role: "api" | "worker"): Record<string, string> => role === "api" ? { TRUSTED_PROXIES: at.trustedProxies } : {}
  const serverNode = (name: string, role: "api" | "worker", self: Addresses["api"][number]): NodeService => ({
    name,
    role,
    args: node("packages/server/src/main.ts"),
    environment: {
      NODE_ROLE: role,
      HOST: at.bindHost,
      PORT: String(self.port),
      ADMIN_HOST: at.bindHost,
      ADMIN_PORT: String(self.adminPort),
      DATA_DIR: at.nodeDataDir(name),
      DATABASE_URL: at.apiDatabaseUrl,
      API_KEY_PEPPER: "${API_KEY_PEPPER}",
      WALLET_KEK: "${WALLET_KEK}",
      ADMIN_TOKEN: "${ADMIN_TOKEN}",
      NATS_URL: at.natsUrl,
      NATS_STREAM: "${NATS_STREAM}",
      NATS_SUBJECT_PREFIX: "${NATS_SUBJECT_PREFIX}",
      RPC_URL_TESTNET: at.chainRpcUrl,
      CHAIN_BLOCK_TIME_MS: String(chainBlockTimeSeconds * 1000),
      RELAYER_KEYS_TESTNET: `\${${relayerKeysVariable(name)}}`,
      FAUCET_KEY_TESTNET: "${FAUCET_KEY_TESTNET}",
      GUARDIAN_URL: guardianUrl,
      GUARDIAN_SHARED_SECRET: "${GUARDIAN_SHARED_SECRET}",
      WEBHOOK_ALLOW_INSECURE_LOOPBACK: "${WEBHOOK_ALLOW_INSECURE_LOOPBACK}",
      DASHBOARD_ORIGIN: at.publicOrigin,
      ...behindBalancer(role),
      LOG_LEVEL: "${LOG_LEVEL}"
    },
    dependsOn: {
      postgres: "service_healthy",
      nats: "service_healthy",
      chain: "service_healthy",
      ...guardiansHealthy,
      deploy: "service_completed_successfully"
    },
    // A worker serves /readyz on its public port too (and nothing else there).
    health: { _tag: "http", url: `http://127.0.0.1:${self.port}/readyz` },
    oneShot: false
  })
  const apiNodes = at.api.map((self, index) => serverNode(apiNodeName(index), "api", self))
  const workerNodes = at.workers.map((self, index) => serverNode(workerNodeName(index), "worker", self))
  return [...guardians, deploy, ...apiNodes, ...workerNodes]
}

/**
 * The load balancer (HAProxy: a third-party program, like PostgreSQL and NATS): TLS in front
 * of the api nodes only, never a worker.
 */
export const balancerSettings = (at: Addresses): BalancerSettings => ({
  bindHost: at.bindHost,
  port: at.balancerPort,
  healthPort: at.balancerHealthPort,
  pemFile: at.tlsPemFile,
  upstreams: at.api.map((self, index) => ({ name: apiNodeName(index), host: self.host, port: self.port })),
  resolver: at.balancerResolver,
  sourceAddress: at.balancerSourceAddress
})

/** The `${NAME}` references of a value. */
export const referencesOf = (value: string): Array<string> =>
  [...value.matchAll(/\$\{([A-Z][A-Z0-9_]*)\}/g)].map((match) => match[1]!)

/** A value with its references replaced from the env file; a missing one is refused. */
export const substitute = (value: string, env: ReadonlyMap<string, string>): string =>
  value.replace(/\$\{([A-Z][A-Z0-9_]*)\}/g, (_, name: string) => {
    const found = env.get(name)
    if (found === undefined) throw new Error(`the env file does not set ${name}`)
    return found
  })
