/**
 * Summary of the CPU profiles the throughput benchmark's `--cpu-prof DIR` writes (V8's
 * .cpuprofile, one per process, named by pid): for one level's window (windows.json, written
 * beside them), where the busy samples went by kind of work (`kinds`: the first kind any frame
 * of a sample's stack belongs to, after the collector and Effect's runtime, which are told by
 * the sample's own frame: Effect's run loop resumes fibers inside any callback), then the top functions by self time and by inclusive time (a
 * function counted once per sample however deep it recurses), and self time per module (a
 * package under node_modules, a workspace package's file, or V8's own nodes such as
 * `(garbage collector)`), each in sampled ms per confirmed transfer and in % of the samples.
 *
 * Sampled time is wall time of the main thread while it was not idle: on a loaded machine it
 * includes the time the thread waited for a core, and the profiler's own cost. The kinds are
 * therefore also given as CPU ms per transfer: their share of the busy samples times the CPU
 * /proc counted for the thread (the server's event loop) or the process (the guardian) in the
 * same window.
 *
 * The idle window (no traffic) is given per second instead.
 *
 * Run: `npm run -s bench:cpu-profile -- DIR [--level "256 clients"] [--top 25]`
 * (by default the first window: idle).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { parseArgs } from "node:util"

const { positionals, values } = parseArgs({
  args: process.argv.slice(2).filter((arg) => arg !== "--"),
  allowPositionals: true,
  options: { level: { type: "string" }, top: { type: "string", default: "25" } }
})

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}
interface Window {
  readonly label: string
  readonly startUs: number
  readonly endUs: number
  readonly confirmed: number
  readonly cpuMs?: Record<string, number>
}

type Frame = ProfileNode["callFrame"]

/**
 * Kinds of work, first match wins, tested against every frame of a sample's stack (`kindOf`).
 */
const kinds: ReadonlyArray<readonly [string, (frame: Frame) => boolean]> = [
  ["PGlite: statements and its file calls", (frame) => /@electric-sql\/pglite|PreparedStatementPGlite|DurableNodeFS/.test(frame.url)],
  ["crypto: sealing the plain form's boxes", (frame) => /^(sealTransfer|sealAll)$/.test(frame.functionName)],
  ["crypto: the guardian's box, ciphertext, attestation", (frame) => /^(encryptWith|openGuardianNote|attest)$/.test(frame.functionName)],
  ["crypto: secp256k1 signatures", (frame) => /^(signWith|signRecoverable|signTransaction)$/.test(frame.functionName)],
  ["crypto: other (hashes, points, at-rest boxes)", (frame) => /@noble|mcl-wasm|tiny-secp256k1|packages\/crypto\//.test(frame.url)],
  ["viem: ABI and RLP encoding, hex", (frame) => /\/viem\//.test(frame.url)],
  ["HTTP and sockets (node, undici)", (frame) => /node:_http|node:net|undici|node:internal\/streams|stream_base/.test(frame.url)]
]

/** A busy sample's kind: by its own frame for the collector and Effect's runtime, else by its stack, else by its own frame. */
const kindOf = (leaf: Frame, stack: ReadonlyArray<Frame>): string => {
  if (leaf.functionName === "(garbage collector)") return "garbage collector"
  if (/node_modules\/(\.pnpm\/)?(effect|@effect)/.test(leaf.url)) return "Effect's runtime (its own frames)"
  const kind = kinds.find(([, test]) => stack.some(test))
  if (kind !== undefined) return kind[0]
  return leaf.url.includes("/packages/") && !leaf.url.includes("node_modules") ? "our code (its own frames)" : "other"
}
interface Windows {
  readonly processes: Record<string, number | undefined>
  readonly windows: ReadonlyArray<Window>
}

/** Where a frame's code lives: a package (node_modules or the workspace's packages/), else the file. */
export const moduleOf = (url: string, functionName: string): string => {
  if (url === "") return functionName.startsWith("(") ? functionName : "(native)"
  const vendored = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (vendored !== null) return vendored[1]!
  const workspace = /packages\/([^/]+)\/(?:src\/)?(.*)$/.exec(url)
  if (workspace !== null) return `@pps/${workspace[1]}/${workspace[2]}`
  if (url.startsWith("node:")) return url
  return path.basename(url)
}

const frameName = (node: ProfileNode) =>
  `${node.callFrame.functionName || "(anonymous)"} ${moduleOf(node.callFrame.url, node.callFrame.functionName)}:${node.callFrame.lineNumber + 1}`

/** Self and inclusive sample time (µs) per function and self per module, inside [startUs, endUs). */
export const summarize = (profile: Profile, startUs: number, endUs: number) => {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const self = new Map<string, number>()
  const inclusive = new Map<string, number>()
  const modules = new Map<string, number>()
  const kindUs = new Map<string, number>()
  let busyUs = 0
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us)
  let totalUs = 0
  let time = profile.startTime
  for (let index = 0; index < profile.samples.length; index++) {
    time += profile.timeDeltas[index]!
    // A sample's weight is the gap to the next one (the last gets the previous gap).
    const weightUs = profile.timeDeltas[index + 1] ?? profile.timeDeltas[index]!
    if (time < startUs || time >= endUs) continue
    totalUs += weightUs
    const leaf = byId.get(profile.samples[index]!)!
    add(self, frameName(leaf), weightUs)
    add(modules, moduleOf(leaf.callFrame.url, leaf.callFrame.functionName), weightUs)
    const seen = new Set<string>()
    const stack: Array<Frame> = []
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const node = byId.get(id)!
      stack.push(node.callFrame)
      const name = frameName(node)
      if (!seen.has(name)) {
        seen.add(name)
        add(inclusive, name, weightUs)
      }
    }
    if (leaf.callFrame.functionName !== "(idle)") {
      busyUs += weightUs
      add(kindUs, kindOf(leaf.callFrame, stack), weightUs)
    }
  }
  return { totalUs, busyUs, self, inclusive, modules, kindUs }
}

