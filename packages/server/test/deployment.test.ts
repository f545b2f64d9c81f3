/**
 * The shipped deployment is right by the code's own reading (docs/operations.md): docker-compose.yml
 * and deploy/haproxy.cfg are the rendering of the topology `npm run cluster` starts, and HAProxy
 * accepts that configuration; every variable a service is
 * given is one its program reads, and the ones it needs are there; the env-file template
 * sets every variable compose interpolates; and the environment the template yields
 * passes the server's, the guardian's and the deploy step's real configuration decoders.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { GuardianConfig } from "@pps/guardian"
import { type Config, ConfigProvider, Effect, Option, Redacted } from "effect"
import { ensureCertificate } from "../scripts/cluster/cluster.ts"
import { composeAddresses, composeDocument, renderCompose, renderComposeHaproxyConfig } from "../scripts/cluster/compose.ts"
import { haproxyBinary, writeHaproxyConfig } from "../scripts/cluster/haproxy.ts"
import { initEnvFile, parseEnvFile, readEnvFile } from "../scripts/cluster/envFile.ts"
import { nodeServices, type NodeService, referencesOf, substitute } from "../scripts/cluster/topology.ts"
import { deployConfig, deployEnvironmentVariables } from "../src/admin/deploy.ts"
import { appConfig, environmentVariables as serverVariables } from "../src/config/AppConfig.ts"
import { haproxyAvailable } from "./support/haproxy.ts"

const repositoryFile = (name: string) => fileURLToPath(new URL(`../../../${name}`, import.meta.url))

/**
 * A compose implementation on this machine, if any: the `docker compose` plugin, or the
 * standalone `docker-compose` (Debian's 1.29). Neither needs a Docker engine for `config`.
 */
const composeCommand = ((): ReadonlyArray<string> | undefined => {
  for (const command of [["docker", "compose"], ["docker-compose"]]) {
    const probe = spawnSync(command[0]!, [...command.slice(1), "version"], { stdio: "ignore" })
    if (probe.status === 0) return command
  }
  return undefined
})()
// .ci/run installs one and sets PPS_REQUIRE_COMPOSE=1, so CI never skips the check silently.
if (composeCommand === undefined && process.env.PPS_REQUIRE_COMPOSE === "1") {
  throw new Error("PPS_REQUIRE_COMPOSE=1 but neither `docker compose` nor `docker-compose` is on this machine")
}
if (composeCommand === undefined) console.warn("\n*** no docker compose on this machine: SKIPPING the compose config check ***\n")

const services = nodeServices(composeAddresses)
const byRole = (role: NodeService["role"]) => services.filter((service) => service.role === role)
/** The server nodes: api-only behind the balancer, workers beside them. */
const serverNodes = () => [...byRole("api"), ...byRole("worker")]
const template = repositoryFile("deploy/cluster.env.example")

