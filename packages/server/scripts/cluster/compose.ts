/**
 * Renders `docker-compose.yml` and the balancer's `deploy/haproxy.cfg` from the topology
 * (topology.ts, haproxy.ts), so the compose files and `npm run cluster` cannot drift apart:
 * `node packages/server/scripts/cluster/compose.ts` rewrites both, and
 * test/deployment.test.ts fails when a committed file is not this rendering.
 *
 * The YAML is written by hand: block mappings and sequences, every scalar as a JSON
 * string or number, which YAML 1.2 reads as a double-quoted scalar.
 */
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { renderHaproxyConfig } from "./haproxy.ts"
import { type Addresses, apiNodeName, balancerSettings, chainBlockTimeSeconds, defaultWorkerNodes, guardianName, nodeServices, standInChainStateIntervalSeconds, standInChainStopGraceSeconds, testnetChainId, workerNodeName } from "./topology.ts"

/** The api nodes compose starts; more are more entries here (and relayer keys in the env file). */
export const composeApiNodes = 2

/** Worker nodes (NODE_ROLE=worker): the relay, webhook delivery, sweeps and adoption run there only. */
export const composeWorkerNodes = defaultWorkerNodes

/** Guardian processes: one serves, the others stand by for its lease. */
export const composeGuardians = 2

/** The image this repository's Dockerfile builds; every node service runs it. */
const imageName = "private-payments-service:local"

/**
 * The balancer's image: the official HAProxy image, the version Debian's package on the
 * development machines is (the tests run that one); Alpine for busybox's `wget` (the health
 * probe). It reads its configuration from this path.
 */
const haproxyImage = "haproxy:2.6.12-alpine"
const haproxyConfigPath = "/usr/local/etc/haproxy/haproxy.cfg"

const apiPort = 8080
const adminPort = 8081

/** Addresses inside the compose network. */
export const composeAddresses: Addresses = {
  bindHost: "0.0.0.0",
  apiDatabaseUrl: "postgres://pps:${POSTGRES_PASSWORD}@postgres:5432/${PPS_DATABASE}",
  guardianDatabaseUrl: "postgres://pps_guardian:${GUARDIAN_POSTGRES_PASSWORD}@postgres:5432/${PPS_GUARDIAN_DATABASE}",
  natsUrl: "nats://nats:4222",
  chainRpcUrl: "http://chain:8545",
  guardians: Array.from({ length: composeGuardians }, (_, index) => ({ host: guardianName(index), port: 8090 })),
  api: Array.from({ length: composeApiNodes }, (_, index) => ({ host: apiNodeName(index), port: apiPort, adminPort })),
  workers: Array.from({ length: composeWorkerNodes }, (_, index) => ({ host: workerNodeName(index), port: apiPort, adminPort })),
  balancerPort: 8443,
  balancerHealthPort: 8404,
  // Docker's embedded DNS: a recreated api container's new address is found again.
  balancerResolver: "127.0.0.11:53",
  // Docker gives the balancer its address (PPS_TRUSTED_PROXIES names the network's range).
  balancerSourceAddress: undefined,
  publicOrigin: "${PPS_PUBLIC_ORIGIN}",
  // The balancer's container address is assigned by Docker; the env file names the compose
  // network's range (the api nodes publish no port, so only this project's containers reach them).
  trustedProxies: "${PPS_TRUSTED_PROXIES}",
  tlsPemFile: "/tls/balancer.pem",
  nodeDataDir: () => "/data"
}

/** Compose refuses to start when a variable is unset, naming the file to fix. */
const required = (value: string) => value.replace(/\$\{([A-Z][A-Z0-9_]*)\}/g, "$${$1:?set $1 in deploy/cluster.env}")

export type Yaml = string | number | ReadonlyArray<string> | { readonly [key: string]: Yaml }

