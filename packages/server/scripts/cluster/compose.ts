/**
 * Renders `docker-compose.yml` from the topology (topology.ts), so the compose file and
 * `npm run cluster` cannot drift apart: `node packages/server/scripts/cluster/compose.ts`
 * rewrites the file, and test/deployment.test.ts fails when the committed file is not
 * this rendering.
 *
 * The YAML is written by hand: block mappings and sequences, every scalar as a JSON
 * string or number, which YAML 1.2 reads as a double-quoted scalar.
 */
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { type Addresses, apiNodeName, chainBlockTimeSeconds, defaultWorkerNodes, guardianName, nodeServices, testnetChainId, workerNodeName } from "./topology.ts"

/** The api nodes compose starts; more are more entries here (and relayer keys in the env file). */
export const composeApiNodes = 2

/** Worker nodes (NODE_ROLE=worker): the relay, webhook delivery, sweeps and adoption run there only. */
export const composeWorkerNodes = defaultWorkerNodes

/** Guardian processes: one serves, the others stand by for its lease. */
export const composeGuardians = 2

/** The image this repository's Dockerfile builds; every node service runs it. */
const imageName = "private-payments-service:local"

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
  publicOrigin: "${PPS_PUBLIC_ORIGIN}",
  // The balancer's container address is assigned by Docker; the env file names the compose
  // network's range (the api nodes publish no port, so only this project's containers reach them).
  trustedProxies: "${PPS_TRUSTED_PROXIES}",
  tlsCertFile: "/tls/cert.pem",
  tlsKeyFile: "/tls/key.pem",
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

const nodeHealthcheck = (url: string): Yaml => {
  // The image has node and nothing else to ask with; the balancer's certificate is the
  // operator's own (often self-signed), and the check is about liveness, not identity.
  const target = new URL(url)
  const probe = target.protocol === "https:"
    ? `require('https').get({host:'${target.hostname}',port:${target.port},path:'${target.pathname}',rejectUnauthorized:false},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))`
    : `fetch('${url}').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`
  return { test: ["CMD", "node", "-e", probe], interval: "5s", timeout: "3s", retries: 24, start_period: "20s" }
}

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
        "1",
        "--silent"
      ],
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
    if (service.role === "balancer") {
      entry["volumes"] = ["./deploy/tls:/tls:ro"]
      entry["ports"] = [`${composeAddresses.balancerPort}:${composeAddresses.balancerPort}`]
    }
    services[service.name] = entry
  }
  return { services, volumes }
}

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
    "# (NODE_ROLE=api), two worker nodes (NODE_ROLE=worker) and a TLS load balancer on port 8443.",
    "# `npm run cluster` starts the same processes without Docker, from the same env file.",
    "#",
    "#   npm run -s cluster -- --init-env deploy/cluster.env     # secrets generated, mode 0600",
    "#   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \\",
    "#     -subj /CN=localhost -keyout deploy/tls/key.pem -out deploy/tls/cert.pem",
    "#   docker compose --env-file deploy/cluster.env up -d",
    "#",
    "# Image tags: PostgreSQL 15.20 and NATS 2.9.10 are the versions the tests run against on the",
    "# development machines; anvil is the version npm installs (1.7.1). None was pulled here.",
    "#",
    "# The admin API of each node is on the compose network only (port 8081); reach it with",
    "# `docker compose exec api-1 node packages/server/src/admin/cli.ts ...` and ADMIN_URL.",
    "# The guardian shares the PostgreSQL server here under its own role and database; for",
    "# confidentiality from the api operator run it on hosts of its own (docs/security.md)."
  ]
  return [...header, "", ...renderYaml(composeDocument(), ""), ""].join("\n")
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const target = fileURLToPath(new URL("../../../../docker-compose.yml", import.meta.url))
  fs.writeFileSync(target, renderCompose())
  process.stdout.write(`wrote ${target}\n`)
}
