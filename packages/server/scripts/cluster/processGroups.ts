/**
 * Process groups a test or a script starts and must not leave behind: each child runs
 * `detached` (a group of its own), so one signal to the group also reaches what the child
 * started itself (the embedded mode's anvil and guardian). A group is known gone only
 * when signal 0 to it fails; an exit hook SIGKILLs every registered group if the parent
 * itself dies. Shared by the fault harness (test/fault/processes.ts) and the cluster
 * script (cluster.ts).
 */

const liveGroups = new Set<number>()
let exitHookInstalled = false

/** Registers a group the exit hook kills if the parent dies first (the hook is installed once). */
export const registerGroup = (group: number): void => {
  if (!exitHookInstalled) {
    exitHookInstalled = true
    process.once("exit", () => {
      for (const live of liveGroups) {
        try {
          process.kill(-live, "SIGKILL")
        } catch {
          // already gone
        }
      }
    })
  }
  liveGroups.add(group)
}

export const unregisterGroup = (group: number): void => {
  liveGroups.delete(group)
}

/** Groups still registered and alive (none once every process has been stopped). */
export const strayGroups = (): ReadonlyArray<number> => [...liveGroups].filter(groupAlive)

export const groupAlive = (group: number): boolean => {
  try {
    process.kill(-group, 0)
    return true
  } catch {
    // ESRCH: no process left in the group. EPERM: the id now belongs to another user's
    // process, so none of ours is left either.
    return false
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Resolves true once no process of the group is left, false after `timeoutMs`. */
export const waitGroupGone = async (group: number, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (groupAlive(group)) {
    if (Date.now() > deadline) return false
    await sleep(25)
  }
  return true
}

/** A loopback port for a child about to start (see scripts/freePort.ts for why not port 0). */
export { freePort } from "../../../../scripts/freePort.ts"
