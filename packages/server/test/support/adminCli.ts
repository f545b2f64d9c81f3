/**
 * The admin command, as its tests run it: in this process through its command tree and the
 * shared conventions (`CommandLine.run`, as `packages/server/src/admin/cli.ts` runs them on its
 * own process), with the test's environment and captured output (`runAdmin`); or as a child
 * process, exactly as `npm run -s admin` runs it (`runAdminProcess`). Either way the test sees
 * what it printed on stdout and stderr and its exit status.
 */
import { execFile } from "node:child_process"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "../../../../scripts/freePort.ts"
import { childEnvironment, childNodeFlags } from "../../../../scripts/childEnvironment.ts"
import { runCaptured } from "../../../../scripts/commandLineRun.ts"
import { admin, describe, program } from "../../src/admin/commands.ts"

const entry = path.resolve(import.meta.dirname, "../../src/admin/cli.ts")

/** What the command printed and how it ended. */
export interface AdminRun {
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs the admin command in this process with `env` as its whole environment (no ADMIN_*
 * variable of the machine leaks in), this process's working directory and home; what it printed is
 * captured. Starting Node on the sources costs 1-5 s a run on this machine.
 */
export const runAdmin = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>): Promise<AdminRun> =>
  runCaptured({ root: admin, program, describe }, args, { env, cwd: process.cwd(), homeDirectory: os.homedir() })

/** Runs the admin command as a child process; only PATH (and the compile cache) is inherited, so no ADMIN_* variable of the machine leaks in. */
export const runAdminProcess = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>): Promise<AdminRun> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [...childNodeFlags(), entry, ...args],
      { env: { ...childEnvironment(), ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const exitCode = error === null ? 0 : typeof error.code === "number" ? error.code : -1
        resolve({ exitCode, stdout, stderr })
      }
    )
  })

/** A loopback port nobody listens on (checked free, outside the ephemeral range: see scripts/freePort.ts). */
export const closedPort = freePort
