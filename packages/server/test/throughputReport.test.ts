/**
 * The throughput benchmark's derived figures (bench/throughputReport.ts, bench/machineBusy.ts):
 * capacity from the fixed-rate row's CPU of every service process, each level's share of it, the
 * machine's busy share from two /proc/stat readings, and issue 49's goals attached to the records
 * of the levels they name, not to the others.
 */
import * as os from "node:os"
import { assert, describe, it } from "@effect/vitest"
import { busyShare, readMachineTicks } from "../bench/machineBusy.ts"
import { capacityOf, cautionLines, type LevelRow, type ModeResult, throughputMetrics } from "../bench/throughputReport.ts"

const row = (clients: number | undefined, perSecond: number, cpu: Record<string, number>, extra: Partial<LevelRow> = {}): LevelRow => ({
  label: clients === undefined ? "100/s fixed" : `${clients} clients`,
  window: clients === undefined ? "fixed rate" : "closed loop",
  clients,
  askedPerSecond: clients === undefined ? 100 : undefined,
  confirmed: perSecond * 10,
  perSecond,
  byStatus: { "201 confirmed": perSecond * 10 },
  p50: 100,
  p99: 250,
  cpuMsPerTransfer: cpu,
  cpuLoadMs: 1,
  busyShare: 0.95,
  resident: { server: 300, guardian: 200, anvil: 30 },
  ...extra
})

const mode = (rows: ReadonlyArray<LevelRow>): ModeResult => ({
  mode: "embedded",
  rows,
  processes: ["server", "guardian", "anvil"],
  service: ["server", "guardian"],
  residentProcesses: ["server", "guardian", "anvil"],
  idleMs: 5000,
  idleCpuPerSecond: {},
  idleBusyShare: 0.1,
  idleResident: undefined,
  stores: undefined
})

const embedded = mode([
  row(64, 120, { server: 3, serverEventLoop: 2, guardian: 2, anvil: 0.5 }),
  row(256, 150, { server: 3, serverEventLoop: 2, guardian: 2, anvil: 0.5 }, { byStatus: { "503": 7 }, busyShare: 0.5 }),
  row(1024, 140, { server: 3, serverEventLoop: 2, guardian: 2, anvil: 0.5 }),
  // At the fixed rate: 8 + 3 + 1 = 12 ms of every process per transfer (the event loop is part of the server's 8).
  row(undefined, 100, { server: 8, serverEventLoop: 6, guardian: 3, anvil: 1 }),
  // Half of the capacity it measured, 2 cores × 1000 ÷ 12 ÷ 2 ≈ 83/s: where goal 3's p99 is judged.
  row(undefined, 83, { server: 9, serverEventLoop: 7, guardian: 3, anvil: 1 }, { label: "half capacity", window: "half capacity", askedPerSecond: 83 })
])

