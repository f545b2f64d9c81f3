/**
 * What an agent has sent today, as its daily limit counts it (D22, D25): the
 * USDG of its transfers that did not fail, created on the current day of its
 * policy's time zone. The server cannot add amounts it cannot read; the page
 * opens each one with the owner's key (agents' copies are sealed to it) from
 * the owner's list with `include_agents=true`, from a day and an hour ago
 * (D16's `from`), which covers the current day of every zone.
 */
import type { EncryptionKey } from "@pps/crypto"
import { call, ppsFor } from "./api.ts"
import { dayInZone } from "./time.tsx"
import type { TransferPage } from "./pages/Transfers.tsx"

/** The API's largest page (D16): fewest requests for a day's transfers. */
const pageSize = 100
/** A bound on what one figure reads (1,000 transfers, each opened here): past it the figure says "at least". */
const pagesMax = 10
/** No zone's current day began longer ago than this (a day, and an hour for a day that DST lengthens). */
const longestDayMs = 25 * 60 * 60 * 1000

export interface SentToday {
  /** USDG base units. */
  readonly amount: bigint
  readonly count: number
  /** The day counted, `YYYY-MM-DD` in `timeZone`. */
  readonly day: string
  readonly timeZone: string
  /** False when more transfers of the day were left unread (over `pagesMax` pages) or did not open. */
  readonly complete: boolean
}

/** Sums today's sent USDG of each agent handle in `agents`, each day read in its own zone. */
export const sentToday = async (
  keyPair: EncryptionKey.KeyPair,
  agents: ReadonlyArray<{ readonly handle: string; readonly timeZone: string }>,
  nowMs: number
): Promise<ReadonlyMap<string, SentToday>> => {
  const figures = new Map<string, { amount: bigint; count: number; day: string; timeZone: string; complete: boolean }>()
  for (const agent of agents) {
    figures.set(agent.handle, { amount: 0n, count: 0, day: dayInZone(nowMs, agent.timeZone), timeZone: agent.timeZone, complete: true })
  }
  if (figures.size === 0) return figures
  const pps = ppsFor(keyPair)
  const since = encodeURIComponent(new Date(nowMs - longestDayMs).toISOString())
  for (let index = 0; index < pagesMax; index++) {
    const page = await call<TransferPage>("GET", `/v1/transfers?include_agents=true&from=${since}&limit=${pageSize}&offset=${index * pageSize}`)
    for (const transfer of page.data) {
      const figure = figures.get(transfer.from)
      if (figure === undefined || transfer.direction !== "sent" || transfer.status === "failed" || transfer.asset !== "USDG") continue
      if (dayInZone(transfer.created_at, figure.timeZone) !== figure.day) continue
      const opened = await pps.transfers.decrypt(transfer.transfer_id).catch(() => undefined)
      if (opened === undefined) {
        figure.complete = false
        continue
      }
      figure.amount += opened.amount
      figure.count += 1
    }
    if (!page.has_more) return figures
  }
  for (const figure of figures.values()) figure.complete = false
  return figures
}
