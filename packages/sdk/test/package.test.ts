/**
 * The SDK as a user installs it, with exactly the commands packages/sdk/README.md gives. It is
 * built (`pnpm run build`: tsc with declaration emit, the contract and the cryptography bundled
 * into dist/bundled/) and packed with `pnpm pack` (so `publishConfig` and `files` decide what
 * ships); in a scratch directory outside the workspace, holding a package.json and nothing
 * else, the machine's npm with the pinned Node runs `npm install ./pps-sdk-<version>.tgz` and
 * nothing more: npm fetches the third-party dependencies from the registry, and no workspace
 * package, MCP module or server dependency is installed. There a typed program (type-checked
 * against the emitted `.d.ts` without Node's types, then run) works against a live server: the
 * account, a transfer sealed and opened on the program's side, the transfer list, an error
 * class, and the Effect client. The command line needs its one more package, and says so until
 * `npm install @effect/platform-node-shared` is run; then it runs from the installed bin (and
 * `pps mcp` says the MCP server is a package not installed with the SDK).
 */
import { execFile } from "node:child_process"
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { promisify } from "node:util"
import { EncryptionKey } from "@pps/crypto"
import { describe, expect, it } from "vitest"
import { KeyFile, Pps } from "../src/index.ts"
import { type ServerProcess, startServer } from "./support/server.ts"

const execFileAsync = promisify(execFile)
const packages = resolve(import.meta.dirname, "../..")
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
const version = (JSON.parse(await readFile(join(packages, "sdk/package.json"), "utf8")) as { version: string }).version

/**
 * The machine's environment as a user's shell has it (its CA certificates, proxies, HOME and
 * npm's cache there), without what the test runner adds (pnpm's `npm_*` settings, this
 * workspace's `PPS_*`), the pinned Node first on PATH.
 */
const userEnvironment = (): Record<string, string> => ({
  ...Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] =>
    entry[1] !== undefined && !/^(npm_|pnpm_|PNPM_|PPS_|INIT_CWD$|NODE_OPTIONS$)/.test(entry[0]))),
  PATH: `${dirname(process.execPath)}:${process.env["PATH"] ?? ""}`
})

/** The machine's `npm` (found on PATH) on the pinned Node; audit and funding notices off (they only talk to the registry). */
const npm = (args: ReadonlyArray<string>, cwd: string) =>
  execFileAsync("npm", args, {
    cwd,
    env: { ...userEnvironment(), npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" }
  })

/** A command's exit status and output, whether it succeeded or not. */
const outcome = (run: Promise<{ stdout: string; stderr: string }>) =>
  run.then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({ code: error.code ?? -1, stdout: error.stdout ?? "", stderr: error.stderr ?? "" })
  )

// Type-checked only: written as a user would, against the package name. The `@ts-expect-error`
// lines fail the check if the emitted types degrade to `any`.
const consumer = `import { ApiClient, Errors, Pps, type PpsTypes } from "@pps/sdk"
import { Effect } from "effect"

const pps = new Pps({ apiKey: "hc_test_x", baseUrl: "http://127.0.0.1:9" })

export const firstConfirmed = async (): Promise<PpsTypes.Transfer["status"] | undefined> => {
  for await (const transfer of pps.transfers.list({ status: "confirmed", pageSize: 10 })) return transfer.status
  return undefined
}

export const ids = Effect.gen(function*() {
  const client = yield* ApiClient.ApiClient
  const page = yield* client.transfers.list({ query: { limit: 5 } })
  // @ts-expect-error limit is a number in the contract
  yield* client.transfers.list({ query: { limit: "5" } })
  return page.data.map((transfer) => transfer.transfer_id)
}).pipe(Effect.provide(ApiClient.layer({ apiKey: "hc_test_x", retryBudgetMs: 30_000 })))

export const refusedForBalance = (error: unknown): string | undefined =>
  error instanceof Errors.InsufficientBalance ? error.requestId : undefined

export const codeOf = (error: Errors.ApiError): Errors.Code | undefined => error.code
// @ts-expect-error a code is one of the contract's, not any string
export const notACode: Errors.Code = "no_such_code"

export const approved = (id: string): Promise<PpsTypes.HeldTransaction> => pps.approvals.approve(id, { idempotencyKey: "approve-" + id })

// @ts-expect-error there is no such resource
pps.invoices.list()
`

