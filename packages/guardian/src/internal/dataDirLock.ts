/**
 * An exclusive lock on the guardian's PGlite directory: two processes on one PGlite
 * directory corrupt it. The first takes `guardian.lock` (created exclusively, holding
 * its pid); a lock left by a dead process (kill -9) is taken over.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

const tryLock = (lockFile: string): void => {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      fs.writeFileSync(lockFile, String(process.pid), { flag: "wx", mode: 0o600 })
      return
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    }
    const pid = Number.parseInt(fs.readFileSync(lockFile, "utf8"), 10)
    if (Number.isInteger(pid) && pid !== process.pid && isAlive(pid)) {
      throw new Error(`another guardian (pid ${pid}) is running on ${path.dirname(lockFile)}`)
    }
    fs.rmSync(lockFile, { force: true })
  }
  throw new Error(`cannot take ${lockFile}`)
}

/** Creates the directory (0700) and holds its lock for the scope's life. */
export const lockDataDir = (dir: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
        const lockFile = path.join(dir, "guardian.lock")
        tryLock(lockFile)
        return lockFile
      },
      catch: (cause) => new Error(cause instanceof Error ? cause.message : String(cause))
    }),
    (lockFile) => Effect.sync(() => fs.rmSync(lockFile, { force: true }))
  )
