/**
 * Times on the page: every one in one time zone, the holder's (this browser's
 * unless they chose another in Settings, kept in this browser's storage), with
 * the zone written next to it and the API's exact ISO time on hover. One
 * formatter for every page, so a list and a detail never disagree.
 */
import { createContext, useContext } from "react"

const storageKey = "pps.dashboard.time-zone"

/** The zone this browser runs in (what the operating system says). */
export const browserTimeZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone

/** Whether the browser knows this IANA zone name. */
export const isTimeZone = (zone: string): boolean => {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone })
    return true
  } catch {
    return false
  }
}

/** The zone the holder chose in Settings, if any (and still known); none means the browser's. */
export const chosenTimeZone = (): string | undefined => {
  const stored = globalThis.localStorage?.getItem(storageKey) ?? null
  return stored !== null && isTimeZone(stored) ? stored : undefined
}

/** Keeps the holder's choice in this browser; undefined goes back to the browser's zone. */
export const storeTimeZone = (zone: string | undefined): void => {
  if (zone === undefined) globalThis.localStorage?.removeItem(storageKey)
  else globalThis.localStorage?.setItem(storageKey, zone)
}

/** Every zone the settings offer: the browser's list, UTC included. */
export const knownTimeZones = (): ReadonlyArray<string> => {
  const listed = Intl.supportedValuesOf("timeZone")
  return listed.includes("UTC") ? listed : ["UTC", ...listed]
}

/** The zone in force on the page and how to change it. */
export interface TimeZoneSetting {
  readonly zone: string
  /** The zone chosen in Settings; undefined: the browser's. */
  readonly chosen: string | undefined
  readonly choose: (zone: string | undefined) => void
}

export const TimeZoneContext = createContext<TimeZoneSetting>({ zone: "UTC", chosen: undefined, choose: () => {} })

export const useTimeZone = (): TimeZoneSetting => useContext(TimeZoneContext)

/**
 * A moment in `zone`, with the zone's short name (`Nov 28, 2026, 10:04:41 PM PST`, `… UTC`,
 * `… GMT+9`), in the browser's language.
 */
export const formatInZone = (iso: string, zone: string): string => {
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return iso
  return new Intl.DateTimeFormat(undefined, {
    year: "numeric",
    month: "short",
    day: "numeric",
    hour: "numeric",
    minute: "2-digit",
    second: "2-digit",
    timeZone: zone,
    timeZoneName: "short"
  }).format(date)
}

/** The calendar day of a moment in `zone`, as `YYYY-MM-DD` (which sorts as the days do). */
export const dayInZone = (iso: string | number, zone: string): string =>
  new Intl.DateTimeFormat("en-CA", { year: "numeric", month: "2-digit", day: "2-digit", timeZone: zone }).format(new Date(iso))

/** A time as the page shows it: in the holder's zone, zone named, the API's ISO time on hover. */
export const When = ({ iso, testId }: { readonly iso: string; readonly testId?: string }) => {
  const { zone } = useTimeZone()
  return <time dateTime={iso} title={iso} data-testid={testId}>{formatInZone(iso, zone)}</time>
}