const renderYaml = (value: { readonly [key: string]: Yaml }, indent: string): Array<string> =>
  Object.entries(value).flatMap(([key, entry]) => {
    if (typeof entry === "string" || typeof entry === "number") return [`${indent}${key}: ${JSON.stringify(entry)}`]
    if (Array.isArray(entry)) return [`${indent}${key}:`, ...entry.map((item: string) => `${indent}  - ${JSON.stringify(item)}`)]
    return [`${indent}${key}:`, ...renderYaml(entry as { readonly [key: string]: Yaml }, `${indent}  `)]
  })

/** The image has node and nothing else to ask with. */
const nodeHealthcheck = (url: string): Yaml => ({
  test: ["CMD", "node", "-e", `fetch('${url}').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`],
  interval: "5s",
  timeout: "3s",
  retries: 24,
  start_period: "20s"
})

/** HAProxy from its official image, on the rendered configuration (deploy/haproxy.cfg). */
const balancerService = (): Yaml => ({
  image: haproxyImage,
  restart: "unless-stopped",
  volumes: [`./deploy/haproxy.cfg:${haproxyConfigPath}:ro`, "./deploy/tls:/tls:ro"],
  ports: [`${composeAddresses.balancerPort}:${composeAddresses.balancerPort}`],
  depends_on: Object.fromEntries(composeAddresses.api.map((_, index) => [apiNodeName(index), { condition: "service_healthy" }])),
  healthcheck: {
    test: ["CMD", "wget", "-q", "-O", "/dev/null", `http://127.0.0.1:${composeAddresses.balancerHealthPort}/healthz`],
    interval: "5s",
    timeout: "3s",
    retries: 24,
    start_period: "5s"
  }
})

/** The compose document as data (what the test inspects). */
export const composeDocument = (): { readonly services: Record<string, Yaml>; readonly volumes: Record<string, Yaml> } => {
  const services: Record<string, Yaml> = {
    postgres: {
      image: "postgres:15.20-bookworm",
      restart: "unless-stopped",
      environment: {
        POSTGRES_USER: "pps",
        POSTGRES_PASSWORD: required("${POSTGRES_PASSWORD}"),
        POSTGRES_DB: required("${PPS_DATABASE}"),
        PPS_GUARDIAN_DATABASE: required("${PPS_GUARDIAN_DATABASE}"),
        GUARDIAN_POSTGRES_PASSWORD: required("${GUARDIAN_POSTGRES_PASSWORD}")
      },
      volumes: ["postgres-data:/var/lib/postgresql/data", "./deploy/postgres-init.sh:/docker-entrypoint-initdb.d/10-guardian.sh:ro"],
      healthcheck: { test: ["CMD", "pg_isready", "-U", "pps"], interval: "2s", timeout: "3s", retries: 30 }
    },
    nats: {
      image: "nats:2.9.10-alpine",
      restart: "unless-stopped",
      command: ["-js", "-sd", "/data", "-m", "8222"],
      volumes: ["nats-data:/data"],
      healthcheck: {
        test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8222/healthz"],
        interval: "2s",
        timeout: "3s",
        retries: 30
      }
    },
    chain: {
      // The testnet's external node: anvil, state kept in a volume.
      image: "ghcr.io/foundry-rs/foundry:v1.7.1",
      restart: "unless-stopped",
      entrypoint: [
        "anvil",
        "--host",
        "0.0.0.0",
        "--chain-id",
        String(testnetChainId),
        "--block-time",
        String(chainBlockTimeSeconds),
        "--state",
        "/data/state.json",
        "--state-interval",
        String(standInChainStateIntervalSeconds),
        "--silent"
      ],
      // anvil truncates the file and then writes it at exit: a SIGKILL in between loses the chain.
      stop_grace_period: `${standInChainStopGraceSeconds}s`,
      volumes: ["chain-data:/data"],
      healthcheck: { test: ["CMD", "cast", "chain-id", "--rpc-url", "http://127.0.0.1:8545"], interval: "2s", timeout: "3s", retries: 30 }
    }
  }
  const volumes: Record<string, Yaml> = { "postgres-data": {}, "nats-data": {}, "chain-data": {} }
  for (const service of nodeServices(composeAddresses)) {
    const entry: Record<string, Yaml> = {
      image: imageName,
      build: { context: ".", dockerfile: "Dockerfile" },
      command: ["node", ...service.args],
      restart: service.oneShot ? "on-failure" : "unless-stopped",
      environment: Object.fromEntries(Object.entries(service.environment).map(([name, value]) => [name, required(value)])),
      depends_on: Object.fromEntries(Object.entries(service.dependsOn).map(([name, condition]) => [name, { condition }]))
    }
    if (service.health._tag === "http") entry["healthcheck"] = nodeHealthcheck(service.health.url)
    if (service.role === "api" || service.role === "worker") {
      entry["volumes"] = [`${service.name}-data:/data`]
      volumes[`${service.name}-data`] = {}
    }
    services[service.name] = entry
  }
  services["balancer"] = balancerService()
  return { services, volumes }
}

