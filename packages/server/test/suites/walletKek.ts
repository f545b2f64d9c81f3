/**
 * Goal (D54): the operator rotates `WALLET_KEK` and restores it from a backup, and every custodial
 * wallet still signs: on a real chain (embedded anvil), a real guardian and either database, over
 * restarts on the same state, through the admin command as the operator runs it.
 *
 * - Before: accounts and their wallets, the embedded chain's relayer and faucet keys and a webhook
 *   secret are sealed under KEK A; a transfer settles.
 * - Rotation: the server restarts sealing under B with A accepted; `wallet-kek rotate` re-seals
 *   every value (nothing left under A), again is a no-op (resumable); with B alone, an account
 *   created under A registers its encryption key on chain (its wallet signs the registration) and
 *   a transfer to it settles (the relayers' keys sign), and the webhook secret opens as created.
 * - Backup and restore: `wallet-kek backup` writes B under a passphrase; with the KEK lost (the
 *   embedded file's replaced; the distributed configuration's unknown) `wallet-kek restore` gives
 *   it back (a wrong passphrase, a short one or an altered file are refused), and after a restart on
 *   it a fourth wallet created under A signs its registration and a transfer to it settles.
 * - Embedded mode edits `DATA_DIR/secrets.json` (`stage`, `finish`, `restore`); distributed mode
 *   configures `WALLET_KEK` / `WALLET_KEK_ACCEPTED` (`restore --print`).
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { secretBinding } from "@pps/api/Webhooks"
import { TransferRecord } from "@pps/api/Transfers"
import type { AppConfigShape } from "../../src/config/AppConfig.ts"
import { ulid } from "../../src/platform/Ids.ts"
import { kekIdOf, SecretBox } from "../../src/platform/SecretBox.ts"
import { readSecretsFile, writeSecretsFile } from "../../src/platform/SecretsFile.ts"
import { runAdmin } from "../support/adminCli.ts"
import { registerKey } from "../support/confidentialClient.ts"
import { bearer, createAccount, decodeAnswer, postJson, send } from "../support/http.ts"
import { type DatabaseTarget, freshPostgresDatabase, makeTestServer, TestServer, type TestServerShape } from "../support/TestServer.ts"

type Account = Effect.Success<ReturnType<typeof createAccount>>

const passphrase = "correct horse battery staple 54"

/** Runs `body` against a server on the given state, then stops it (its anvil writes its state). */
const withServer = <A, E>(
  options: { readonly database: DatabaseTarget; readonly dataDir: string; readonly databaseUrl?: string; readonly config?: Partial<AppConfigShape> },
  body: (server: TestServerShape, box: SecretBox["Service"]) => Effect.Effect<A, E>
) =>
  Effect.scoped(Effect.gen(function*() {
    const built = yield* Layer.build(makeTestServer(options))
    const server = Context.get(built, TestServer)
    return yield* body(server, Context.get(server.services, SecretBox))
  }))

const transferConfirmed = (server: TestServerShape, from: Account, to: string, amount: string) =>
  send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(from.api_key), "idempotency-key": `t-${ulid()}` }, { to, amount })).pipe(
    Effect.map((response) => decodeAnswer(TransferRecord, response, 201)),
    Effect.tap((transfer) => Effect.sync(() => assert.strictEqual(transfer.status, "confirmed")))
  )

const admin = (server: TestServerShape, dataDir: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.promise(() => runAdmin(["wallet-kek", ...args], { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: server.adminToken, DATA_DIR: dataDir, ...env }))

/** What `rotate` and `status` print (admin/api.ts `ResealOutcome`). */
interface Outcome {
  readonly kek_id: string
  readonly accepted_kek_ids: ReadonlyArray<string>
  readonly remaining: number
  readonly columns: Readonly<Record<string, { readonly resealed: number; readonly already_current: number; readonly unopenable: number }>>
}

const adminJson = <A = Record<string, unknown>>(server: TestServerShape, dataDir: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  admin(server, dataDir, args, env).pipe(Effect.map((run) => {
    assert.strictEqual(run.exitCode, 0, run.stderr)
    return JSON.parse(run.stdout) as A
  }))

/** Phase 1, under KEK A: four accounts, two funded with a transfer between them, a webhook. */
const before = (server: TestServerShape) =>
  Effect.gen(function*() {
    const [alice, bob, carol, dave] = yield* Effect.forEach(["alice", "bob", "carol", "dave"], (handle) => createAccount(server, handle))
    yield* registerKey(server.baseUrl, alice!.api_key)
    yield* registerKey(server.baseUrl, bob!.api_key)
    assert.strictEqual((yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(alice!.api_key), { amount: "100" }))).status, 200)
    yield* transferConfirmed(server, alice!, "@bob", "1.5")
    const webhook = (yield* send(`${server.baseUrl}/v1/webhooks`, postJson(bearer(alice!.api_key), {
      url: "http://127.0.0.1:9/hook",
      events: ["transfer.confirmed"]
    }))).json as { webhook_id: string; secret: string }
    return { alice: alice!, carol: carol!, dave: dave!, webhook }
  })

