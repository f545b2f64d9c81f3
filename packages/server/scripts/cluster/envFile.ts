/**
 * The deployment's env file (`deploy/cluster.env`, template `deploy/cluster.env.example`):
 * one `NAME=value` per line, `#` comments, no quoting, as docker compose's `--env-file`
 * reads it. Both `docker compose` and `npm run cluster` start the topology from it.
 *
 * `initEnvFile` turns the template into a file with fresh secrets, so no secret is
 * ever committed and no two deployments share one.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"

/** A line `NAME=value`; names as environment variables are spelt. */
const assignment = /^([A-Z][A-Z0-9_]*)=(.*)$/

/** Parses an env file's text; a line that is neither blank, a comment nor an assignment is refused. */
export const parseEnvFile = (text: string): Map<string, string> => {
  const values = new Map<string, string>()
  text.split("\n").forEach((raw, index) => {
    const line = raw.trim()
    if (line === "" || line.startsWith("#")) return
    const match = assignment.exec(line)
    if (match === null) throw new Error(`env file line ${index + 1} is not NAME=value`)
    values.set(match[1]!, match[2]!)
  })
  return values
}

export const readEnvFile = (file: string): Map<string, string> => parseEnvFile(fs.readFileSync(file, "utf8"))

/**
 * The secrets the template leaves empty and `initEnvFile` generates, each from 32
 * random bytes: base64 where the reader wants exactly 32 bytes in base64 (WALLET_KEK,
 * GUARDIAN_SECRET), hex elsewhere (64 characters, safe inside a database URL).
 */
const base64Secrets: ReadonlyArray<string> = ["WALLET_KEK", "GUARDIAN_SECRET"]

export const generatedSecrets = [
  "API_KEY_PEPPER",
  "WALLET_KEK",
  "ADMIN_TOKEN",
  "GUARDIAN_SHARED_SECRET",
  "GUARDIAN_SECRET",
  "POSTGRES_PASSWORD",
  "GUARDIAN_POSTGRES_PASSWORD"
] as const

/**
 * Writes `target` from the template with every empty generated secret filled in (mode
 * 0600). An existing target is left alone: its secrets open data already written.
 */
export const initEnvFile = (template: string, target: string): "created" | "kept" => {
  if (fs.existsSync(target)) return "kept"
  const lines = fs.readFileSync(template, "utf8").split("\n").map((line) => {
    const match = assignment.exec(line.trim())
    if (match === null) return line
    const name = match[1]!
    const value = match[2]!
    return (generatedSecrets as ReadonlyArray<string>).includes(name) && value === ""
      ? `${name}=${randomBytes(32).toString(base64Secrets.includes(name) ? "base64" : "hex")}`
      : line
  })
  fs.writeFileSync(target, lines.join("\n"), { mode: 0o600, flag: "wx" })
  return "created"
}

/**
 * A throw-away run's env file (the multi-node test, the distributed benchmark): the
 * template with fresh secrets and `overrides` (its own database and stream names, so
 * runs never share state and can drop it afterwards). Returns the file's path.
 */
export const writeRunEnvFile = (template: string, dir: string, overrides: Readonly<Record<string, string>>): string => {
  const file = `${dir}/cluster.env`
  initEnvFile(template, file)
  const text = fs.readFileSync(file, "utf8").split("\n").map((line) => {
    const name = line.split("=", 1)[0]!
    return name in overrides ? `${name}=${overrides[name]}` : line
  })
  fs.writeFileSync(file, text.join("\n"))
  return file
}
