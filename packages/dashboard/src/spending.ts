/**
 * What agents have sent, day by day, as their daily limits count it (D22, D25): the USDG of
 * their transfers that did not fail, by the day they were created on in each policy's time zone.
 * The server cannot add amounts it cannot read; the page opens each one with the owner's key
 * (agents' copies are sealed to it) from the owner's list with `include_agents=true`, from far
 * enough back (D16's `from`) to cover the days asked for in every zone. Today's figure is what
 * the Approvals page sets against the limit; the last 30 days are the Agents page's chart.
 */
import type { EncryptionKey } from "@pps/crypto"
import { readPages } from "./activity.ts"
import { openTransfer } from "./opened.ts"
import type { Transfer } from "./pages/TransferDetail.tsx"
import { dayInZone } from "./time.tsx"

const hourMs = 60 * 60 * 1000

/** One day's spending of an agent. */
export interface DaySpent {
  /** `YYYY-MM-DD` in the agent's policy zone. */
  readonly day: string
  /** USDG base units. */
  readonly amount: bigint
  readonly count: number
}

export interface SentToday extends DaySpent {
  readonly timeZone: string
  /** False when more transfers of the period were left unread (past the page's bound) or did not open. */
  readonly complete: boolean
}

export interface AgentSpending {
  /** The last `days` days of the agent's zone, oldest first, today last. */
  readonly days: ReadonlyArray<DaySpent>
  readonly today: SentToday
}

/** The `count` calendar days ending with `today` (`YYYY-MM-DD`), oldest first: calendar arithmetic, no zone involved. */
export const daysEndingOn = (today: string, count: number): ReadonlyArray<string> => {
  const [year = 0, month = 1, day = 1] = today.split("-").map(Number)
  return Array.from({ length: count }, (_, index) =>
    new Date(Date.UTC(year, month - 1, day - (count - 1 - index))).toISOString().slice(0, 10))
}

/**
 * Each agent's USDG sent on each of the last `days` days (today included), each day read in the
 * agent's own zone. `from` is `days` days and an hour back: no zone's day `days − 1` before today
 * began earlier (a day lengthened by DST is 25 hours).
 */
export const agentSpending = async (
  keyPair: EncryptionKey.KeyPair,
  agents: ReadonlyArray<{ readonly handle: string; readonly timeZone: string }>,
  nowMs: number,
  days: number
): Promise<ReadonlyMap<string, AgentSpending>> => {
  const sums = new Map<string, { readonly timeZone: string; readonly byDay: Map<string, { amount: bigint; count: number }> }>()
  for (const agent of agents) {
    const byDay = new Map(daysEndingOn(dayInZone(nowMs, agent.timeZone), days).map((day) => [day, { amount: 0n, count: 0 }]))
    sums.set(agent.handle, { timeZone: agent.timeZone, byDay })
  }
  let complete = true
  if (sums.size > 0) {
    const since = encodeURIComponent(new Date(nowMs - (days * 24 + 1) * hourMs).toISOString())
    const read = await readPages<Transfer>(`/v1/transfers?include_agents=true&from=${since}`)
    complete = read.complete
    for (const transfer of read.entries) {
      const agent = sums.get(transfer.from)
      if (agent === undefined || transfer.status === "failed" || transfer.asset !== "USDG") continue
      const sum = agent.byDay.get(dayInZone(transfer.created_at, agent.timeZone))
      if (sum === undefined) continue
      const opened = await openTransfer(keyPair, transfer.transfer_id).catch(() => undefined)
      if (opened === undefined) {
        complete = false
        continue
      }
      sum.amount += opened.amount
      sum.count += 1
    }
  }
  const result = new Map<string, AgentSpending>()
  for (const [handle, { timeZone, byDay }] of sums) {
    const series = [...byDay].map(([day, sum]) => ({ day, amount: sum.amount, count: sum.count }))
    const last = series.at(-1) ?? { day: dayInZone(nowMs, timeZone), amount: 0n, count: 0 }
    result.set(handle, { days: series, today: { ...last, timeZone, complete } })
  }
  return result
}

/** Today's USDG sent by each agent, as its daily limit counts it. */
export const sentToday = async (
  keyPair: EncryptionKey.KeyPair,
  agents: ReadonlyArray<{ readonly handle: string; readonly timeZone: string }>,
  nowMs: number
): Promise<ReadonlyMap<string, SentToday>> =>
  new Map([...await agentSpending(keyPair, agents, nowMs, 1)].map(([handle, spending]) => [handle, spending.today]))