/** The env file `--init-env` makes from the template, with the template's references resolved into each service. */
const resolvedEnvironment = (service: NodeService) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-deployment-"))
  try {
    const file = path.join(dir, "cluster.env")
    assert.strictEqual(initEnvFile(template, file), "created")
    const env = readEnvFile(file)
    return Object.fromEntries(Object.entries(service.environment).map(([name, value]) => [name, substitute(value, env)]))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

describe("the distributed deployment", () => {
  it("docker-compose.yml is the rendering of the topology npm run cluster starts", () => {
    assert.strictEqual(fs.readFileSync(repositoryFile("docker-compose.yml"), "utf8"), renderCompose())
  })

  it.skipIf(composeCommand === undefined)("docker compose config accepts the file with an env file made from the template, and refuses it without one", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-compose-"))
    try {
      const envFile = path.join(dir, "cluster.env")
      initEnvFile(template, envFile)
      const run = (extra: ReadonlyArray<string>) =>
        spawnSync(composeCommand![0]!, [...composeCommand!.slice(1), "--project-directory", repositoryFile("."), "-f", repositoryFile("docker-compose.yml"), ...extra, "config"], {
          encoding: "utf8",
          cwd: dir
        })
      const accepted = run(["--env-file", envFile])
      assert.strictEqual(accepted.status, 0, accepted.stderr)
      assert.include(accepted.stdout, "NODE_ROLE: worker")
      // Without the env file a required secret is missing, and compose says which and where to set it.
      const refused = run([])
      assert.notStrictEqual(refused.status, 0)
      assert.include(refused.stderr, "in deploy/cluster.env")
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("every service gets only variables its program reads, and the ones it needs", () => {
    const guardianVariables: ReadonlyArray<string> = GuardianConfig.environmentVariables
    assert.isAtLeast(byRole("api").length, 2)
    assert.isAtLeast(byRole("worker").length, 1)
    for (const service of serverNodes()) {
      assert.strictEqual(service.environment["NODE_ROLE"], service.role)
      const names = Object.keys(service.environment)
      assert.deepStrictEqual(names.filter((name) => !(serverVariables as ReadonlyArray<string>).includes(name)), [], service.name)
      for (const needed of ["DATABASE_URL", "API_KEY_PEPPER", "WALLET_KEK", "ADMIN_TOKEN", "NATS_URL", "RPC_URL_TESTNET", "RELAYER_KEYS_TESTNET", "GUARDIAN_URL", "GUARDIAN_SHARED_SECRET"]) {
        assert.include(names, needed, service.name)
      }
      assert.strictEqual(service.environment["HOST"], "0.0.0.0")
      assert.strictEqual(service.environment["DASHBOARD_ORIGIN"], "${PPS_PUBLIC_ORIGIN}")
      // Behind the balancer the sign-in limit must see clients, not the balancer.
      assert.strictEqual(service.environment["TRUSTED_PROXIES"], service.role === "api" ? "${PPS_TRUSTED_PROXIES}" : undefined, service.name)
      assert.strictEqual(service.environment["ADMIN_HOST"], "0.0.0.0")
    }
    for (const service of byRole("guardian")) {
      const names = Object.keys(service.environment)
      assert.deepStrictEqual(names.filter((name) => !guardianVariables.includes(name)), [], service.name)
      for (const needed of ["GUARDIAN_DATABASE_URL", "GUARDIAN_SECRET", "GUARDIAN_RPC_URLS", "GUARDIAN_SHARED_SECRET"]) assert.include(names, needed)
      assert.strictEqual(service.environment["GUARDIAN_HOST"], "0.0.0.0")
    }
    for (const service of byRole("deploy")) {
      const names = Object.keys(service.environment)
      assert.deepStrictEqual(names.filter((name) => !(deployEnvironmentVariables as ReadonlyArray<string>).includes(name)), [])
      assert.include(names, "OPERATOR_KEY_TESTNET")
    }
    // The owner key only on the deploy step; the guardian's secret only on the guardian.
    for (const service of services) {
      if (service.role !== "deploy") assert.notInclude(Object.keys(service.environment), "OPERATOR_KEY_TESTNET", service.name)
      if (service.role !== "guardian") assert.notInclude(Object.keys(service.environment), "GUARDIAN_SECRET", service.name)
    }
    // Each api node its own relayer keys: a shared relayer would mean two nonce sequences for one account.
    const relayerReferences = serverNodes().map((service) => service.environment["RELAYER_KEYS_TESTNET"])
    assert.strictEqual(new Set(relayerReferences).size, relayerReferences.length)
  })

  it("deploy/haproxy.cfg is the rendering of the balancer's settings, and HAProxy runs the official image on it", () => {
    assert.strictEqual(fs.readFileSync(repositoryFile("deploy/haproxy.cfg"), "utf8"), renderComposeHaproxyConfig())
    const balancer = composeDocument().services["balancer"] as Record<string, unknown>
    assert.match(String(balancer["image"]), /^haproxy:2\.6\.\d+-alpine$/)
    assert.include(balancer["volumes"] as ReadonlyArray<string>, "./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro")
    assert.deepStrictEqual(Object.keys(balancer["depends_on"] as object), byRole("api").map((service) => service.name))
  })

  it("the balancer sends traffic to the api nodes only, never to a worker", () => {
    const servers = [...renderComposeHaproxyConfig().matchAll(/^ {2}server (\S+) (\S+)/gm)].map((match) => [match[1], match[2]])
    assert.deepStrictEqual(servers, composeAddresses.api.map((self, index) => [byRole("api")[index]!.name, `${self.host}:${self.port}`]))
  })

  it.skipIf(!haproxyAvailable)("HAProxy accepts the configuration (haproxy -c), compose's and a machine's", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-haproxy-config-"))
    try {
      const { pem } = ensureCertificate(path.join(dir, "tls"))
      // Compose's, with the certificate where this machine has it (the api nodes' names do not resolve here).
      const composeConfig = path.join(dir, "compose.cfg")
      fs.writeFileSync(composeConfig, renderComposeHaproxyConfig().replace("/tls/balancer.pem", pem))
      const machineConfig = path.join(dir, "machine.cfg")
      writeHaproxyConfig(machineConfig, {
        bindHost: "127.0.0.1",
        port: 8443,
        healthPort: 8404,
        pemFile: pem,
        upstreams: [{ name: "api-1", host: "127.0.0.1", port: 8080 }],
        resolver: undefined,
        sourceAddress: "127.0.0.2"
      })
      for (const file of [composeConfig, machineConfig]) {
        const checked = spawnSync(haproxyBinary(), ["-c", "-f", file], { encoding: "utf8" })
        assert.strictEqual(checked.status, 0, `${file}: ${checked.stdout}${checked.stderr}`)
        assert.notMatch(`${checked.stdout}${checked.stderr}`, /ALERT/)
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("the template sets every variable compose interpolates, and none it does not", () => {
    const composeText = fs.readFileSync(repositoryFile("docker-compose.yml"), "utf8")
    const interpolated = new Set([...composeText.matchAll(/\$\{([A-Z][A-Z0-9_]*)(?::\?[^}]*)?\}/g)].map((match) => match[1]!))
    const templateNames = new Set(parseEnvFile(fs.readFileSync(template, "utf8")).keys())
    assert.deepStrictEqual([...interpolated].filter((name) => !templateNames.has(name)).sort(), [])
    assert.deepStrictEqual([...templateNames].filter((name) => !interpolated.has(name)).sort(), [])
    // The cluster script substitutes the same references from the same file.
    const referenced = new Set(services.flatMap((service) => Object.values(service.environment).flatMap(referencesOf)))
    assert.deepStrictEqual([...referenced].filter((name) => !templateNames.has(name)).sort(), [])
  })

  it("long-running services restart and report health; api nodes wait for the guardian and the deployment", () => {
    const document = composeDocument().services as Record<string, Record<string, unknown>>
    for (const [name, service] of Object.entries(document)) {
      if (name === "deploy") {
        assert.strictEqual(service["restart"], "on-failure")
        continue
      }
      assert.strictEqual(service["restart"], "unless-stopped", name)
      assert.isDefined(service["healthcheck"], name)
    }
    for (const service of serverNodes()) {
      for (const guardian of byRole("guardian")) assert.strictEqual(service.dependsOn[guardian.name], "service_healthy")
      assert.strictEqual(service.dependsOn["deploy"], "service_completed_successfully")
      assert.strictEqual(service.dependsOn["postgres"], "service_healthy")
      assert.strictEqual(service.dependsOn["nats"], "service_healthy")
    }
    for (const guardian of byRole("guardian")) {
      assert.strictEqual(byRole("deploy")[0]!.dependsOn[guardian.name], "service_healthy")
      assert.strictEqual(guardian.dependsOn["postgres"], "service_healthy")
    }
  })

  it.effect("the template's values pass the server's, the guardian's and the deploy step's configuration", () =>
    Effect.gen(function*() {
      const provide = (env: Record<string, string>) => Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))
      const read = <A>(config: Config.Config<A>) => Effect.gen(function*() {
        return yield* config
      })
      for (const service of serverNodes()) {
        const config = yield* read(appConfig).pipe(provide(resolvedEnvironment(service)))
        assert.strictEqual(config.nodeRole, service.role)
        assert.strictEqual(config.dashboardOrigin, "https://localhost:8443")
        assert.isTrue(Option.isSome(config.databaseUrl))
        assert.isTrue(Option.isSome(config.natsUrl))
        assert.isTrue(Option.isSome(config.guardianUrl))
        assert.isTrue(Option.isSome(config.relayerKeysTestnet))
        assert.isAtLeast(Redacted.value(Option.getOrThrow(config.adminToken)).length, 32)
        assert.strictEqual(Buffer.from(Redacted.value(Option.getOrThrow(config.walletKek)), "base64").length, 32)
      }
      const guardian = resolvedEnvironment(byRole("guardian")[0]!)
      const options = yield* GuardianConfig.options.pipe(provide(guardian))
      assert.strictEqual(options.database._tag, "postgres")
      assert.deepStrictEqual((options.chains ?? []).map((chain) => chain.chainId), [46630n])
      const listener = yield* GuardianConfig.listener.pipe(provide(guardian))
      assert.strictEqual(listener.port, composeAddresses.guardians[0]!.port)
      const deploy = yield* read(deployConfig("test")).pipe(provide(resolvedEnvironment(byRole("deploy")[0]!)))
      // Every guardian, for the client's failover.
      assert.strictEqual(deploy.guardianUrl, composeAddresses.guardians.map((self) => `http://${self.host}:${self.port}`).join(","))
      assert.isAtLeast(composeAddresses.guardians.length, 2)
    }))
})
