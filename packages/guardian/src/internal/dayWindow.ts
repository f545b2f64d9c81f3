/**
 * The agent's "day" for its daily limit: the interval of instants whose local date, in
 * the policy's IANA time zone, is today's. Computed with Intl.DateTimeFormat only (no
 * Temporal, no tz database of our own), so DST days are 23 or 25 hours long and a zone
 * whose clocks skip midnight starts its day at the first instant that exists.
 *
 * The start of a day is found by binary search on the instant, at millisecond
 * precision: local dates never decrease as time goes on, so "local date ≥ D" is a
 * monotone predicate. About 28 formatter calls per boundary.
 */

/** Daily spend is kept in 15-minute UTC buckets; every current zone offset is a multiple of 15 minutes. */
export const spendBucketMs = 15 * 60 * 1000

const hourMs = 60 * 60 * 1000
/** No zone is more than 14 h from UTC; a local day lasts at most 25 h. */
const searchSpanMs = 40 * hourMs

const formatters = new Map<string, Intl.DateTimeFormat>()

/** The formatter of a time zone, or undefined for a name Intl does not know. */
const formatterOf = (timeZone: string): Intl.DateTimeFormat | undefined => {
  const cached = formatters.get(timeZone)
  if (cached !== undefined) return cached
  try {
    const formatter = new Intl.DateTimeFormat("en-US", {
      timeZone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit"
    })
    formatters.set(timeZone, formatter)
    return formatter
  } catch {
    return undefined
  }
}

/** Whether Intl knows the zone. */
export const isValidTimeZone = (timeZone: string): boolean => formatterOf(timeZone) !== undefined

/** The local date at an instant as a comparable number yyyymmdd. */
const localDate = (formatter: Intl.DateTimeFormat, instantMs: number): number => {
  let year = 0
  let month = 0
  let day = 0
  for (const part of formatter.formatToParts(instantMs)) {
    if (part.type === "year") year = Number(part.value)
    else if (part.type === "month") month = Number(part.value)
    else if (part.type === "day") day = Number(part.value)
  }
  return year * 10_000 + month * 100 + day
}

/** The first instant in [low, high] whose local date is ≥ date (high if none). */
const firstInstantOf = (formatter: Intl.DateTimeFormat, date: number, lowMs: number, highMs: number): number => {
  let low = lowMs
  let high = highMs
  while (low < high) {
    const middle = Math.floor((low + high) / 2)
    if (localDate(formatter, middle) >= date) high = middle
    else low = middle + 1
  }
  return low
}

const nextDate = (date: number): number => {
  const next = new Date(Date.UTC(Math.floor(date / 10_000), Math.floor(date / 100) % 100 - 1, (date % 100) + 1))
  return next.getUTCFullYear() * 10_000 + (next.getUTCMonth() + 1) * 100 + next.getUTCDate()
}

/**
 * The local day containing `nowMs` in `timeZone`, as [startMs, endMs). Undefined for an
 * unknown zone.
 */
export const dayWindow = (
  nowMs: number,
  timeZone: string
): { readonly startMs: number; readonly endMs: number; readonly date: number } | undefined => {
  const formatter = formatterOf(timeZone)
  if (formatter === undefined) return undefined
  const today = localDate(formatter, nowMs)
  const startMs = firstInstantOf(formatter, today, nowMs - searchSpanMs, nowMs)
  const endMs = firstInstantOf(formatter, nextDate(today), nowMs, nowMs + searchSpanMs)
  return { startMs, endMs, date: today }
}

/** The spend bucket of an instant. */
export const bucketOf = (instantMs: number): number => Math.floor(instantMs / spendBucketMs)

/**
 * The buckets that make up a day: those starting in [startMs, endMs). A day start that
 * is not on a 15-minute boundary (historical offsets only) rounds down, so a bucket
 * straddling midnight counts toward the later day: never less than was spent.
 */
export const bucketRange = (window: { readonly startMs: number; readonly endMs: number }) => ({
  firstBucket: bucketOf(window.startMs),
  endBucket: Math.ceil(window.endMs / spendBucketMs)
})
