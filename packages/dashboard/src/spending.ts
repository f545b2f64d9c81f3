/**
 * What an agent has sent today, as its daily limit counts it (D22, D25): the
 * USDG of its transfers that did not fail, created on the current day of its
 * policy's time zone. The server cannot add amounts it cannot read; the page
 * opens each one with the owner's key (agents' copies are sealed to it) from
 * the owner's list with `include_agents=true`, newest first, until the day
 * before.
 */
import type { EncryptionKey } from "@pps/crypto"
import { call, ppsFor } from "./api.ts"
import { dayInZone } from "./time.tsx"
import type { TransferPage } from "./pages/Transfers.tsx"

const pageSize = 100
/** A bound on what one figure reads: past it the figure says "at least". */
const pagesMax = 10

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
  // The earliest "today" of any zone: older transfers count for none of them.
  const earliestDay = [...figures.values()].map((f) => f.day).sort()[0] ?? ""
  const pps = ppsFor(keyPair)
  for (let index = 0; index < pagesMax; index++) {
    const page = await call<TransferPage>("GET", `/v1/transfers?include_agents=true&limit=${pageSize}&offset=${index * pageSize}`)
    let older = false
    for (const transfer of page.data) {
      // A moment's date is latest in the zone furthest ahead (UTC+14): a transfer dated before
      // every figure's day there is before it in every zone, and so are all after it.
      if (dayInZone(transfer.created_at, "Pacific/Kiritimati") < earliestDay) {
        older = true
        continue
      }
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
    if (older || !page.has_more) return figures
  }
  for (const figure of figures.values()) figure.complete = false
  return figures
}
