/**
 * How busy the whole machine was over a window: `1 − (idle + iowait) ÷ total` of the CPU time
 * every core accounted for in `/proc/stat` (its first line, all cores together). Issue 49's first
 * goal reads it beside the confirmed rate: a rate below the machine's capacity with the machine
 * half idle is bound by waiting, not by the CPU; and load may be shed only when the machine is
 * ≥ 90 % busy. Everything on the machine counts, this benchmark's load generator and any other
 * work beside it: a share well above what the measured processes used says the machine was shared.
 */
import * as fs from "node:fs"

/** The all-cores counters of `/proc/stat`, in clock ticks since boot. */
export interface MachineTicks {
  /** idle + iowait: time no task wanted a core (a core waiting for I/O could have run one). */
  readonly idle: number
  /** user, nice, system, idle, iowait, irq, softirq, steal (guest time is inside user and nice already). */
  readonly total: number
}

/** Linux only; undefined elsewhere (the share is then printed as n/a). */
export const readMachineTicks = (): MachineTicks | undefined => {
  try {
    const line = fs.readFileSync("/proc/stat", "utf8").split("\n", 1)[0] ?? ""
    const [label, ...fields] = line.trim().split(/\s+/)
    if (label !== "cpu") return undefined
    const [user, nice, system, idle, iowait, irq, softirq, steal] = fields.slice(0, 8).map(Number)
    const counted = [user, nice, system, idle, iowait, irq, softirq, steal]
    if (counted.some((ticks) => ticks === undefined || !Number.isFinite(ticks))) return undefined
    const sum = counted.reduce((total: number, ticks) => total + ticks!, 0)
    return { idle: idle! + iowait!, total: sum }
  } catch {
    return undefined
  }
}

/** The machine's busy share between two readings, 0 to 1; NaN without both or without time between them. */
export const busyShare = (before: MachineTicks | undefined, after: MachineTicks | undefined): number => {
  if (before === undefined || after === undefined) return Number.NaN
  const total = after.total - before.total
  return total <= 0 ? Number.NaN : 1 - (after.idle - before.idle) / total
}
