/**
 * `pnpm admin <command>`: the operator's command line over the admin API.
 *
 * It finds the admin listener in `ADMIN_URL` / `ADMIN_TOKEN`, or else in the
 * files the embedded server keeps in `DATA_DIR` (default `./.data`):
 * `admin.json` (the URL) and `secrets.json` (the token). Each command prints one
 * JSON document on stdout; on failure it prints the error on stderr and exits 1.
 * The outputs are a contract, documented in docs/operations.md.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { parseArgs } from "node:util"

const usage = `usage: pnpm admin <command>
  accounts create --handle H [--type personal|business] [--kyc unverified|pending|verified|enhanced]
  accounts set-kyc --account ACCOUNT_ID --status unverified|pending|verified|enhanced
  accounts get --account ACCOUNT_ID
  keys create --account ACCOUNT_ID --name NAME [--mode test|live]  (default test; an agent: its own mode only)
  keys list --account ACCOUNT_ID
  keys revoke --key-id KEY_ID
  chain deploy --mode test|live [--faucet-address 0x...]  (external chains; run on the operator's machine)
environment: ADMIN_URL, ADMIN_TOKEN, DATA_DIR (default ./.data); chain deploy: DATABASE_URL,
  RPC_URL_TESTNET|RPC_URL_MAINNET, OPERATOR_KEY_TESTNET|OPERATOR_KEY_MAINNET, GUARDIAN_URL,
  GUARDIAN_SHARED_SECRET, FAUCET_KEY_TESTNET (or --faucet-address)`

class CliError extends Error {}

const readJson = (file: string): Record<string, unknown> | undefined => {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>
  } catch {
    return undefined
  }
}

const connection = () => {
  const dataDir = path.resolve(process.env["DATA_DIR"] ?? "./.data")
  const url = process.env["ADMIN_URL"] ?? readJson(path.join(dataDir, "admin.json"))?.["admin_url"]
  const token = process.env["ADMIN_TOKEN"] ?? readJson(path.join(dataDir, "secrets.json"))?.["admin_token"]
  if (typeof url !== "string" || typeof token !== "string") {
    throw new CliError(
      `cannot find the admin API: set ADMIN_URL and ADMIN_TOKEN, or start the embedded server (it writes them under ${dataDir})`
    )
  }
  return { url: url.replace(/\/$/, ""), token }
}

const call = async (method: "GET" | "POST", route: string, body?: unknown): Promise<Record<string, unknown>> => {
  const { token, url } = connection()
  let response: Response
  try {
    response = await fetch(`${url}/admin${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
  } catch (cause) {
    throw new CliError(`cannot reach the admin API at ${url}: ${String(cause)}; is the server running?`)
  }
  const text = await response.text()
  if (!response.ok) throw new CliError(text || `HTTP ${response.status}`)
  return JSON.parse(text) as Record<string, unknown>
}

const required = (values: Record<string, string | undefined>, name: string): string => {
  const value = values[name]
  if (value === undefined || value === "") throw new CliError(`--${name} is required\n${usage}`)
  return value
}

const options = {
  handle: { type: "string" },
  type: { type: "string" },
  kyc: { type: "string" },
  account: { type: "string" },
  status: { type: "string" },
  name: { type: "string" },
  mode: { type: "string" },
  "key-id": { type: "string" },
  "faucet-address": { type: "string" }
} as const

const run = async (argv: ReadonlyArray<string>): Promise<unknown> => {
  const { positionals, values } = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true })
  const command = positionals.join(" ")
  switch (command) {
    case "accounts create": {
      const created = await call("POST", "/accounts", {
        handle: required(values, "handle"),
        ...(values.type === undefined ? {} : { type: values.type }),
        ...(values.kyc === undefined ? {} : { kyc_status: values.kyc })
      })
      return { account_id: created["account_id"], handle: created["handle"], api_key: created["api_key"], key_id: created["key_id"] }
    }
    case "accounts set-kyc":
      return call("POST", `/accounts/${encodeURIComponent(required(values, "account"))}/kyc`, {
        status: required(values, "status")
      })
    case "accounts get":
      return call("GET", `/accounts/${encodeURIComponent(required(values, "account"))}`)
    case "keys create": {
      const created = await call("POST", "/keys", {
        account_id: required(values, "account"),
        name: required(values, "name"),
        ...(values.mode === undefined ? {} : { mode: values.mode })
      })
      return { key_id: created["key_id"], name: created["name"], api_key: created["api_key"], mode: created["mode"] }
    }
    case "keys list":
      return call("GET", `/accounts/${encodeURIComponent(required(values, "account"))}/keys`)
    case "keys revoke":
      return call("POST", `/keys/${encodeURIComponent(required(values, "key-id"))}/revoke`)
    case "chain deploy": {
      const mode = required(values, "mode")
      if (mode !== "test" && mode !== "live") throw new CliError(`--mode must be test or live\n${usage}`)
      const faucet = values["faucet-address"]
      if (faucet !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(faucet)) throw new CliError("--faucet-address must be a 0x address")
      // Loaded only here: the other commands need no chain, database or Effect runtime.
      const [{ Effect, Option }, { deployStep }] = await Promise.all([import("effect"), import("./deploy.ts")])
      return Effect.runPromise(deployStep(mode, Option.fromNullishOr(faucet as `0x${string}` | undefined)).pipe(
        Effect.mapError((error) => new CliError(`chain deploy failed: ${error.message}`))
      ))
    }
    default:
      throw new CliError(usage)
  }
}

run(process.argv.slice(2)).then(
  (output) => {
    process.stdout.write(JSON.stringify(output) + "\n")
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  }
)
