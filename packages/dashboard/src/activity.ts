/**
 * The holder's activity, and how it adds up to the balance (issue 46, item 2).
 *
 * One list of what moved money: the account's transfers, its agents' transfers (marked: they
 * move the agents' balances, not the holder's) and its faucet grants (D50). Amounts and memos
 * are opened here with the holder's key (`opened.ts`); search, sort, date range and the CSV export
 * work on what the page opened, so a memo is searched in the page and never sent to the server.
 *
 * Reconciliation: the balance (proven, D20) is the chain's confirmed ciphertext, so it equals the
 * grants plus the confirmed transfers received less those sent, per asset. Pending transfers are
 * not in it yet, failed ones never; a standard (non-confidential) transfer received pays public
 * tokens, outside the confidential balance. A credit the list cannot show (a shield by someone
 * else, D39) leaves a difference, which the page names instead of hiding.
 */
import type { EncryptionKey } from "@pps/crypto"
import { Amount } from "@pps/sdk"
import { call } from "./api.ts"
import { type Opened, openTransfer, signedDecimal, unitsOf } from "./opened.ts"
import type { Transfer } from "./pages/TransferDetail.tsx"
import { ppsFor } from "./pps.ts"
import { dayInZone } from "./time.tsx"

/** The API's largest page (D16): fewest requests for a history. */
export const pageSize = 100
/**
 * A bound on what the page reads and opens (1,000 transfers, each opened here): past it, the
 * list says it is incomplete and the reconciliation is not claimed.
 */
export const pagesMax = 10

interface Page<A> {
  readonly data: ReadonlyArray<A>
  readonly has_more: boolean
}

/** Every entry of a paged list (`path` has its query, without limit and offset), up to `pagesMax` pages. */
export const readPages = async <A>(path: string): Promise<{ readonly entries: ReadonlyArray<A>; readonly complete: boolean }> => {
  const entries: Array<A> = []
  const separator = path.includes("?") ? "&" : "?"
  for (let index = 0; index < pagesMax; index++) {
    const page = await call<Page<A>>("GET", `${path}${separator}limit=${pageSize}&offset=${index * pageSize}`)
    entries.push(...page.data)
    if (!page.has_more) return { entries, complete: true }
  }
  return { entries, complete: false }
}

/** A faucet grant as `GET /v1/test/faucet/grants` lists it (D50). */
export interface Grant {
  readonly grant_id: string
  readonly asset: string
  readonly amount: string
  readonly tx_hash: string
  readonly created_at: string
}

/** One line of the activity. */
export type Entry =
  | {
    readonly kind: "transfer"
    readonly id: string
    readonly at: string
    readonly transfer: Transfer
    /** The agent whose transfer this is (the holder is no party to it), or undefined for the holder's own. */
    readonly agent: string | undefined
    /** From the holder's side (or the agent's, for an agent's transfer). */
    readonly direction: "sent" | "received"
    readonly counterparty: string
    /** Opened here; undefined without the key, or when it does not open. */
    readonly opened: Opened | undefined
  }
  | { readonly kind: "grant"; readonly id: string; readonly at: string; readonly grant: Grant; readonly amount: bigint }

/** The entry's asset and signed amount (received and granted positive), when known. */
export const signedAmount = (entry: Entry): { readonly asset: string; readonly amount: bigint } | undefined => {
  if (entry.kind === "grant") return { asset: entry.grant.asset, amount: entry.amount }
  if (entry.opened === undefined) return undefined
  return { asset: entry.opened.asset, amount: entry.direction === "sent" ? -entry.opened.amount : entry.opened.amount }
}

/** An entry as one transfer of `handle`'s or one of its agents'. */
const transferEntry = (transfer: Transfer, handle: string, opened: Opened | undefined): Entry => {
  const mine = transfer.from === handle || transfer.to === handle
  const agent = mine ? undefined : transfer.from.startsWith(`${handle}/`) ? transfer.from : transfer.to
  const direction = mine ? (transfer.from === handle ? "sent" : "received") : (transfer.from === agent ? "sent" : "received")
  return {
    kind: "transfer",
    id: transfer.transfer_id,
    at: transfer.created_at,
    transfer,
    agent,
    direction,
    counterparty: direction === "sent" ? transfer.to : transfer.from,
    opened
  }
}