describe("throughput report", () => {
  it("capacity is cores × 1000 ms ÷ every service process's CPU per transfer at the fixed rate, and with the load generator's", () => {
    const capacity = capacityOf(embedded, 2)
    assert.strictEqual(capacity.allCpuMs, 12)
    assert.closeTo(capacity.perSecond, 2000 / 12, 1e-9)
    assert.closeTo(capacity.perSecondWithLoad, 2000 / 13, 1e-9)
  })

  it("records each level's share of capacity, goal 1 at 256 and 1,024 clients only", () => {
    const metrics = throughputMetrics([embedded], 2, 100)
    const byName = new Map(metrics.map((metric) => [metric.metric, metric]))
    const cores = os.cpus().length
    assert.closeTo(byName.get("embedded: capacity (cores × 1000 ms ÷ all processes' CPU per transfer at the fixed rate)")!.value, cores * 1000 / 12, 1e-9)
    assert.closeTo(byName.get("embedded, 256 clients: confirmed/s ÷ capacity")!.value, 150 / (cores * 1000 / 12), 1e-9)
    assert.strictEqual(byName.get("embedded, 256 clients: confirmed/s ÷ capacity")!.goal, ">= 0.85")
    assert.strictEqual(byName.get("embedded, 1024 clients: confirmed/s ÷ capacity")!.goal, ">= 0.85")
    assert.strictEqual(byName.get("embedded, 64 clients: confirmed/s ÷ capacity")!.goal, undefined)
    assert.strictEqual(byName.get("embedded, 100/s fixed: confirmed/s ÷ capacity")!.goal, undefined)
  })

  it("capacity comes from the fixed rate, not from the half-capacity window after it", () => {
    assert.strictEqual(capacityOf(embedded, 2).from?.window, "fixed rate")
    assert.strictEqual(capacityOf(mode([...embedded.rows].reverse()), 2).allCpuMs, 12)
  })

  it("records server + guardian ÷ floor with goal 2 (≤ 2 under load, ≤ 3 at the fixed rate) and the p99 at half of capacity within 3 blocks", () => {
    const byName = new Map(throughputMetrics([embedded], 2, 100).map((metric) => [metric.metric, metric]))
    const ratio = byName.get("embedded, 64 clients: server + guardian CPU ÷ floor")!
    assert.strictEqual(ratio.value, 2.5)
    assert.strictEqual(ratio.goal, "<= 2")
    assert.strictEqual(byName.get("embedded, 100/s fixed: server + guardian CPU ÷ floor")!.value, 5.5)
    assert.strictEqual(byName.get("embedded, 100/s fixed: server + guardian CPU ÷ floor")!.goal, "<= 3")
    assert.strictEqual(byName.get("embedded, half capacity: create → confirmed p99")!.goal, "<= 300")
    assert.strictEqual(byName.get("embedded, half capacity: asked rate")!.value, 83)
    assert.strictEqual(byName.get("embedded, half capacity: server + guardian CPU ÷ floor")!.goal, undefined)
    assert.strictEqual(byName.get("embedded, 100/s fixed: create → confirmed p99")!.goal, undefined)
    assert.strictEqual(byName.get("embedded, 64 clients: create → confirmed p99")!.goal, undefined)
    assert.strictEqual(byName.get("embedded, 256 clients: machine busy")!.value, 50)
  })

  it("says when load was shed below 90 % busy and when an open loop was not carried", () => {
    assert.deepStrictEqual(cautionLines([embedded]), ["embedded, 256 clients: 7 requests shed (429/503) with the machine 50 % busy (goal 1: only at ≥ 90 %)"])
    const asked200 = mode(embedded.rows.map((level) => (level.window === "closed loop" ? level : { ...level, askedPerSecond: 200 })))
    const cautions = cautionLines([asked200])
    assert.strictEqual(cautions.length, 3)
    assert.match(cautions[1]!, /100\/s fixed: 100\.0 confirmed\/s of 200\.0 asked.*the capacity comes from an overloaded window/)
    assert.match(cautions[2]!, /half capacity: 83\.0 confirmed\/s of 200\.0 asked.*its p99 measures a queue/)
  })

  it("says when the half-capacity window cost more CPU per transfer than the fixed rate its rate came from", () => {
    // 9 + 3 + 1 = 13 ms against the fixed rate's 12: within a quarter, no caution; 20 ms is not.
    assert.isFalse(cautionLines([embedded]).some((line) => line.includes("half capacity")))
    const costlier = mode(embedded.rows.map((level) =>
      level.window === "half capacity" ? { ...level, cpuMsPerTransfer: { server: 14, serverEventLoop: 12, guardian: 4, anvil: 2 }, busyShare: 0.78 } : level
    ))
    assert.include(cautionLines([costlier]), "embedded, half capacity: 20.00 ms of CPU per confirmed transfer against 12.00 at the fixed rate, the machine 78 % busy: not the room half of the capacity assumes")
  })

  it("the machine's busy share is 1 − (idle + iowait) ÷ total between two readings", () => {
    assert.strictEqual(busyShare({ idle: 100, total: 200 }, { idle: 150, total: 400 }), 0.75)
    assert.isNaN(busyShare({ idle: 100, total: 200 }, { idle: 100, total: 200 }))
    assert.isNaN(busyShare(undefined, { idle: 100, total: 200 }))
    if (process.platform === "linux") {
      const ticks = readMachineTicks()
      assert.isDefined(ticks)
      assert.isTrue(ticks!.total > 0 && ticks!.idle <= ticks!.total)
    }
  })
})
