/**
 * The flags a service process starts with (src/ProcessMemory.ts, D67, D94) do what they are there
 * for, in a real node, and `npm start` passes the same ones.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import * as ProcessMemory from "../src/ProcessMemory.ts"

const churn = fileURLToPath(new URL("./support/oldGenerationChurn.ts", import.meta.url))
const startScript = fileURLToPath(new URL("../../../scripts/start.sh", import.meta.url))
const growthFlag = "--heap-growing-percent=25"

interface Churned {
  readonly peakBytes: number
  readonly liveBytes: number
  readonly kept: number
}

const runChurn = (flags: ReadonlyArray<string>): Churned =>
  JSON.parse(execFileSync(process.execPath, [...flags, "--disable-warning=ExperimentalWarning", churn], { encoding: "utf8" })) as Churned

describe("ProcessMemory.nodeFlags", () => {
  it("holds the old generation near what survives (D94): promoted garbage no longer grows it to several times the live heap", () => {
    assert.include(ProcessMemory.nodeFlags, growthFlag)
    const withFlags = runChurn(ProcessMemory.nodeFlags)
    const mb = (bytes: number) => (bytes / 1e6).toFixed(1)
    const seen = `old space, largest: ${mb(withFlags.peakBytes)} MB; alive after: ${mb(withFlags.liveBytes)} MB`
    assert.strictEqual(withFlags.kept, 300_000)
    // Measured on the 2-vCPU VM, quiet and under the suite's load: ~99-101 MB with the flags,
    // ~300-318 MB without the growth flag (V8's own factor), for ~46 MB alive.
    assert.isBelow(withFlags.peakBytes, 3 * withFlags.liveBytes, seen)
  }, 60_000)

  it("are the flags npm start runs the server with (scripts/start.sh repeats them)", () => {
    const nodeLine = fs.readFileSync(startScript, "utf8").split("\n").find((line) => line.startsWith("exec node "))
    assert.isDefined(nodeLine)
    // Only what comes before the script's path is node's; after it, the script's arguments.
    const words = nodeLine!.split(" ")
    const nodeWords = words.slice(0, words.indexOf("packages/server/src/main.ts"))
    for (const flag of ProcessMemory.nodeFlags) assert.include(nodeWords, flag)
  })
})

describe("ProcessMemory.webAssemblyFlags", () => {
  it("passes on the WebAssembly compiler's flags of a command line and nothing else of it (D95)", () => {
    const execArgv = ["--no-wasm-code-gc", "--inspect=9229", "--liftoff-only", "--require=/tmp/preload.js", "--max-semi-space-size=8"]
    assert.deepStrictEqual(ProcessMemory.webAssemblyFlags(execArgv), ["--no-wasm-code-gc", "--liftoff-only"])
    // `npm start`'s command line has none: the service keeps TurboFan (D67).
    assert.deepStrictEqual(ProcessMemory.webAssemblyFlags([...ProcessMemory.nodeFlags, "--disable-warning=ExperimentalWarning"]), [])
  })
})
