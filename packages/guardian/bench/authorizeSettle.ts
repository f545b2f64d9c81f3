/**
 * The guardian's CPU per transfer, in isolation (docs/benchmarks.md): the embedded guardian (its
 * `Guardian` service over PGlite in a fresh directory, no chain endpoint) answers
 * `--pairs` authorize + settle("confirmed") pairs from `--concurrency` concurrent callers
 * spread over `--accounts` sending accounts, the way the api server drives it.
 *
 * Requests are sealed before the clock starts (that is the api server's work), so the CPU
 * measured (`process.cpuUsage`, user + system, this process) is the guardian's alone. It is
 * set beside the guardian's cryptographic floor measured in the same run: open the sealed
 * note, compute the ciphertext, sign the attestation (mcl-wasm), the part of the
 * whole-transfer floor that is the guardian's.
 *
 * Breakdown: `--cpu-prof` (node's flag) writes a profile; `--phases` also times authorize and
 * settle alone (all authorizations first, then all settlements).
 *
 * Run:
 *   sh scripts/toolchain.sh node --disable-warning=ExperimentalWarning packages/guardian/bench/authorizeSettle.ts \
 *     [--pairs 2000] [--concurrency 64] [--accounts 16] [--phases] [--no-record]
 *
 * The figures are appended to docs/benchmarks/results.jsonl (scripts/benchRecord.ts).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { Attestation, Backend, ElGamal, EncryptionKey, Note } from "@pps/crypto"
import { Context, Effect, Layer, Logger, Redacted } from "effect"
import { getAddress, type Hex, hexToBytes } from "viem"
import { type Domain, Guardian, GuardianKeys, GuardianLive } from "../src/index.ts"
import { chainId, confidentialRequest, contract, newParty } from "../test/support/transfers.ts"
import { type Metric, recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values } = parseArgs({
  options: {
    pairs: { type: "string", default: "2000" },
    concurrency: { type: "string", default: "64" },
    accounts: { type: "string", default: "16" },
    phases: { type: "boolean", default: false },
    ...recordOption
  }
})
const pairs = Number(values.pairs)
const concurrency = Number(values.concurrency)
const accountsCount = Number(values.accounts)

/** A fixed secret: a benchmark guards nothing. */
const secret = new Uint8Array(32).fill(7)

const cpuMs = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000

