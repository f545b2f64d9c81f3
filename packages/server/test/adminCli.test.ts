/**
 * The admin command's command-line conventions, which need no server: help on
 * stdout with exit 0, naming the invocation the README teaches and describing
 * every flag; a command-line mistake (no or unknown command, unknown flag, a
 * flag value outside its allowed values) named on stderr with the usage of the
 * command concerned and exit 2, before any request; an unreachable or malformed
 * admin URL named with its cause, exit 1. docs/cli.md, docs/operations.md "The admin command".
 * The command runs in this process through its command tree (support/adminCli.ts), and once,
 * for `--help`, as the real command in a child process.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { closedPort, runAdmin, runAdminProcess } from "./support/adminCli.ts"

// An empty data directory, so nothing of a server running on this machine is found.
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-admin-cli-"))
const admin = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
  runAdmin(args, { DATA_DIR: dataDir, ...env })

afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }))

describe("admin command line", { timeout: 30_000 }, () => {
  it("--help, -h and help print the usage on stdout and exit 0; a command's help is its own usage", async () => {
    const [long, short, word, command, group] = await Promise.all([
      runAdminProcess(["--help"], { DATA_DIR: dataDir }),
      admin(["-h"]),
      admin(["help"]),
      admin(["accounts", "create", "--help"]),
      admin(["help", "keys"])
    ])
    for (const run of [long, short, word]) {
      expect(run).toMatchObject({ exitCode: 0, stderr: "" })
      expect(run.stdout).toMatch(/^usage: npm run -s admin -- <command> \[options\]\n/)
      expect(run.stdout).toContain("  chain deploy --mode test|live")
    }
    expect(command).toMatchObject({ exitCode: 0, stderr: "" })
    expect(command.stdout).toContain("  accounts create --handle H [--type personal|business] [--kyc unverified|pending|verified|enhanced]")
    expect(command.stdout).not.toContain("keys ")
    expect(group.stdout).toMatch(/ {2}keys create [^]* {2}keys list [^]* {2}keys revoke /)
    expect(group.stdout).not.toContain("accounts ")
  })

  it("no command, an unknown command or an unknown flag: the reason naming it, the usage on stderr, exit 2", async () => {
    const [none, unknown, group, flag, foreignFlag, missingValue] = await Promise.all([
      admin([]),
      admin(["frobnicate"]),
      admin(["accounts"]),
      admin(["accounts", "create", "--handle", "x", "--frob"]),
      admin(["accounts", "get", "--handle", "x"]),
      admin(["accounts", "create", "--handle"])
    ])
    for (const run of [none, unknown, group, flag, foreignFlag, missingValue]) {
      expect(run).toMatchObject({ exitCode: 2, stdout: "" })
      expect(run.stderr).toContain("usage: npm run -s admin -- <command> [options]\n")
    }
    expect(none.stderr).toMatch(/^usage: npm run -s admin -- /)
    expect(unknown.stderr).toMatch(/^unknown command "frobnicate"\nusage: /)
    expect(group.stderr).toMatch(/^accounts needs one of: create, set-kyc, get, invite, list, suspend, reactivate\n/)
    expect(flag.stderr).toMatch(/^unknown option "--frob"\n/)
    expect(foreignFlag.stderr).toMatch(/^accounts get does not take --handle\n/)
    expect(missingValue.stderr).toMatch(/^--handle needs a value\n/)
  })

  it("flag values with known choices are checked before any request, naming the flag and the allowed values", async () => {
    // ADMIN_URL points nowhere: a request would fail with exit 1, so exit 2 shows none was made.
    const nowhere = { ADMIN_URL: `http://127.0.0.1:${await closedPort()}`, ADMIN_TOKEN: "adm_unused" }
    const [kyc, status, type, mode, deployMode, missing] = await Promise.all([
      admin(["accounts", "create", "--handle", "carol", "--kyc", "maybe"], nowhere),
      admin(["accounts", "set-kyc", "--account", "acct_x", "--status", "approved"], nowhere),
      admin(["accounts", "create", "--handle", "carol", "--type", "company"], nowhere),
      admin(["keys", "create", "--account", "acct_x", "--name", "n", "--mode", "prod"], nowhere),
      admin(["chain", "deploy", "--mode", "main"], nowhere),
      admin(["accounts", "set-kyc", "--account", "acct_x"], nowhere)
    ])
    for (const run of [kyc, status, type, mode, deployMode, missing]) expect(run).toMatchObject({ exitCode: 2, stdout: "" })
    expect(kyc.stderr).toMatch(/^--kyc must be one of unverified\|pending\|verified\|enhanced, not "maybe"\n/)
    expect(status.stderr).toMatch(/^--status must be one of unverified\|pending\|verified\|enhanced, not "approved"\n/)
    expect(type.stderr).toMatch(/^--type must be one of personal\|business, not "company"\n/)
    expect(mode.stderr).toMatch(/^--mode must be one of test\|live, not "prod"\n/)
    expect(deployMode.stderr).toMatch(/^--mode must be one of test\|live, not "main"\n/)
    expect(missing.stderr).toMatch(/^accounts set-kyc needs --status\n/)
  })

  it("a command's help describes each of its flags; --json is accepted by every command and changes nothing", async () => {
    const nowhere = { ADMIN_URL: `http://127.0.0.1:${await closedPort()}`, ADMIN_TOKEN: "adm_unused" }
    const [create, all, withJson, without] = await Promise.all([
      admin(["help", "accounts", "create"]),
      admin(["--help"]),
      admin(["keys", "list", "--account", "acct_x", "--json"], nowhere),
      admin(["keys", "list", "--account", "acct_x"], nowhere)
    ])
    expect(create).toMatchObject({ exitCode: 0, stderr: "" })
    for (const flag of ["--handle H", "--type personal|business", "--kyc unverified|pending|verified|enhanced", "--json"]) {
      expect(create.stdout).toMatch(new RegExp(`\\n {6}${flag.replace(/[|]/g, "\\|")}\\s+\\S`))
    }
    // Every command's synopsis offers --json.
    const synopses = all.stdout.split("\n").filter((line) => /^ {2}(accounts|keys|audit|webhooks|chain)\b/.test(line))
    expect(synopses).toHaveLength(13)
    for (const line of synopses) expect(line).toContain("[--json]")
    // With or without --json, the same request is made (here: to nowhere, exit 1 with the same line).
    expect(withJson).toMatchObject({ exitCode: 1, stdout: "", stderr: without.stderr })
  })

  it("the console's commands check their flags before any request: page bounds, filters, a required account", async () => {
    const nowhere = { ADMIN_URL: `http://127.0.0.1:${await closedPort()}`, ADMIN_TOKEN: "adm_unused" }
    const [limit, offset, type, status, action, webhooks, suspend] = await Promise.all([
      admin(["accounts", "list", "--limit", "101"], nowhere),
      admin(["audit", "--offset", "-1"], nowhere),
      admin(["accounts", "list", "--type", "robot"], nowhere),
      admin(["accounts", "list", "--status", "frozen"], nowhere),
      admin(["audit", "--action", "key.created"], nowhere),
      admin(["webhooks", "list"], nowhere),
      admin(["accounts", "suspend"], nowhere)
    ])
    for (const run of [limit, offset, type, status, action, webhooks, suspend]) expect(run).toMatchObject({ exitCode: 2, stdout: "" })
    expect(limit.stderr).toMatch(/^--limit must be an integer from 1 to 100, not "101"\n/)
    expect(offset.stderr).toMatch(/^--offset must be an integer from 0, not "-1"\n/)
    expect(type.stderr).toMatch(/^--type must be one of personal\|business\|agent, not "robot"\n/)
    expect(status.stderr).toMatch(/^--status must be one of active\|suspended, not "frozen"\n/)
    expect(action.stderr).toMatch(/^--action must be one of account\.created\|/)
    expect(webhooks.stderr).toMatch(/^webhooks list needs --account\n/)
    expect(suspend.stderr).toMatch(/^accounts suspend needs --account\n/)
  })

  it("a mistake prints one line, then the usage of the command concerned only, exit 2", async () => {
    const [badValue, extra] = await Promise.all([
      admin(["chain", "deploy", "--mode", "test", "--faucet-address", "0x1"]),
      admin(["accounts", "get", "--account", "acct_x", "surplus"])
    ])
    for (const run of [badValue, extra]) expect(run).toMatchObject({ exitCode: 2, stdout: "" })
    expect(badValue.stderr).toMatch(/^--faucet-address must be a 0x address, not "0x1"\nusage: npm run -s admin -- <command> \[options\]\n {2}chain deploy /)
    expect(badValue.stderr).not.toMatch(/accounts |keys /)
    expect(extra.stderr).toMatch(/^too many arguments for accounts get: "surplus"\nusage: [^\n]*\n {2}accounts get --account /)
    expect(extra.stderr).not.toMatch(/ {2}accounts create /)
  })

  it("an unreachable admin API is named with its URL and the cause; a malformed ADMIN_URL is named", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`
    fs.writeFileSync(path.join(dataDir, "admin.json"), JSON.stringify({ admin_url: url }))
    fs.writeFileSync(path.join(dataDir, "secrets.json"), JSON.stringify({ admin_token: "adm_unused" }))
    try {
      const [fromEnv, fromFile, malformed] = await Promise.all([
        admin(["accounts", "get", "--account", "acct_x"], { ADMIN_URL: url, ADMIN_TOKEN: "adm_unused" }),
        admin(["keys", "list", "--account", "acct_x"]),
        admin(["accounts", "get", "--account", "acct_x"], { ADMIN_URL: "localhost:9090", ADMIN_TOKEN: "adm_unused" })
      ])
      expect(fromEnv).toMatchObject({
        exitCode: 1,
        stdout: "",
        stderr: `cannot reach the server at ${url}: connection refused (is it running? set ADMIN_URL to the admin listener's address)\n`
      })
      expect(fromFile).toMatchObject({ exitCode: 1, stdout: "" })
      expect(fromFile.stderr).toMatch(new RegExp(`^cannot reach the server at ${url}: connection refused \\(is it running\\? the address is from .*admin\\.json`))
      expect(malformed).toMatchObject({
        exitCode: 1,
        stdout: "",
        stderr: 'ADMIN_URL is not a URL: "localhost:9090" (expected http://HOST:PORT)\n'
      })
      for (const run of [fromEnv, fromFile, malformed]) expect(run.stderr).not.toContain("fetch failed")
    } finally {
      fs.rmSync(path.join(dataDir, "admin.json"))
      fs.rmSync(path.join(dataDir, "secrets.json"))
    }
  })
})
