#!/usr/bin/env node
/**
 * `pnpm pps <command>` (or `npm run -s pps -- <command>`): the account
 * holder's command line. It keeps the account's encryption key in a key file
 * and does, on this machine, what the service cannot: register the key, read
 * balances through a decryption proof, and decrypt a transfer's amount and memo.
 *
 * It reads `PPS_API_KEY` (required) and `PPS_BASE_URL` (default
 * `http://127.0.0.1:8080`); `send` also reads the deployment it checks against
 * (`PPS_RPC_URL`, `PPS_CHAIN_ID`, `PPS_CONTRACT_USDG`, `PPS_CONTRACT_ETH`,
 * `PPS_TRUST`). A command prints its result on stdout and exits 0, and so does
 * help (`--help`, `-h`, `help [COMMAND]`). A mistake in the command line (no or
 * unknown command, unknown flag, wrong arguments or values) prints a `pps:` line
 * and the usage of the command concerned on stderr and exits 2, before any
 * request; any other failure prints the API's error body (DECISIONS.md D1)
 * unchanged, or a line starting `pps:`, on stderr and exits 1. It never prints
 * a secret key. The commands are declared in cli/ppsCommands.ts (Effect's CLI
 * module); the conventions are cli/CommandLine.ts's. The commands and their
 * outputs are a contract, documented in docs/cli.md and docs/operations.md.
 *
 * The terminal services Effect's CLI needs come from `@effect/platform-node-shared`, an
 * optional peer dependency of `@pps/sdk` (an application that imports the SDK needs none of
 * it): the commands are loaded only once this entry point runs, and without that package it
 * says how to install it.
 *
 * @since 0.1.0
 */

/** The package the command line needs beside `@pps/sdk`, at the version `@pps/sdk` was built with. */
const platformPackage = "@effect/platform-node-shared"

/** Node's answer when that package itself is not installed (not a module missing inside it). */
const isPlatformMissing = (error: unknown): boolean =>
  error instanceof Error && "code" in error && error.code === "ERR_MODULE_NOT_FOUND" && error.message.includes(`'${platformPackage}'`)

try {
  const [CommandLine, commands] = await Promise.all([import("./cli/CommandLine.ts"), import("./cli/ppsCommands.ts")])
  CommandLine.main(commands.pps, commands.program, process.argv.slice(2), commands.describe)
} catch (error) {
  if (!isPlatformMissing(error)) throw error
  process.stderr.write(`pps: the command line needs ${platformPackage} beside @pps/sdk: npm install ${platformPackage}@^4.1.0\n`)
  process.exitCode = 1
}
