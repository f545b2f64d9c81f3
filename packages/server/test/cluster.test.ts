/**
 * The multi-node deployment end to end (docs/operations.md): the topology of `npm run cluster`
 * (the machine's PostgreSQL and NATS, anvil, two guardians, the deploy step, two api
 * nodes, two workers, HAProxy as the TLS balancer), under transfer load through the balancer,
 * with the serving guardian (the standby takes its lease over), then one api node, then one
 * worker SIGKILLed mid-load, none restarted (the other worker carries the background work
 * alone). The fault harness's checks must all hold:
 * every request answered, no 5xx on the way but 503 with Retry-After (what HAProxy answers
 * for a request the killed node took down with it), one key one transfer (retries by
 * Idempotency-Key reach the survivor), nothing stuck pending (the survivor adopts the dead node's submissions),
 * balances exact, one terminal webhook per transfer and side (delivered over NATS), no
 * process left after the stop. First, with both nodes up and their API-key caches on, a key
 * revoked through one node is refused by the other at once (the revocation pushed over NATS).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as tls from "node:tls"
import { fileURLToPath } from "node:url"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { type Cluster, dropDatabases, startCluster } from "../scripts/cluster/cluster.ts"
import { writeRunEnvFile } from "../scripts/cluster/envFile.ts"
import { ulid } from "../src/platform/Ids.ts"
import { formatReport, type HarnessTopology, runHarnessOn } from "./fault/harness.ts"
import { haproxyAvailable } from "./support/haproxy.ts"
import { natsAvailable, natsUrl } from "./support/requireNats.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl } from "./support/TestServer.ts"

const seed = Number(process.env["CLUSTER_SEED"] ?? "20261125")
const template = fileURLToPath(new URL("../../../deploy/cluster.env.example", import.meta.url))
const runId = ulid().toLowerCase()
/** The machine's PostgreSQL server, without the maintenance database's path. */
const postgresServerUrl = postgresAdminUrl.replace(/\/[^/]*$/, "")

/** The template with fresh secrets, and names of this run's own (dropped afterwards). */
const writeEnvFile = (dir: string) => {
  const stream = `PPS_CLUSTER_${runId.toUpperCase()}`
  const file = writeRunEnvFile(template, dir, {
    PPS_DATABASE: `pps_cluster_${runId}`,
    PPS_GUARDIAN_DATABASE: `pps_cluster_${runId}_guardian`,
    NATS_STREAM: stream,
    NATS_SUBJECT_PREFIX: `cluster${runId}`,
    // The harness's webhook receiver listens on loopback.
    WEBHOOK_ALLOW_INSECURE_LOOPBACK: "1",
    // Info: the survivor's takeover lines are the evidence printed with the run.
    LOG_LEVEL: "Info"
  })
  return { file, stream }
}

