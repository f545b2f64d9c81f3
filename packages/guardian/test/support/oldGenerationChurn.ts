/**
 * `node [flags] oldGenerationChurn.ts`: what a loaded server does to V8's old generation, in
 * miniature. It keeps ~45 MB alive, then allocates ~600 MB of objects that each outlive a few
 * scavenges before they die (as a request's do while it waits), so that they are promoted and
 * die in the old generation. Prints, as JSON, the old space's largest size meanwhile and what is
 * alive in it after a full collection (run with `--expose-gc`).
 */
import * as v8 from "node:v8"

const oldSpace = () => {
  const space = v8.getHeapSpaceStatistics().find((each) => each.space_name === "old_space")
  if (space === undefined) throw new Error("V8 reports no old_space")
  return space
}

const live: Array<{ id: number; text: string; list: Array<number> }> = []
for (let i = 0; i < 300_000; i++) live.push({ id: i, text: `live-${i}`, list: [i, i + 1] })

// 150,000 objects in flight at a time: more than a scavenge of 2 x 8 MB semi-spaces can hold, so
// each one is promoted before it is dropped.
const inFlight = new Array<{ id: number; text: string; list: Array<number> }>(150_000)
let peakBytes = 0
for (let i = 0; i < 6_000_000; i++) {
  inFlight[i % inFlight.length] = { id: i, text: `churn-${i}`, list: [i] }
  if (i % 20_000 === 0) peakBytes = Math.max(peakBytes, oldSpace().space_size)
}
inFlight.fill(undefined as never)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with --expose-gc")
gc()
process.stdout.write(JSON.stringify({ peakBytes, liveBytes: oldSpace().space_used_size, kept: live.length }))
