/**
 * Summary of the CPU profiles the throughput benchmark's `--cpu-prof DIR` writes (V8's
 * .cpuprofile, one per process, named by pid): for one level's window (windows.json, written
 * beside them), the top functions by self time and by inclusive time (a function counted once
 * per sample however deep it recurses), and self time per module (a package under
 * node_modules, a workspace package's file, or V8's own nodes such as `(garbage collector)`),
 * each in ms per confirmed transfer of that window and in % of the process's samples.
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
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const name = frameName(byId.get(id)!)
      if (!seen.has(name)) {
        seen.add(name)
        add(inclusive, name, weightUs)
      }
    }
  }
  return { totalUs, self, inclusive, modules }
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
    const { inclusive, modules, self, totalUs } = summarize(profile, window.startUs, window.endUs)
    const seconds = (window.endUs - window.startUs) / 1e6
    const per: Per = window.confirmed > 0 ? { unit: "transfer", divisor: window.confirmed } : { unit: "second", divisor: seconds }
    process.stdout.write([
      "",
      `## ${name} (pid ${pid}), ${window.label}: ${(totalUs / 1000).toFixed(0)} ms sampled over ${seconds.toFixed(1)} s, ${window.confirmed} confirmed: ${(totalUs / 1000 / per.divisor).toFixed(2)} ms per ${per.unit} (idle included)`,
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
