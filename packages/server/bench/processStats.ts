/**
 * What the throughput benchmark reads of the processes it measures, from `/proc` (Linux): CPU time
 * (user + system, `/proc/<pid>/stat`) and resident memory (`VmRSS`, `/proc/<pid>/status`), and
 * the processes of the machine's PostgreSQL and NATS servers that the distributed mode uses.
 */
import * as fs from "node:fs"

/** Clock ticks per second of /proc's CPU counters (USER_HZ: 100 on Linux). */
const ticksPerSecond = 100

/**
 * User + system CPU time of one process so far, in ms; undefined once it is gone. With `thread`,
 * of that one thread of it (a process's main thread has the process's id: a Node process's event
 * loop).
 */
export const cpuMs = (pid: number, thread?: number): number | undefined => {
  try {
    const stat = fs.readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, "utf8")
    // Fields after the command (which may hold spaces) start after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
  } catch {
    return undefined
  }
}

export const childrenOf = (pid: number): ReadonlyArray<number> => {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
    )
  } catch {
    return []
  }
}

export const commandOf = (pid: number): string => {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim()
  } catch {
    return "?"
  }
}

/**
 * CPU so far per process name. A name `group:pid` is one of several processes counted as
 * `group` (PostgreSQL backends): it is diffed per pid, so a backend born in the window counts
 * from zero and one that ended in it is lost (the pools keep theirs for the run).
 */
export type CpuSample = Record<string, number>

export const diffCpu = (before: CpuSample, after: CpuSample): CpuSample => {
  const spent: Record<string, number> = {}
  for (const [name, ms] of Object.entries(after)) {
    const group = name.split(":", 1)[0]!
    spent[group] = (spent[group] ?? 0) + ms - (before[name] ?? 0)
  }
  return spent
}

/** Resident memory of one process (`VmRSS`, what the kernel holds in RAM for it), in MB; NaN once it is gone. */
export const residentMb = (pid: number | undefined): number => {
  if (pid === undefined) return Number.NaN
  try {
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
    return kb === undefined ? Number.NaN : Number(kb) / 1024
  } catch {
    return Number.NaN
  }
}

/** Resident MB per process name. */
export type ResidentSample = Record<string, number>

/** The higher reading of each process (a process gone in one reading keeps the other's). */
export const peakOf = (a: ResidentSample, b: ResidentSample): ResidentSample =>
  Object.fromEntries([...new Set([...Object.keys(a), ...Object.keys(b)])].map((name) => {
    const [x, y] = [a[name] ?? Number.NaN, b[name] ?? Number.NaN]
    return [name, Number.isNaN(x) ? y : Number.isNaN(y) ? x : Math.max(x, y)]
  }))

const processTitle = (pid: number): string | undefined => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim()
  } catch {
    return undefined
  }
}

const allPids = (): ReadonlyArray<number> => fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).map(Number)

/** PostgreSQL backends serving `database`, found by their process title (`/proc/<pid>/cmdline`). */
export const postgresBackends = (database: string): ReadonlyArray<number> =>
  allPids().filter((pid) => {
    const title = processTitle(pid)
    // `postgres: [cluster name: ]user database host(port) state`: the name as a whole word.
    return title !== undefined && title.startsWith("postgres: ") && title.split(/\s+/).includes(database)
  })

/**
 * The PostgreSQL server's own processes, serving every database at once: the postmaster and its
 * background workers (checkpointer, background writer, WAL writer, autovacuum). Under the
 * benchmark's load they write its WAL and vacuum its tables; on a machine shared with other work
 * they serve that too.
 */
const postgresBackground = /^postgres: (\S+: )?(checkpointer|background writer|walwriter|autovacuum|logical replication|stats|archiver)/

export const postgresServerProcesses = (): ReadonlyArray<number> =>
  allPids().filter((pid) => {
    const title = processTitle(pid)
    if (title === undefined) return false
    return postgresBackground.test(title) || (commandOf(pid) === "postgres" && / -D /.test(` ${title} `) && !title.startsWith("postgres: "))
  })

/** The NATS server (`nats-server`), serving every client of the machine. */
export const natsServerProcesses = (): ReadonlyArray<number> => allPids().filter((pid) => commandOf(pid) === "nats-server")