/**
 * Whether the holder can open a transfer's amount: a standard transfer received is checked
 * against the amount its transaction paid in public, which exists once it is confirmed (D62);
 * before that the SDK refuses it.
 */
const opens = (transfer: Transfer, handle: string) => {
  const entry = transferEntry(transfer, handle, undefined)
  return entry.kind === "transfer" && (transfer.confidential || entry.direction === "sent" || transfer.status === "confirmed")
}

export interface Activity {
  /** Newest first. */
  readonly entries: ReadonlyArray<Entry>
  /** False when more history exists than the page reads (`pagesMax`). */
  readonly complete: boolean
}

/**
 * The holder's activity: its and its agents' transfers, and (in test mode) its faucet grants,
 * each transfer opened with the key when there is one.
 */
export const loadActivity = async (handle: string, mode: "test" | "live", keyPair: EncryptionKey.KeyPair | undefined): Promise<Activity> => {
  const [transfers, grants] = await Promise.all([
    readPages<Transfer>("/v1/transfers?include_agents=true"),
    mode === "test" ? readPages<Grant>("/v1/test/faucet/grants") : Promise.resolve({ entries: [], complete: true })
  ])
  return { entries: await entriesOf(handle, keyPair, transfers.entries, grants.entries), complete: transfers.complete && grants.complete }
}

/** Transfers and grants as entries, newest first, each transfer opened with the key when it opens. */
const entriesOf = async (
  handle: string,
  keyPair: EncryptionKey.KeyPair | undefined,
  transfers: ReadonlyArray<Transfer>,
  grants: ReadonlyArray<Grant>
): Promise<Array<Entry>> => {
  const entries: Array<Entry> = grants.map((grant) => ({
    kind: "grant",
    id: grant.grant_id,
    at: grant.created_at,
    grant,
    amount: unitsOf(grant.asset, grant.amount)
  }))
  for (const transfer of transfers) {
    const opened = keyPair !== undefined && opens(transfer, handle)
      ? await openTransfer(keyPair, transfer.transfer_id).catch(() => undefined)
      : undefined
    entries.push(transferEntry(transfer, handle, opened))
  }
  return entries.sort((a, b) => (a.at === b.at ? (a.id < b.id ? 1 : -1) : a.at < b.at ? 1 : -1))
}

/** How the list adds up against one asset's balance. */
export interface Reconciliation {
  readonly asset: string
  /** The proven balance, base units. */
  readonly balance: bigint
  readonly granted: bigint
  readonly received: bigint
  readonly sent: bigint
  /** Granted + received − sent: what the list says the balance is. */
  readonly listed: bigint
  /** Transfers not yet confirmed (not in the balance), signed. */
  readonly pending: bigint
  readonly pendingCount: number
  /** The holder's transfers whose amount the page could not open: the sum cannot be claimed. */
  readonly unopened: number
}

/** Adds the holder's own confirmed entries of `asset` (agents' move the agents' balances). */
export const reconcile = (entries: ReadonlyArray<Entry>, asset: string, balance: bigint): Reconciliation => {
  let granted = 0n
  let received = 0n
  let sent = 0n
  let pending = 0n
  let pendingCount = 0
  let unopened = 0
  for (const entry of entries) {
    if (entry.kind === "grant") {
      if (entry.grant.asset === asset) granted += entry.amount
      continue
    }
    const { transfer } = entry
    if (entry.agent !== undefined || transfer.asset !== asset || transfer.status === "failed") continue
    // A standard transfer received pays public tokens: not the confidential balance.
    if (entry.direction === "received" && !transfer.confidential) continue
    if (entry.opened === undefined) {
      unopened += 1
      continue
    }
    const amount = entry.opened.amount
    if (transfer.status === "pending") {
      pending += entry.direction === "sent" ? -amount : amount
      pendingCount += 1
    } else if (entry.direction === "sent") {
      sent += amount
    } else {
      received += amount
    }
  }
  return { asset, balance, granted, received, sent, listed: granted + received - sent, pending, pendingCount, unopened }
}