/** Per confirmed transfer; for a window without transfers (idle), per second of it. */
interface Per {
  readonly unit: string
  readonly divisor: number
}

const table = (title: string, rows: Map<string, number>, totalUs: number, per: Per, top: number) => {
  const sorted = [...rows.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)
  return [
    `| ${title} | ms per ${per.unit} | % |`,
    "|---|---:|---:|",
    ...sorted.map(([name, us]) => `| ${name.replaceAll("|", "\\|")} | ${(us / 1000 / per.divisor).toFixed(3)} | ${((us / totalUs) * 100).toFixed(1)} |`)
  ].join("\n")
}

const kindTable = (kindUs: Map<string, number>, busyUs: number, cpuMs: number | undefined, per: Per) =>
  [
    `| kind of work | % of busy samples | CPU ms per ${per.unit} |`,
    "|---|---:|---:|",
    ...[...kindUs.entries()].sort((a, b) => b[1] - a[1]).map(([kind, us]) =>
      `| ${kind} | ${((us / busyUs) * 100).toFixed(1)} | ${cpuMs === undefined ? "" : ((us / busyUs) * cpuMs).toFixed(2)} |`
    )
  ].join("\n")

const main = () => {
  const dir = positionals[0]
  if (dir === undefined) {
    process.stderr.write("usage: npm run -s bench:cpu-profile -- DIR [--level LABEL] [--top N]\n")
    process.exit(2)
  }
  const { processes, windows } = JSON.parse(fs.readFileSync(path.join(dir, "windows.json"), "utf8")) as Windows
  const window = values.level === undefined ? windows[0] : windows.find((candidate) => candidate.label === values.level)
  if (window === undefined) {
    process.stderr.write(`cpu-profile: no window ${values.level}; the run has ${windows.map((each) => each.label).join(", ")}\n`)
    process.exit(2)
  }
  const top = Number(values.top)
  const files = fs.readdirSync(dir).filter((file) => file.endsWith(".cpuprofile"))
  for (const [name, pid] of Object.entries(processes)) {
    // Node names a profile CPU.<date>.<time>.<pid>.<thread>.<sequence>.cpuprofile.
    const file = files.find((candidate) => candidate.split(".")[3] === String(pid))
    if (file === undefined) continue
    const profile = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8")) as Profile
    const { busyUs, inclusive, kindUs, modules, self, totalUs } = summarize(profile, window.startUs, window.endUs)
    const seconds = (window.endUs - window.startUs) / 1e6
    const per: Per = window.confirmed > 0 ? { unit: "transfer", divisor: window.confirmed } : { unit: "second", divisor: seconds }
    // The server's main thread is its event loop (counted apart); the guardian's whole process.
    const measuredMs = window.cpuMs?.[name === "server" ? "serverEventLoop" : name]
    process.stdout.write([
      "",
      `## ${name} (pid ${pid}), ${window.label}: ${(totalUs / 1000).toFixed(0)} ms sampled over ${seconds.toFixed(1)} s (${((busyUs / totalUs) * 100).toFixed(0)} % busy), ${window.confirmed} confirmed; CPU ${
        measuredMs === undefined ? "not recorded" : `${(measuredMs / per.divisor).toFixed(2)} ms per ${per.unit} (${name === "server" ? "event loop" : "process"}, /proc)`
      }`,
      "",
      kindTable(kindUs, busyUs, measuredMs === undefined ? undefined : measuredMs / per.divisor, per),
      "",
      table("module (self)", modules, totalUs, per, top),
      "",
      table("function (self)", self, totalUs, per, top),
      "",
      table("function (inclusive)", inclusive, totalUs, per, top),
      ""
    ].join("\n"))
  }
}

main()
