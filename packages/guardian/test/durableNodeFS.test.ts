/**
 * The embedded database on disk syncs what it commits (src/DurableNodeFS.ts): PostgreSQL runs
 * with fsync on and syncs its WAL by `fsync()`, which reaches the disk through the sync operation
 * added to PGlite's Node file system: one sync a commit, none for a read, the data files at a
 * checkpoint. As PGlite ships, fsync is off and the sync calls it would make do nothing.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { ThreadedPGlite } from "../src/DatabaseThread.ts"
import { DurableNodeFS } from "../src/DurableNodeFS.ts"
import { PreparedStatementPGlite } from "../src/EmbeddedDatabase.ts"

const setting = async (db: { query: PreparedStatementPGlite["query"] }, name: string) =>
  (await db.query<Record<string, string>>(`SHOW ${name}`)).rows[0]?.[name]

const withDirectory = async (run: (dataDir: string) => Promise<void>) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-db-durable-"))
  try {
    await run(dataDir)
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

describe("EmbeddedDatabase: durable on disk", () => {
  it("syncs each commit, not a read, and the data files at a checkpoint; what it committed is read back after reopening", () =>
    withDirectory(async (dataDir) => {
      const db = new PreparedStatementPGlite(dataDir)
      try {
        await db.waitReady
        assert.strictEqual(await setting(db, "fsync"), "on")
        assert.strictEqual(await setting(db, "wal_sync_method"), "fsync")
        assert.strictEqual(await setting(db, "synchronous_commit"), "on")
        const files = db.fs
        assert.instanceOf(files, DurableNodeFS)
        if (!(files instanceof DurableNodeFS)) return
        await db.exec("CREATE TABLE t (id integer PRIMARY KEY, v text NOT NULL)")

        let before = files.syncs
        await db.query("SELECT count(*) FROM t")
        await db.query("SELECT 1 AS one")
        assert.strictEqual(files.syncs - before, 0, "a read syncs nothing")

        before = files.syncs
        for (let id = 0; id < 5; id++) await db.query("INSERT INTO t VALUES ($1, $2)", [id, "autocommit"])
        assert.strictEqual(files.syncs - before, 5, "one sync for each of five commits")

        before = files.syncs
        await db.query("BEGIN")
        for (let id = 5; id < 10; id++) await db.query("INSERT INTO t VALUES ($1, $2)", [id, "one transaction"])
        assert.strictEqual(files.syncs - before, 0, "nothing synced before the commit")
        await db.query("COMMIT")
        assert.strictEqual(files.syncs - before, 1, "one sync for the transaction's commit")

        before = files.syncs
        await db.exec("CHECKPOINT")
        assert.isAbove(files.syncs - before, 1, "a checkpoint syncs the data files it wrote")
      } finally {
        await db.close()
      }
      const reopened = new PreparedStatementPGlite(dataDir)
      try {
        const { rows } = await reopened.query<{ n: number }>("SELECT count(*)::int AS n FROM t")
        assert.deepStrictEqual(rows, [{ n: 10 }])
      } finally {
        await reopened.close()
      }
    }), 60_000)

  it("is durable on its own thread too; in memory it is PGlite as shipped (nothing to sync)", async () => {
    await withDirectory(async (dataDir) => {
      const threaded = await ThreadedPGlite.open(dataDir)
      try {
        assert.strictEqual(await setting(threaded.asClient(), "fsync"), "on")
        assert.strictEqual(await setting(threaded.asClient(), "wal_sync_method"), "fsync")
      } finally {
        await threaded.close()
      }
    })
    const inMemory = new PreparedStatementPGlite()
    try {
      assert.strictEqual(await setting(inMemory, "fsync"), "off")
      assert.notInstanceOf(inMemory.fs, DurableNodeFS)
    } finally {
      await inMemory.close()
    }
  }, 60_000)
})