/** The rotation's re-seal, run twice: everything once, then nothing (resumable). */
const resealTwice = (server: TestServerShape, dataDir: string, box: SecretBox["Service"], kekA: string) =>
  Effect.gen(function*() {
    assert.notStrictEqual(box.currentKekId, kekA)
    assert.deepStrictEqual(box.acceptedKekIds, [kekA])
    const pending = yield* adminJson<Outcome>(server, dataDir, ["status"])
    assert.isAbove(pending.remaining, 5)
    const first = yield* adminJson<Outcome>(server, dataDir, ["rotate"])
    expect(first).toMatchObject({ kek_id: box.currentKekId, accepted_kek_ids: [kekA], remaining: 0 })
    assert.isAtLeast(first.columns["wallet_keys"]!.resealed, 4)
    assert.isAtLeast(first.columns["chain_keys"]!.resealed, 2)
    assert.strictEqual(first.columns["webhook_secrets"]!.resealed, 1)
    for (const column of Object.values(first.columns)) assert.strictEqual(column.unopenable, 0)
    const again = yield* adminJson<Outcome>(server, dataDir, ["rotate"])
    for (const column of Object.values(again.columns)) assert.strictEqual(column.resealed, 0)
    assert.isAtLeast(again.columns["wallet_keys"]!.already_current, 4)
    assert.strictEqual(again.remaining, 0)
  })

/** Under the new KEK alone: an old account's wallet signs its registration, a transfer to it settles, the webhook secret opens. */
const signsUnder = (server: TestServerShape, box: SecretBox["Service"], state: Effect.Success<ReturnType<typeof before>>, account: Account, handle: string) =>
  Effect.gen(function*() {
    assert.deepStrictEqual(box.acceptedKekIds, [])
    yield* registerKey(server.baseUrl, account.api_key)
    yield* transferConfirmed(server, state.alice, handle, "2.25")
    const client = Context.get(server.services, SqlClient.SqlClient)
    const rows = yield* client<{ secret_sealed: Uint8Array }>`SELECT secret_sealed FROM webhooks WHERE webhook_id = ${state.webhook.webhook_id}`.pipe(Effect.orDie)
    const opened = yield* box.open(new Uint8Array(rows[0]!.secret_sealed), secretBinding(state.webhook.webhook_id)).pipe(Effect.orDie)
    assert.strictEqual(new TextDecoder().decode(opened), state.webhook.secret)
  })

/** A backup refuses a short passphrase; a restore refuses a wrong one and an altered file. */
const backupRefusals = (server: TestServerShape, dataDir: string, file: string, env: Record<string, string>) =>
  Effect.gen(function*() {
    const short = yield* admin(server, dataDir, ["backup", "--out", `${file}.short`], { ...env, PPS_BACKUP_PASSPHRASE: "short" })
    assert.strictEqual(short.exitCode, 1)
    assert.match(short.stderr, /PPS_BACKUP_PASSPHRASE/)
    const wrong = yield* admin(server, dataDir, ["restore", "--in", file, "--print"], { PPS_BACKUP_PASSPHRASE: `${passphrase}!` })
    assert.strictEqual(wrong.exitCode, 1)
    assert.match(wrong.stderr, /passphrase does not open/)
    const altered = JSON.parse(fs.readFileSync(file, "utf8")) as { wallets: Array<{ address: string }> }
    altered.wallets[0]!.address = "0x000000000000000000000000000000000000dead"
    fs.writeFileSync(`${file}.altered`, JSON.stringify(altered))
    const refused = yield* admin(server, dataDir, ["restore", "--in", `${file}.altered`, "--print"], { PPS_BACKUP_PASSPHRASE: passphrase })
    assert.strictEqual(refused.exitCode, 1)
    assert.match(refused.stderr, /opens to another address/)
  })