/** The program run against the live server, whose address and key it reads from settings.json. */
const program = `import { ApiClient, Errors, KeyFile, Pps, type PpsTypes } from "@pps/sdk"
import { Effect } from "effect"
import settings from "./settings.json" with { type: "json" }

const { apiKey, baseUrl } = settings
const pps = new Pps({ apiKey, baseUrl, keyPair: KeyFile.read("alice.key").keyPair })

const me: PpsTypes.Account = await pps.accounts.me()
// Sealed here: the amount and memo leave this process only as ciphertexts.
const created: PpsTypes.CreatedTransfer = await pps.transfers.create({ to: "@bob", amount: "1.25", memo: "from the tarball" })
if (created.kind !== "transfer") throw new Error("held: " + created.held.transaction_id)
const opened: PpsTypes.DecryptedTransfer = await pps.transfers.decrypt(created.transfer.transfer_id)
const listed: Array<string> = []
for await (const transfer of pps.transfers.list({ pageSize: 10 })) listed.push(transfer.transfer_id)
const missing = await pps.transfers.get("tr_01JZZZZZZZZZZZZZZZZZZZZZZZ").then(
  () => "found",
  (error: unknown) => (error instanceof Errors.TransferNotFound ? error.code : String(error))
)
const viaEffect = await Effect.runPromise(
  Effect.gen(function*() {
    const client = yield* ApiClient.ApiClient
    const account = yield* client.accounts.me()
    const page = yield* client.transfers.list({ query: { limit: 5 } })
    return { handle: account.handle, newest: page.data[0]?.transfer_id }
  }).pipe(Effect.provide(ApiClient.layer({ apiKey, baseUrl })))
)
console.log(JSON.stringify({
  handle: me.handle,
  transfer: created.transfer.transfer_id,
  status: created.transfer.status,
  opened: { amount: String(opened.amount), memo: opened.memo, role: opened.role },
  listed,
  missing,
  viaEffect
}))
`

const writeSettings = (app: string, settings: { readonly apiKey: string; readonly baseUrl: string }) =>
  writeFile(join(app, "settings.json"), JSON.stringify(settings))

/** tsc on the consumer and the program, against the installed `.d.ts`: library checks on, no Node types. */
const typecheck = async (app: string) => {
  await writeFile(join(app, "tsconfig.json"), JSON.stringify({
    compilerOptions: {
      target: "ES2023",
      lib: ["ES2023", "DOM"],
      module: "NodeNext",
      moduleResolution: "NodeNext",
      resolveJsonModule: true,
      strict: true,
      noEmit: true,
      skipLibCheck: false,
      types: []
    },
    files: ["consumer.ts", "program.ts"]
  }))
  return outcome(execFileAsync(process.execPath, [tsc, "-p", app], { cwd: app }))
}

/** Alice (her key file beside the program) and Bob, with registered keys and Alice funded; then the program, as Alice. */
const runProgram = async (app: string, server: ServerProcess) => {
  const [alice, bob] = [await server.createAccount("alice"), await server.createAccount("bob")]
  const aliceKey = EncryptionKey.generate()
  await new Pps({ baseUrl: server.baseUrl, apiKey: alice.api_key, keyPair: aliceKey }).encryptionKey.register()
  await new Pps({ baseUrl: server.baseUrl, apiKey: bob.api_key, keyPair: EncryptionKey.generate() }).encryptionKey.register()
  await new Pps({ baseUrl: server.baseUrl, apiKey: alice.api_key }).faucet({ amount: "10" })
  KeyFile.write(join(app, "alice.key"), { accountId: alice.account_id, keyPair: aliceKey }, { overwrite: false })
  await writeSettings(app, { apiKey: alice.api_key, baseUrl: server.baseUrl })
  const ran = await outcome(execFileAsync(process.execPath, ["--disable-warning=ExperimentalWarning", "program.ts"], { cwd: app, env: userEnvironment() }))
  expect(ran, ran.stderr).toMatchObject({ code: 0 })
  return { apiKey: alice.api_key, outcome: JSON.parse(ran.stdout) as { transfer: string; listed: Array<string> } }
}

/** The installed packages, scoped ones as `@scope/name`. */
const installed = async (app: string): Promise<ReadonlyArray<string>> => {
  const top = (await readdir(join(app, "node_modules"))).filter((name) => !name.startsWith("."))
  const scoped = await Promise.all(top.filter((name) => name.startsWith("@")).map(async (scope) =>
    (await readdir(join(app, "node_modules", scope))).map((name) => `${scope}/${name}`)))
  return [...top.filter((name) => !name.startsWith("@")), ...scoped.flat()].sort()
}

