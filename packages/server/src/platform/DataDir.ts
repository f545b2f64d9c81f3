/**
 * The data directory of the embedded mode, and the lock that keeps a second
 * server off it.
 *
 * Everything the embedded mode keeps lives under `DATA_DIR`: the PGlite
 * database, the generated secrets, the admin connection file, the chain state.
 * Two servers on one directory would corrupt PGlite, so the first takes
 * `server.lock` (created exclusively, holding its pid) and a second start is
 * refused with a clear message; a lock left by a dead process is taken over.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Context, Data, Effect, Layer } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/**
 * Another live server holds the data directory.
 *
 * @since 0.1.0
 * @category errors
 */
export class DataDirLocked extends Data.TaggedError("DataDirLocked")<{
  readonly dataDir: string
  readonly pid: number
}> {
  override get message() {
    return `Another server (pid ${this.pid}) is already running on data directory ${this.dataDir}. ` +
      `Stop it first, or start this one with a different DATA_DIR.`
  }
}

/**
 * The data directory could not be created or read.
 *
 * @since 0.1.0
 * @category errors
 */
export class DataDirError extends Data.TaggedError("DataDirError")<{
  readonly dataDir: string
  readonly cause: unknown
}> {
  override get message() {
    return `Cannot use data directory ${this.dataDir}: ${String(this.cause)}`
  }
}

/**
 * The absolute path of the data directory (created when missing), held under
 * the exclusive lock for the life of the layer.
 *
 * @since 0.1.0
 * @category services
 */
export class DataDir extends Context.Service<DataDir, { readonly path: string }>()("server/platform/DataDir") {
  static readonly layer = Layer.effect(
    DataDir,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const dataDir = path.resolve(config.dataDir)
      yield* Effect.try({
        try: () => fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 }),
        catch: (cause) => new DataDirError({ dataDir, cause })
      })
      const lockFile = path.join(dataDir, "server.lock")
      yield* Effect.acquireRelease(
        acquireLock(dataDir, lockFile),
        () => Effect.sync(() => fs.rmSync(lockFile, { force: true }))
      )
      return { path: dataDir }
    })
  )
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const acquireLock = (dataDir: string, lockFile: string): Effect.Effect<void, DataDirLocked | DataDirError> =>
  Effect.suspend(() => {
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: "wx", mode: 0o600 })
      return Effect.void
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") {
        return Effect.fail(new DataDirError({ dataDir, cause: error }))
      }
    }
    const pid = Number.parseInt(fs.readFileSync(lockFile, "utf8"), 10)
    if (Number.isInteger(pid) && pid !== process.pid && isAlive(pid)) {
      return Effect.fail(new DataDirLocked({ dataDir, pid }))
    }
    // A stale lock from a process that died (kill -9, crash): take it over.
    fs.rmSync(lockFile, { force: true })
    return acquireLock(dataDir, lockFile)
  })