/** The balancer's configuration in compose (`deploy/haproxy.cfg`, mounted into its container). */
export const renderComposeHaproxyConfig = (): string => renderHaproxyConfig(balancerSettings(composeAddresses))

/** The whole compose file, comments first. */
export const renderCompose = (): string => {
  const header = [
    "# GENERATED from packages/server/scripts/cluster/topology.ts by compose.ts: edit those, then run",
    "#   node --disable-warning=ExperimentalWarning packages/server/scripts/cluster/compose.ts",
    "# (test/deployment.test.ts fails when this file is not that rendering).",
    "#",
    "# The distributed deployment (docs/operations.md \"Distributed deployment\"): PostgreSQL, NATS",
    "# with JetStream, the chain node (anvil as the testnet's external node), two guardians (one",
    "# serves, one stands by for its lease), the contracts' deployment step, two api nodes",
    "# (NODE_ROLE=api), two worker nodes (NODE_ROLE=worker) and HAProxy as the TLS load balancer on",
    "# port 8443 (deploy/haproxy.cfg, rendered from the same topology).",
    "# `npm run cluster` starts the same processes without Docker, from the same env file.",
    "#",
    "#   npm run -s cluster -- --init-env deploy/cluster.env     # secrets generated, mode 0600",
    "#   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \\",
    "#     -subj /CN=localhost -keyout deploy/tls/key.pem -out deploy/tls/cert.pem",
    "#   cat deploy/tls/cert.pem deploy/tls/key.pem > deploy/tls/balancer.pem   # HAProxy reads one file",
    "#   docker compose --env-file deploy/cluster.env up -d",
    "#",
    "# deploy/tls/balancer.pem must be readable by the balancer container's user (haproxy, uid 99).",
    "#",
    "# Image tags: PostgreSQL 15.20, NATS 2.9.10 and HAProxy 2.6.12 are the versions the tests run",
    "# against on the development machines; anvil is the version npm installs (1.7.1). None was",
    "# pulled here.",
    "#",
    "# The admin API of each node is on the compose network only (port 8081); reach it with",
    "# `docker compose exec api-1 node packages/server/src/admin/cli.ts ...` and ADMIN_URL.",
    "# The guardian shares the PostgreSQL server here under its own role and database; for",
    "# confidentiality from the api operator run it on hosts of its own (docs/security.md)."
  ]
  return [...header, "", ...renderYaml(composeDocument(), ""), ""].join("\n")
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const [file, text] of [["docker-compose.yml", renderCompose()], ["deploy/haproxy.cfg", renderComposeHaproxyConfig()]] as const) {
    const target = fileURLToPath(new URL(`../../../../${file}`, import.meta.url))
    fs.writeFileSync(target, text)
    process.stdout.write(`wrote ${target}\n`)
  }
}