const main = Effect.gen(function*() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-guardian-bench-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
  const services = yield* Layer.build(
    GuardianLive.layerWithStorage({
      database: { _tag: "pglite", dataDir },
      secret: Redacted.make(secret),
      // The sweepers stay on, as in service; nothing expires within a run.
      timing: { reconcileIntervalMs: 0, chainPollIntervalMs: 0 }
    })
  )
  const guardian = Context.get(services, Guardian.Guardian)
  const keys = GuardianKeys.fromSecret(secret)

  const senders = Array.from({ length: accountsCount }, newParty)
  const recipient = newParty()
  for (const [index, sender] of senders.entries()) {
    yield* guardian.credit({ chainId, contract, account: sender.address, amount: 10n ** 15n, creditId: `bench-${index}` })
  }
  // With the API key that asked, as the api server sends it (settle then adds to its total, D40).
  const requests: Array<Domain.AuthorizeRequest> = Array.from({ length: pairs }, (_, index) => ({
    ...confidentialRequest({
      guardianKey: keys.info.encryptionKey,
      from: senders[index % senders.length]!,
      to: recipient,
      amount: 1_000n + BigInt(index)
    }),
    apiKey: `key_bench_${index % 4}`
  }))

  // Warm-up (JIT, PGlite's caches) on a few transfers not counted.
  const warm = requests.splice(0, Math.min(100, Math.floor(pairs / 10)))
  const authorizeOne = (request: Domain.AuthorizeRequest) =>
    guardian.authorize(request).pipe(Effect.flatMap((result) => {
      if (result._tag !== "Authorized") return Effect.die(new Error(`not authorized: ${JSON.stringify(result)}`))
      return Effect.succeed(request.transferId)
    }))
  const settleOne = (transferId: string) =>
    guardian.settle({ transferId, outcome: "confirmed" }).pipe(Effect.flatMap((result) =>
      result.status === "confirmed" ? Effect.void : Effect.die(new Error(`not confirmed: ${result.status}`))
    ))
  const pair = (request: Domain.AuthorizeRequest) => authorizeOne(request).pipe(Effect.flatMap(settleOne))
  yield* Effect.forEach(warm, pair, { concurrency })

  const measure = <A>(effect: Effect.Effect<A, unknown>) =>
    Effect.gen(function*() {
      const cpu = process.cpuUsage()
      const wall = performance.now()
      // The window on the monotonic clock a --cpu-prof profile uses, to read the profile for it alone.
      const start = process.hrtime.bigint() / 1000n
      const value = yield* effect
      process.stderr.write(`profile window µs: ${start} ${process.hrtime.bigint() / 1000n}\n`)
      return { value, cpuMs: cpuMs(process.cpuUsage(cpu)), wallMs: performance.now() - wall }
    })

  const rows: Array<string> = []
  const metrics: Array<Metric> = []
  const row = (what: string, count: number, cpu: number, wall: number) => {
    rows.push(`| ${what} | ${count} | ${(cpu / count).toFixed(2)} | ${(count / (wall / 1000)).toFixed(0)} |`)
    metrics.push(
      { metric: `${what}: CPU per pair`, value: cpu / count, unit: "ms", headline: what === "authorize + settle" },
      { metric: `${what}: per second (wall)`, value: count / (wall / 1000), unit: "pairs/s" }
    )
  }
  if (values.phases) {
    const half = requests.length / 2
    const first = requests.slice(0, half)
    const authorized = yield* measure(Effect.forEach(first, authorizeOne, { concurrency }))
    row("authorize alone", first.length, authorized.cpuMs, authorized.wallMs)
    const settled = yield* measure(Effect.forEach(authorized.value, settleOne, { concurrency }))
    row("settle alone", first.length, settled.cpuMs, settled.wallMs)
    requests.splice(0, half)
  }
  const run = yield* measure(Effect.forEach(requests, pair, { concurrency }))
  row("authorize + settle", requests.length, run.cpuMs, run.wallMs)

  // The guardian's cryptographic floor for one transfer, on the same inputs.
  const sample = confidentialRequest({ guardianKey: keys.info.encryptionKey, from: senders[0]!, to: recipient, amount: 5n })
  const context = { chainId, contract: getAddress(contract), transferId: hexToBytes(sample.transferId as Hex) }
  const publicKeys = [sample.fromKey, sample.toKey!].map((key) => {
    const parsed = EncryptionKey.parsePublicKey(hexToBytes(key as Hex))
    if (!parsed.ok) throw new Error("a party's key did not parse")
    return parsed.value
  })
  const floorRuns = 200
  const floorCpu = process.cpuUsage()
  for (let index = 0; index < floorRuns; index++) {
    const opened = Note.openGuardianNote(keys.encryption, hexToBytes(sample.guardianNote as Hex), context)
    if (!opened.ok) throw new Error("the guardian's box did not open")
    const ciphertext = ElGamal.encryptWith(opened.value, [...publicKeys, keys.encryption.publicKey])
    Attestation.sign(
      keys.signerPrivateKey,
      Attestation.confidentialTransfer(Attestation.domain(chainId, getAddress(contract)), {
        from: getAddress(sample.from),
        to: getAddress(sample.to),
        transferId: sample.transferId as Hex,
        nonce: sample.nonce,
        ciphertextDigest: ElGamal.digest(ciphertext),
        sealedDigest: sample.sealedDigest as Hex,
        deadline: sample.deadline
      })
    )
  }
  const floor = cpuMs(process.cpuUsage(floorCpu)) / floorRuns

  const load = os.loadavg().map((value) => value.toFixed(2)).join(" ")
  process.stdout.write(
    [
      `guardian bench: ${new Date().toISOString()}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), load average ${load}`,
      `${requests.length} pairs, ${concurrency} concurrent callers, ${accountsCount} sending accounts, PGlite in ${dataDir}`,
      "",
      "| what | count | CPU ms per call/pair | per second (wall) |",
      "|---|---:|---:|---:|",
      ...rows,
      `| guardian crypto floor (open note + ciphertext + sign) | ${floorRuns} | ${floor.toFixed(2)} | |`,
      "",
      `authorize + settle ÷ floor: ${((run.cpuMs / requests.length) / floor).toFixed(1)}x`,
      ""
    ].join("\n")
  )
  const pairCpuMs = run.cpuMs / requests.length
  recordResults("guardian", [
    ...metrics.map((metric) => (metric.headline === true ? { ...metric, ratioToFloor: pairCpuMs / floor } : metric)),
    { metric: "guardian crypto floor (open note + ciphertext + sign)", value: floor, unit: "ms" }
  ])
})

await Backend.init({ backend: "mcl" })
await Effect.runPromise(Effect.scoped(main).pipe(Effect.provide(Logger.layer([]))))
