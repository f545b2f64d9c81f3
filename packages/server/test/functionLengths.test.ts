/**
 * No function over 100 lines in the server's, the guardian's or the SDK's sources: a function a
 * screen long can be changed by someone who did not write it (scripts/functionLengths.ts says what
 * counts as a function and how it is measured; `node scripts/functionLengths.ts` lists the ten
 * longest).
 */
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const script = fileURLToPath(new URL("../../../scripts/functionLengths.ts", import.meta.url))

describe("function lengths", () => {
  it("no function in packages/server/src, packages/guardian/src or packages/sdk/src is over 100 lines", () => {
    const run = spawnSync(process.execPath, ["--disable-warning=ExperimentalWarning", script, "--check"], { encoding: "utf8" })
    assert.strictEqual(run.status, 0, `${run.stdout}${run.stderr}`)
    assert.match(run.stdout, /^0 function\(s\) over 100 lines, of \d+\.$/m)
  })

  it("the check fails on a function over the limit", () => {
    // The same script with a limit every long-enough function exceeds: it must name them and fail.
    const run = spawnSync(process.execPath, ["--disable-warning=ExperimentalWarning", script, "--check", "--max", "20"], { encoding: "utf8" })
    const said = `${run.stdout.slice(-400)}${run.stderr}`
    assert.strictEqual(run.status, 1, said)
    assert.isTrue(/[1-9]\d* function\(s\) over 20 lines/.test(run.stdout), `no count of functions over 20 lines at the end of: ${said}`)
  })
})