describe.skipIf(!postgresAvailable || !natsAvailable || !haproxyAvailable)("the cluster of npm run cluster", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-cluster-"))
  let cluster: Cluster | undefined
  let stream = ""
  /** Whether the harness ran: it then removed the directory, or kept it for a failed run. */
  let harnessRan = false
  const lines: Array<string> = []

  beforeAll(async () => {
    const env = writeEnvFile(dir)
    stream = env.stream
    cluster = await startCluster({
      envFile: env.file,
      dir,
      apiNodes: 2,
      workers: 2,
      guardians: 2,
      postgresUrl: postgresServerUrl,
      natsUrl,
      log: (line) => lines.push(line)
    })
    // The balancer's certificate is self-signed: trust it, in this test process only.
    tls.setDefaultCACertificates([...tls.getCACertificates("default"), fs.readFileSync(cluster.certFile, "utf8")])
  }, 300_000)

  afterAll(async () => {
    await cluster?.stop()
    if (cluster !== undefined) await dropDatabases(postgresServerUrl, cluster.databases)
    const nc = await connect({ servers: natsUrl })
    await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false)
    await nc.close()
    if (!harnessRan) fs.rmSync(dir, { recursive: true, force: true })
  }, 120_000)

  it("a key revoked through one node is refused by the other at once", { timeout: 240_000 }, async () => {
    const [first, second] = cluster!.apiNodes
    const adminToken = cluster!.env.get("ADMIN_TOKEN")!
    const created = await fetch(`${first!.adminUrl}/admin/accounts`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ handle: "revocation-check", kyc_status: "verified" })
    })
    assert.strictEqual(created.status, 201)
    const { api_key: apiKey, key_id: keyId } = (await created.json()) as { api_key: string; key_id: string }
    const me = (node: { readonly baseUrl: string }) =>
      fetch(`${node.baseUrl}/v1/accounts/me`, { headers: { authorization: `Bearer ${apiKey}` } }).then((response) => response.status)
    for (const node of [first!, second!]) {
      assert.include(fs.readFileSync(node.logFile, "utf8"), "api key cache on", `${node.name} caches API keys`)
    }
    // Both nodes have served the key and hold it in their caches (on by default with NATS:
    // API_KEY_CACHE_TTL_MS is 30 s), so the refusal below is the pushed eviction's.
    assert.deepStrictEqual([await me(first!), await me(second!), await me(first!), await me(second!)], [200, 200, 200, 200])
    const revoked = await fetch(`${first!.adminUrl}/admin/keys/${keyId}/revoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}` }
    })
    assert.strictEqual(revoked.status, 200)
    // The very next request on the other node is refused, and on this one.
    assert.strictEqual(await me(second!), 401)
    assert.strictEqual(await me(first!), 401)
  })
  it(`the serving guardian, then one api node, then one worker, SIGKILLed under load: the survivors finish the work (seed ${seed})`, { timeout: 420_000 }, async () => {
    const [first, second] = cluster!.apiNodes
    const [serving, standby] = cluster!.guardians
    const workers = cluster!.workers
    // The guardian kill also measures the takeover: until the standby answers /readyz.
    const takeoverMs: Array<number> = []
    /** Evidence of the api node takeover: the submissions each worker's log says it adopted. */
    let adopted: Array<string> = []
    const servingGuardian = {
      ...serving!,
      kill: async () => {
        await serving!.kill()
        const killedAtMs = Date.now()
        for (;;) {
          const ready = await fetch(`${standby!.baseUrl}/readyz`).then((response) => response.status === 200, () => false)
          if (ready) break
          if (Date.now() - killedAtMs > 120_000) throw new Error("the standby guardian never took over")
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
        takeoverMs.push(Date.now() - killedAtMs)
      }
    }
    const topology: HarnessTopology = {
      baseUrl: cluster!.baseUrl,
      // The survivor's admin listener: the other node is the one the schedule kills.
      adminUrl: second!.adminUrl,
      adminToken: () => cluster!.env.get("ADMIN_TOKEN")!,
      // Then a worker: the other worker carries on alone (relay, fan-out, deliveries, adoption).
      targets: [servingGuardian, first!, workers[0]!],
      killInOrder: true,
      survivesKills: true,
      start: async () => {},
      // Stopped by the harness, which then checks that no process of it is left (and removes
      // the logs of a run that kept every invariant: the takeover evidence is read first).
      stop: async () => {
        adopted = workers.map((worker) =>
          `${worker.name} ${fs.readFileSync(worker.logFile, "utf8").split("\n").filter((line) => line.includes("adopting a dead node's submission")).length}`
        )
        await cluster!.stop()
      },
      workDir: dir
    }
    harnessRan = true
    const report = await runHarnessOn({
      seed,
      kills: 3,
      clients: 3,
      accounts: 4,
      durationMs: 18_000,
      webhooks: true,
      // The harness removes the working directory (logs, data) when every invariant holds and keeps it otherwise.
      keep: false,
      log: (line) => lines.push(line)
    }, topology)
    const summary = `${lines.join("\n")}\n${formatReport(report)}\nguardian takeover ${takeoverMs.join(", ")} ms\nsubmissions adopted: ${adopted.join(", ")}`
    console.log(summary)
    assert.strictEqual(report.kills, 3, summary)
    assert.strictEqual(takeoverMs.length, 1, summary)
    assert.deepStrictEqual(report.violations, [], summary)
    // Transfers went through the balancer to both nodes.
    assert.isAbove(report.answersByNode["api-1"] ?? 0, 0, summary)
    assert.isAbove(report.answersByNode["api-2"] ?? 0, 0, summary)
  })

})