/** What the list shows: a search, a kind, a status, a date range (days in the holder's zone) and an order. */
export interface View {
  readonly q: string
  readonly kind: "all" | "mine" | "agents" | "grants"
  readonly status: "" | "pending" | "confirmed" | "failed"
  /** `YYYY-MM-DD`, inclusive; "" for no bound. */
  readonly from: string
  readonly to: string
  readonly sort: "newest" | "oldest" | "largest" | "smallest"
  /** 1-based. */
  readonly page: number
}

export const defaultView: View = { q: "", kind: "all", status: "", from: "", to: "", sort: "newest", page: 1 }

const kinds: ReadonlyArray<View["kind"]> = ["all", "mine", "agents", "grants"]
const statuses: ReadonlyArray<View["status"]> = ["", "pending", "confirmed", "failed"]
const sorts: ReadonlyArray<View["sort"]> = ["newest", "oldest", "largest", "smallest"]
const dayPattern = /^\d{4}-\d\d-\d\d$/

const oneOf = <A extends string>(allowed: ReadonlyArray<A>, value: string | null, fallback: A): A =>
  allowed.find((candidate) => candidate === value) ?? fallback

/**
 * The view kept in the address's fragment (`#q=…&sort=…`): it survives a reload and can be
 * shared, and a fragment is never sent to a server, so a memo searched for stays in the page.
 */
