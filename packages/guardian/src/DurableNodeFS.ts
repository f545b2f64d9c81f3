/**
 * The embedded database on disk, durable: a transaction PGlite reports committed is on the disk,
 * not only in the operating system's page cache, so it survives a crash of the machine (power
 * loss, a kernel panic, a VM stopped), not only of the process.
 *
 * Why: as shipped, PGlite starts PostgreSQL with `-F` (`fsync = off`), and even with fsync on
 * nothing would reach the disk: its Emscripten file system over Node (NODEFS) has no `fsync`
 * operation, and its `fdatasync` system call (PostgreSQL's default `wal_sync_method` on Linux)
 * is a stub that returns success. A kill -9 loses nothing either way (the page cache outlives the
 * process), but after a power loss the database could come back without its last commits, or
 * damaged (data pages written before the WAL that describes them). For this service that is not
 * a lost row: a transfer broadcast to the chain whose record, idempotency claim and guardian
 * reservation went missing would be paid a second time by the client's retry, and the guardian
 * would attest against a balance the chain has already spent.
 *
 * So, on disk:
 * - PostgreSQL runs with `fsync = on` (PGlite's start parameters without `-F`) and
 *   `wal_sync_method = fsync`: every commit's WAL flush, and every data file at a checkpoint,
 *   goes through `fsync()`, the one sync call that reaches the file system's stream operations;
 * - NODEFS gets that operation: `fdatasync(2)` for a regular file (what PostgreSQL itself uses
 *   for the WAL on Linux: the file's data and the size needed to read it back, not its times),
 *   `fsync(2)` for a directory (its entries: a new WAL segment, a renamed file). A failure is
 *   PostgreSQL's to handle, as an errno (it panics on a data file it cannot sync, as it must).
 *
 * Cost: one sync a commit, paid on the caller's thread: on the 2-vCPU VM ~0.2 ms more for a commit
 * alone, ~1 ms under load; commits are grouped (the guardian's group commit, the server's batched
 * statements), ~0.3 syncs a transfer in the guardian and ~0.7 in the server (docs/benchmarks.md,
 * "Durable commits").
 *
 * @since 0.8.0
 */
import { PGlite, type PGliteOptions } from "@electric-sql/pglite"
import { NodeFS } from "@electric-sql/pglite/nodefs"
import * as fs from "node:fs"

/** The parts of an Emscripten stream over NODEFS that the sync reads. */
interface NodeStream {
  /** Node's file descriptor behind the stream. */
  readonly nfd: number
  readonly node: { readonly mode: number }
}

/** The parts of Emscripten's NODEFS object that its type declarations leave out. */
interface NodeFileSystem {
  readonly stream_ops: { fsync?: (stream: NodeStream) => number }
  /** Runs a Node file-system call, turning its error into the errno Emscripten returns to C. */
  readonly tryFSOperation: <A>(operation: () => A) => A
}

/**
 * PGlite's Node file system with a working `fsync`; `syncs` counts the calls (for tests).
 *
 * @since 0.8.0
 * @category models
 */
export class DurableNodeFS extends NodeFS {
  /** How many syncs PostgreSQL asked for (each one reached the disk). */
  syncs = 0

  override async init(pg: PGlite, emscriptenOptions: Parameters<NodeFS["init"]>[1]) {
    const { emscriptenOpts } = await super.init(pg, emscriptenOptions)
    const installSync = (module: { readonly NODEFS: unknown; readonly FS: { isDir: (mode: number) => boolean } }) => {
      const nodefs = module.NODEFS as NodeFileSystem
      nodefs.stream_ops.fsync = (stream) => {
        const directory = module.FS.isDir(stream.node.mode)
        nodefs.tryFSOperation(() => (directory ? fs.fsyncSync(stream.nfd) : fs.fdatasyncSync(stream.nfd)))
        this.syncs++
        return 0
      }
    }
    return { emscriptenOpts: { ...emscriptenOpts, preRun: [installSync, ...(emscriptenOpts.preRun ?? [])] } }
  }
}

/**
 * PostgreSQL's start parameters as PGlite passes them, with fsync on and the WAL synced by
 * `fsync()` (see the module comment).
 *
 * @since 0.8.0
 * @category constants
 */
export const durableStartParams: ReadonlyArray<string> = [
  ...PGlite.defaultStartParams.filter((parameter) => parameter !== "-F"),
  "-c",
  "wal_sync_method=fsync"
]

/**
 * The options that make a PGlite in `dataDir` durable, merged under the caller's own (which win).
 * A database in memory (no directory) or behind a URL scheme (`memory://`, `idb://`, ...) is left
 * as PGlite makes it.
 *
 * @since 0.8.0
 * @category constructors
 */
export const durableOptions = (dataDir: string | undefined, options: PGliteOptions | undefined): PGliteOptions | undefined =>
  dataDir === undefined || dataDir.includes("://")
    ? options
    : { fs: new DurableNodeFS(dataDir), startParams: [...durableStartParams], ...options }