const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "pps-kek-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** Embedded mode: the KEK lives in DATA_DIR/secrets.json; stage, rotate, finish, backup, lose, restore. */
export const embeddedWalletKekTest = (database: DatabaseTarget) =>
  it.live("embedded: stage, rotate, finish; backup; the KEK lost and restored; every wallet still signs", () =>
    Effect.scoped(Effect.gen(function*() {
      const dataDir = yield* tempDir
      const secretsFile = path.join(dataDir, "secrets.json")
      const backupFile = path.join(dataDir, "..", `${path.basename(dataDir)}.backup.json`)
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(backupFile, { force: true })))
      const options = { database, dataDir }
      const { kekA, state } = yield* withServer(options, (server, box) =>
        Effect.gen(function*() {
          const state = yield* before(server)
          // Staged while the server runs: it reads the file at its next start.
          const staged = yield* adminJson(server, dataDir, ["stage"])
          expect(staged).toMatchObject({ accepted_kek_ids: [box.currentKekId] })
          const twice = yield* admin(server, dataDir, ["stage"])
          assert.strictEqual(twice.exitCode, 1)
          assert.match(twice.stderr, /a rotation is under way/)
          return { kekA: box.currentKekId, state }
        }))
      const kekB = yield* withServer(options, (server, box) =>
        Effect.gen(function*() {
          yield* resealTwice(server, dataDir, box, kekA)
          expect(yield* adminJson(server, dataDir, ["finish"])).toEqual({ kek_id: box.currentKekId, dropped_kek_ids: [kekA] })
          return box.currentKekId
        }))
      assert.isUndefined(readSecretsFile(secretsFile)?.wallet_kek_accepted)
      yield* withServer(options, (server, box) =>
        Effect.gen(function*() {
          assert.strictEqual(box.currentKekId, kekB)
          yield* signsUnder(server, box, state, state.carol, "@carol")
          const written = yield* adminJson(server, dataDir, ["backup", "--out", backupFile], { PPS_BACKUP_PASSPHRASE: passphrase })
          expect(written).toMatchObject({ kek_id: kekB, wallets: 4 })
          yield* backupRefusals(server, dataDir, backupFile, {})
        }))
      // The KEK is lost: the file now holds another key.
      const lost = readSecretsFile(secretsFile)!
      writeSecretsFile(secretsFile, { ...lost, wallet_kek: randomBytes(32).toString("base64") })
      const restored = yield* Effect.promise(() =>
        runAdmin(["wallet-kek", "restore", "--in", backupFile], { DATA_DIR: dataDir, PPS_BACKUP_PASSPHRASE: passphrase })
      )
      assert.strictEqual(restored.exitCode, 0, restored.stderr)
      expect(JSON.parse(restored.stdout)).toMatchObject({ kek_id: kekB, wallets_checked: 4, next_step: "restart the server" })
      // What sealed under the stranger key since it was there still opens: it is kept, accepted.
      assert.strictEqual(readSecretsFile(secretsFile)?.wallet_kek_accepted?.length, 1)
      yield* withServer(options, (server, box) =>
        Effect.gen(function*() {
          assert.strictEqual(box.currentKekId, kekB)
          assert.strictEqual(box.acceptedKekIds.length, 1)
          yield* registerKey(server.baseUrl, state.dave.api_key)
          yield* transferConfirmed(server, state.alice, "@dave", "3")
        }))
    })), { timeout: 600_000 })

/** Distributed mode: the KEK is configuration; the restore prints it. */
export const configuredWalletKekTest = (database: DatabaseTarget) =>
  it.live("configured: WALLET_KEK rotated with WALLET_KEK_ACCEPTED; backup; restore --print; every wallet still signs", () =>
    Effect.scoped(Effect.gen(function*() {
      const dataDir = yield* tempDir
      const databaseUrl = database.name === "postgres" ? yield* freshPostgresDatabase : undefined
      const backupFile = path.join(dataDir, "..", `${path.basename(dataDir)}.backup.json`)
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(backupFile, { force: true })))
      const kekA = randomBytes(32).toString("base64")
      const kekB = randomBytes(32).toString("base64")
      const configured = (kek: string, accepted?: string) => ({
        database,
        dataDir,
        ...(databaseUrl === undefined ? {} : { databaseUrl }),
        config: {
          walletKek: Option.some(Redacted.make(kek)),
          walletKekAccepted: accepted === undefined ? Option.none() : Option.some(Redacted.make(accepted))
        }
      })
      const state = yield* withServer(configured(kekA), (server) => before(server))
      yield* withServer(configured(kekB, kekA), (server, box) =>
        resealTwice(server, dataDir, box, kekIdOf(new Uint8Array(Buffer.from(kekA, "base64")))))
      yield* withServer(configured(kekB), (server, box) =>
        Effect.gen(function*() {
          yield* signsUnder(server, box, state, state.carol, "@carol")
          // The KEK configured here must be the server's.
          const other = yield* admin(server, dataDir, ["backup", "--out", `${backupFile}.other`], { WALLET_KEK: kekA, PPS_BACKUP_PASSPHRASE: passphrase })
          assert.strictEqual(other.exitCode, 1)
          assert.match(other.stderr, /the server seals under KEK/)
          yield* adminJson(server, dataDir, ["backup", "--out", backupFile], { WALLET_KEK: kekB, PPS_BACKUP_PASSPHRASE: passphrase })
          yield* backupRefusals(server, dataDir, backupFile, { WALLET_KEK: kekB })
        }))
      const restored = yield* Effect.promise(() => runAdmin(["wallet-kek", "restore", "--in", backupFile, "--print"], { PPS_BACKUP_PASSPHRASE: passphrase }))
      assert.strictEqual(restored.exitCode, 0, restored.stderr)
      const printed = JSON.parse(restored.stdout) as { wallet_kek: string; wallets_checked: number }
      assert.strictEqual(printed.wallet_kek, kekB)
      assert.strictEqual(printed.wallets_checked, 4)
      yield* withServer(configured(printed.wallet_kek), (server) =>
        Effect.gen(function*() {
          yield* registerKey(server.baseUrl, state.dave.api_key)
          yield* transferConfirmed(server, state.alice, "@dave", "3")
        }))
    })), { timeout: 600_000 })

export const walletKekSuite = (database: DatabaseTarget) =>
  describe(`WALLET_KEK rotation and backup (D54) on ${database.name}`, () => {
    if (database.name === "pglite") embeddedWalletKekTest(database)
    configuredWalletKekTest(database)
  })