export const viewOfFragment = (fragment: string): View => {
  const params = new URLSearchParams(fragment.replace(/^#/, ""))
  const day = (name: string) => {
    const value = params.get(name) ?? ""
    return dayPattern.test(value) ? value : ""
  }
  const page = Number.parseInt(params.get("page") ?? "1", 10)
  return {
    q: params.get("q") ?? "",
    kind: oneOf(kinds, params.get("kind"), "all"),
    status: oneOf(statuses, params.get("status"), ""),
    from: day("from"),
    to: day("to"),
    sort: oneOf(sorts, params.get("sort"), "newest"),
    page: Number.isInteger(page) && page >= 1 ? page : 1
  }
}

/** The fragment of a view: only what differs from the default. */
export const fragmentOfView = (view: View): string => {
  const params = new URLSearchParams()
  for (const key of Object.keys(defaultView) as Array<keyof View>) {
    if (view[key] !== defaultView[key]) params.set(key, String(view[key]))
  }
  const text = params.toString()
  return text === "" ? "" : `#${text}`
}

/** Whether an entry answers a search: its counterparty, agent, ids, hash or memo (opened here). */
const matches = (entry: Entry, q: string): boolean => {
  const needle = q.trim().toLowerCase()
  if (needle === "") return true
  const texts = entry.kind === "grant"
    ? [entry.id, entry.grant.tx_hash, "faucet"]
    : [entry.id, entry.counterparty, entry.agent ?? "", entry.transfer.tx_hash ?? "", entry.opened?.memo ?? ""]
  return texts.some((text) => text.toLowerCase().includes(needle))
}

const statusOf = (entry: Entry) => entry.kind === "grant" ? "confirmed" : entry.transfer.status

/** The entries the view shows, in its order (before paging). */
export const viewEntries = (entries: ReadonlyArray<Entry>, view: View, zone: string): ReadonlyArray<Entry> => {
  const shown = entries.filter((entry) => {
    if (view.kind === "mine" && !(entry.kind === "transfer" && entry.agent === undefined)) return false
    if (view.kind === "agents" && !(entry.kind === "transfer" && entry.agent !== undefined)) return false
    if (view.kind === "grants" && entry.kind !== "grant") return false
    if (view.status !== "" && statusOf(entry) !== view.status) return false
    const day = dayInZone(entry.at, zone)
    if ((view.from !== "" && day < view.from) || (view.to !== "" && day > view.to)) return false
    return matches(entry, view.q)
  })
  if (view.sort === "newest") return shown
  if (view.sort === "oldest") return [...shown].reverse()
  // By size (what moved, whatever the direction); amounts not opened go last either way.
  const size = (entry: Entry) => {
    const signed = signedAmount(entry)
    return signed === undefined ? undefined : signed.amount < 0n ? -signed.amount : signed.amount
  }
  return [...shown].sort((a, b) => {
    const [x, y] = [size(a), size(b)]
    if (x === y) return 0
    if (x === undefined) return 1
    if (y === undefined) return -1
    return (view.sort === "largest" ? x > y : x < y) ? -1 : 1
  })
}

/** The balances: proven amounts with the key (D20), else only whether each is zero (D19). */
export interface BalanceLine {
  readonly asset: string
  /** The decimal amount, when proven with the key. */
  readonly amount: string | undefined
  readonly nonZero: boolean
}

export const loadBalances = async (keyPair: EncryptionKey.KeyPair | undefined): Promise<ReadonlyArray<BalanceLine>> => {
  if (keyPair === undefined) {
    const flags = await call<{ readonly balances: ReadonlyArray<{ readonly asset: string; readonly non_zero: boolean }> }>("GET", "/v1/accounts/me/balances")
    return flags.balances.map((b) => ({ asset: b.asset, amount: undefined, nonZero: b.non_zero }))
  }
  const read = await ppsFor(keyPair).balances.read()
  return read.balances.map((b) => ({ asset: b.asset, amount: b.amount, nonZero: b.amount !== "0" }))
}

/** The latest `count` entries (transfers, the agents' too, and grants): what the Overview shows. */
export const loadRecent = async (handle: string, mode: "test" | "live", keyPair: EncryptionKey.KeyPair | undefined, count: number): Promise<ReadonlyArray<Entry>> => {
  const [transfers, grants] = await Promise.all([
    call<Page<Transfer>>("GET", `/v1/transfers?include_agents=true&limit=${count}`),
    mode === "test" ? call<Page<Grant>>("GET", `/v1/test/faucet/grants?limit=${count}`) : Promise.resolve({ data: [], has_more: false })
  ])
  return (await entriesOf(handle, keyPair, transfers.data, grants.data)).slice(0, count)
}

// ---------------------------------------------------------------------------------------------
// The CSV export: written here from what the page opened, never by the server
// ---------------------------------------------------------------------------------------------

/**
 * A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. Free text that
 * a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, a tab or a carriage return first: a
 * memo is written by the other party) is prefixed with `'` so that it stays text.
 */
const csvField = (value: string, text: boolean): string => {
  const safe = text && /^[=+\-@\t\r]/.test(value) ? `'${value}` : value
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll("\"", "\"\"")}"` : safe
}

export const csvHeader = ["created_at_utc", "created_at_local", "type", "agent", "direction", "counterparty", "amount", "asset", "status", "memo", "id", "tx_hash"] as const

/** The entries as CSV, in the order given; amounts signed (received and granted positive), empty when not opened. */
export const csvOf = (entries: ReadonlyArray<Entry>, formatLocal: (iso: string) => string): string => {
  const lines = [csvHeader.join(",")]
  for (const entry of entries) {
    const signed = signedAmount(entry)
    const cells: ReadonlyArray<readonly [string, boolean]> = entry.kind === "grant"
      ? [
        [entry.at, false], [formatLocal(entry.at), false], ["faucet grant", false], ["", false], ["received", false], ["faucet", false],
        [Amount.format(entry.grant.asset, entry.amount), false], [entry.grant.asset, false], ["confirmed", false], ["", true],
        [entry.id, false], [entry.grant.tx_hash, false]
      ]
      : [
        [entry.at, false], [formatLocal(entry.at), false], [entry.agent === undefined ? "transfer" : "agent transfer", false],
        // Handles and addresses have the API's forms (D10, D15): only the memo is free text.
        [entry.agent ?? "", false], [entry.direction, false], [entry.counterparty, false],
        [signed === undefined ? "" : signedDecimal(signed.asset, signed.amount, { minus: "-", plus: "" }), false], [entry.transfer.asset, false],
        [entry.transfer.status, false], [entry.opened?.memo ?? "", true], [entry.id, false], [entry.transfer.tx_hash ?? "", false]
      ]
    lines.push(cells.map(([value, text]) => csvField(value, text)).join(","))
  }
  return `${lines.join("\r\n")}\r\n`
}
