/**
 * The admin command (`packages/server/src/admin/cli.ts`) as a child process,
 * exactly as `npm run -s admin` runs it, so its tests see the real stdout,
 * stderr and exit status.
 */
import { execFile } from "node:child_process"
import * as path from "node:path"
import { freePort } from "../../../../scripts/freePort.ts"
import { childEnvironment } from "../../../../scripts/childEnvironment.ts"

const entry = path.resolve(import.meta.dirname, "../../src/admin/cli.ts")

/** What the command printed and how it ended. */
export interface AdminRun {
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs the admin command; only PATH (and the compile cache) is inherited, so no ADMIN_* variable of the machine leaks in. */
export const runAdmin = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>): Promise<AdminRun> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--disable-warning=ExperimentalWarning", entry, ...args],
      { env: { ...childEnvironment(), ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const exitCode = error === null ? 0 : typeof error.code === "number" ? error.code : -1
        resolve({ exitCode, stdout, stderr })
      }
    )
  })

/** A loopback port nobody listens on (checked free, outside the ephemeral range: see scripts/freePort.ts). */
export const closedPort = freePort