describe("the packaged SDK", () => {
  it("installs from its one tarball with npm alone, runs a typed program against a live server, and pps with its one more package", async () => {
    const work = await mkdtemp(join(tmpdir(), "pps-sdk-package-"))
    const t0 = Date.now()
    const step = (name: string) => console.info(`${name}: ${Date.now() - t0} ms`)
    const build = async () => {
      await Promise.all(["api", "crypto", "sdk"].map((name) => rm(join(packages, name, "dist"), { recursive: true, force: true })))
      await execFileAsync("pnpm", ["--dir", join(packages, "sdk"), "run", "build"])
      await execFileAsync("pnpm", ["--dir", join(packages, "sdk"), "pack", "--pack-destination", work])
    }
    // The server starts while the packages build.
    const [server] = await Promise.all([startServer(), build()])
    step("built, server up")
    try {
      const tarball = `pps-sdk-${version}.tgz`
      const app = join(work, "app")
      await mkdir(app)
      await copyFile(join(work, tarball), join(app, tarball))
      await writeFile(join(app, "package.json"), `${JSON.stringify({ name: "consumer", private: true, type: "module" })}\n`)
      const started = Date.now()
      await npm(["install", `./${tarball}`], app)
      step("installed")
      const installMs = Date.now() - started

      // One package of ours; its dependencies the registry's; nothing of the workspace, the MCP server or a server.
      const names = await installed(app)
      expect(names.filter((name) => name.startsWith("@pps/"))).toEqual(["@pps/sdk"])
      expect(names.filter((name) => /^@modelcontextprotocol\/|^@effect\/|^@electric-sql\/|^nats$|^pg$/.test(name))).toEqual([])
      const manifest = JSON.parse(await readFile(join(app, "node_modules/@pps/sdk/package.json"), "utf8")) as Record<string, Record<string, string>>
      expect(Object.keys(manifest["dependencies"] ?? {}).sort()).toEqual(["@noble/ciphers", "@noble/curves", "@noble/hashes", "mcl-wasm", "viem"])
      expect(Object.keys(manifest["peerDependencies"] ?? {}).sort()).toEqual(["@effect/platform-node-shared", "effect"])
      expect(names).toEqual(expect.arrayContaining(["effect", "viem", "@noble/curves", "mcl-wasm"]))

      // Type-checked while the program's account is made and the program runs.
      await Promise.all([writeFile(join(app, "consumer.ts"), consumer), writeFile(join(app, "program.ts"), program)])
      await writeSettings(app, { apiKey: "", baseUrl: "" })
      const [checked, result] = await Promise.all([typecheck(app), runProgram(app, server)])
      step("type-checked, program run")
      expect(checked.stdout).toBe("")
      expect(result.outcome).toMatchObject({
        handle: "@alice",
        transfer: expect.stringMatching(/^tr_/),
        status: "confirmed",
        opened: { amount: "1250000", memo: "from the tarball", role: "sender" },
        missing: "transfer_not_found",
        viaEffect: { handle: "@alice", newest: result.outcome.transfer }
      })
      expect(result.outcome.listed).toContain(result.outcome.transfer)

      // The command line: its platform package first, as it says; then it runs, and opens the amount here too.
      const pps = join(app, "node_modules/.bin/pps")
      const without = await outcome(execFileAsync(pps, ["--help"], { cwd: app, env: userEnvironment() }))
      expect(without).toMatchObject({ code: 1, stdout: "" })
      expect(without.stderr).toBe("pps: the command line needs @effect/platform-node-shared beside @pps/sdk: npm install @effect/platform-node-shared@^4.1.0\n")
      await npm(["install", "@effect/platform-node-shared@^4.1.0"], app)
      const help = await outcome(execFileAsync(pps, ["--help"], { cwd: app, env: userEnvironment() }))
      expect(help.stdout).toMatch(/^usage: pps <command>/)
      expect(help.stdout).toContain("listen")
      // No MCP server in the install (the SDK does not depend on it): `pps mcp` says what to install, before any request.
      const mcp = await outcome(execFileAsync(pps, ["mcp"], { cwd: app, env: { ...userEnvironment(), PPS_API_KEY: "hc_test_x", PPS_BASE_URL: "http://127.0.0.1:9" } }))
      expect(mcp).toMatchObject({ code: 1, stderr: "pps: the MCP server is the package @pps/mcp, not installed next to @pps/sdk: npm install @pps/mcp\n" })
      const env = { ...userEnvironment(), PPS_API_KEY: result.apiKey, PPS_BASE_URL: server.baseUrl }
      const listedByPps = await outcome(execFileAsync(pps, ["transfers", "list", "--key-file", "alice.key", "--json"], { cwd: app, env }))
      step("pps")
      expect(listedByPps, listedByPps.stderr).toMatchObject({ code: 0, stderr: "" })
      expect(JSON.parse(listedByPps.stdout)).toMatchObject({ data: expect.arrayContaining([expect.objectContaining({ transfer_id: result.outcome.transfer, amount: "1.25" })]) })
      console.info(`npm install of the tarball: ${installMs} ms, ${names.length} packages`)
    } finally {
      await server.stop()
      await rm(work, { recursive: true, force: true })
    }
  }, 240_000)
})
