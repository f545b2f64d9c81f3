/**
 * `npm run -s admin -- <command>` (or `pnpm -s admin <command>`): the operator's
 * command line over the admin API.
 *
 * It finds the admin listener in `ADMIN_URL` / `ADMIN_TOKEN`, or else in the
 * files the embedded server keeps in `DATA_DIR` (default `./.data`):
 * `admin.json` (the URL) and `secrets.json` (the token). Each command prints one
 * JSON document on stdout and exits 0 (`--json` is accepted and changes nothing);
 * help (`--help`, `-h`, `help [COMMAND]`) prints the usage on stdout and exits 0.
 * A mistake in the command line (no or unknown command, unknown flag, missing or
 * disallowed flag value) prints the reason and the usage of the command concerned
 * on stderr and exits 2, before any request; any other failure prints the error on
 * stderr and exits 1. The commands are declared in commands.ts with Effect's CLI module; the
 * conventions are the SDK's CommandLine module's, shared with `pps`. The outputs
 * are a contract, documented in docs/cli.md and docs/operations.md.
 *
 * @since 0.1.0
 */
import * as CommandLine from "@pps/sdk/CommandLine"
import { admin, describe, program } from "./commands.ts"

CommandLine.main(admin, program, process.argv.slice(2), describe)
