/**
 * A command line (`pps`, the admin command) run in the calling process, as its entry runs it on
 * its own process (`CommandLine.run` with the same tree, conventions and exit statuses), with
 * `env` as its whole environment (nothing of the caller's leaks in), the given working and home
 * directories, and what it printed captured: for tests, where starting Node on the sources for
 * each command costs 1-5 s on these machines.
 */
import * as CommandLine from "../packages/sdk/src/cli/CommandLine.ts"

/** What a command printed and how it ended. */
export interface CapturedRun {
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
}

/** `CommandLine.run`'s first, second and fourth arguments: the command tree, its program, its failures' text. */
export interface CommandLineOf<Name extends string, Input, ContextInput, E> {
  readonly root: Parameters<typeof CommandLine.run<Name, Input, ContextInput, E>>[0]
  readonly program: CommandLine.Program
  readonly describe: (error: unknown) => string
}

export const runCaptured = async <Name extends string, Input, ContextInput, E>(
  commandLine: CommandLineOf<Name, Input, ContextInput, E>,
  args: ReadonlyArray<string>,
  place: { readonly env: Readonly<Record<string, string>>; readonly cwd: string; readonly homeDirectory: string }
): Promise<CapturedRun> => {
  let stdout = ""
  let stderr = ""
  const exitCode = await CommandLine.run(commandLine.root, commandLine.program, args, commandLine.describe, {
    env: { ...place.env },
    cwd: place.cwd,
    homeDirectory: place.homeDirectory,
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text)
  })
  return { exitCode, stdout, stderr }
}
