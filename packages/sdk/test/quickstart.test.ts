/**
 * The README's quickstart, run verbatim: its shell block is read from README.md and run by bash
 * against a real server (child process, embedded PGlite, anvil and guardian), as a new user would
 * paste it into a second terminal. Only where it runs changes: PPS_BASE_URL and DATA_DIR point
 * the commands at this test's server (the README's commands find the defaults), and HOME is a
 * fresh directory for the key files. Every command must succeed (`set -e`, `pipefail`), and what
 * the block's `# →` comments promise is checked in what it printed.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { childEnvironment } from "../../../scripts/childEnvironment.ts"
import { repositoryRoot, type ServerProcess, startServer } from "./support/server.ts"

/** The first ```sh block after the "## Quickstart" heading, exactly as the README has it. */
const quickstartBlock = (readme: string): string => {
  const section = readme.slice(readme.indexOf("\n## Quickstart\n"))
  const match = /```sh\n([\s\S]*?)```/.exec(section)
  if (match === null) throw new Error("README.md has no ```sh block under ## Quickstart")
  return match[1]!
}

let server: ServerProcess
const home = fs.mkdtempSync(path.join(os.tmpdir(), "pps-quickstart-home-"))

beforeAll(async () => {
  server = await startServer()
}, 120_000)
afterAll(async () => {
  await server?.stop()
  fs.rmSync(home, { recursive: true, force: true })
})

const runBash = (script: string, env: Readonly<Record<string, string>>) =>
  new Promise<{ readonly exitCode: number; readonly stdout: string; readonly stderr: string }>((resolve) => {
    execFile("bash", ["-c", `set -euo pipefail\n${script}`], {
      cwd: repositoryRoot,
      env: { ...childEnvironment(), ...env },
      timeout: 170_000,
      maxBuffer: 16 * 1024 * 1024
    }, (error, stdout, stderr) => {
      const exitCode = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resolve({ exitCode, stdout, stderr })
    })
  })

describe("the README's quickstart", () => {
  it("runs verbatim: accounts, keys, a confidential transfer, balances, and an agent that pays and is approved", async () => {
    const block = quickstartBlock(fs.readFileSync(path.join(repositoryRoot, "README.md"), "utf8"))
    // Guards that the block read is the one meant, and that it still teaches the agent's step.
    expect(block).toContain("agents keys create")
    const run = await runBash(block, { PPS_BASE_URL: server.baseUrl, DATA_DIR: server.dataDir, HOME: home })
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0)

    // What the comments promise: alice's 87.5 after sending 12.5 of 100 and (later) funding her agent,
    // bob's 12.5 as JSON before the agent paid him, the memo opened by bob, the agent's two payments.
    expect(run.stdout).toMatch(/USDG\s+87\.5/)
    expect(run.stdout).toMatch(/\{"balances":\[\{"asset":"USDG","amount":"12\.5","as_of_block":\d+\},\{"asset":"ETH","amount":"0","as_of_block":\d+\}\]\}/)
    expect(run.stdout).toMatch(/received\s+@alice\s+@bob\s+USDG\s+12\.5\s+lunch money/)
    const held = /\{"transaction_id":"(atx_[0-9A-Z]+)","status":"pending_approval"/.exec(run.stdout)
    expect(held, run.stdout).not.toBeNull()
    // After it was held: the agent's own payment came before, the approval pays the held one.
    const beforeHeld = run.stdout.slice(0, run.stdout.indexOf(held![0]))
    const afterHeld = run.stdout.slice(run.stdout.indexOf(held![0]))
    expect((beforeHeld.match(/^status\s+confirmed$/gm) ?? []).length).toBe(2)
    expect(afterHeld).toMatch(new RegExp(`transaction_id\\s+${held![1]}\\nstatus\\s+approved\\ntransfer_id\\s+tr_\\w+\\ntransfer_status\\s+confirmed`))
    // Nothing went wrong on the way, even where the block's exit status would not show it: stderr
    // holds only pps's notices (the Idempotency-Key it drew for a POST, a retry it made).
    const notices = /^pps: (Idempotency-Key \S+ \(to repeat this request safely: --idempotency-key \S+\)|.*; retry \d+ in [\d.]+ s.*)$/
    const unexplained = run.stderr.split("\n").filter((line) => line !== "" && !notices.test(line))
    expect(unexplained).toEqual([])
    expect(run.stderr).toContain("pps: Idempotency-Key ")
  }, 180_000)
})
