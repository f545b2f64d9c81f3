/**
 * The activity list (`activity.ts`): the holder's transfers, its agents' (marked) and its faucet
 * grants in one list, searched, filtered, sorted and paged in the page, the view kept in the
 * address's fragment; the balance set against what the list adds up to; a CSV export written in
 * the page. Live: a transfer's event refreshes the list and the reconciliation.
 */
import type { EncryptionKey } from "@pps/crypto"
import { Amount } from "@pps/sdk"
import { type ReactNode, useEffect, useState } from "react"
import type { PageProps } from "../App.tsx"
import type { Session } from "../api.ts"
import {
  type Activity,
  csvOf,
  defaultView,
  type Entry,
  fragmentOfView,
  loadActivity,
  loadBalances,
  pagesMax,
  pageSize,
  reconcile,
  type Reconciliation,
  signedAmount,
  type View,
  viewEntries,
  viewOfFragment
} from "../activity.ts"
import { useLive } from "../live.tsx"
import { signedDecimal, unitsOf } from "../opened.ts"
import { formatInZone, useTimeZone, When } from "../time.tsx"
import { DataTable, Empty, Encrypted, ErrorNote, Loading, useLoad } from "../ui.tsx"
import { TxHash } from "./TransferDetail.tsx"

/** Rows on one page of the list. */
const rowsPerPage = 25

/** A signed amount as the list writes it: `+100 USDG`, `−7.654321 USDG` (a real minus sign). */
export const signedText = (asset: string, amount: bigint): string => `${signedDecimal(asset, amount, { minus: "\u2212", plus: "+" })} ${asset}`

const what = (entry: Entry): ReactNode => {
  if (entry.kind === "grant") return "Faucet grant"
  const verb = entry.direction === "sent" ? "Sent" : "Received"
  return entry.agent === undefined ? verb : <>{verb} <span className="tag" data-testid="agent-tag">agent {entry.agent}</span></>
}

/** Entries as rows: each transfer links to its detail; a grant shows its transaction. */
export const ActivityTable = ({ entries, session, navigate, caption }: {
  readonly entries: ReadonlyArray<Entry>
  readonly session: Session
  readonly navigate: (path: string) => void
  readonly caption: string
}) => (
  <DataTable caption={caption} rows={entries} rowKey={(entry) => entry.id} rowTestId={(entry) => `activity-${entry.id}`} columns={[
    {
      label: "When",
      cell: (entry) => entry.kind === "grant" ? <When iso={entry.at} testId="grant-row-time" /> : (
        <a href={`/dashboard/transfers/${entry.id}`} onClick={(event) => { event.preventDefault(); navigate(`/transfers/${entry.id}`) }}>
          <When iso={entry.at} testId="transfer-row-time" />
        </a>
      )
    },
    { label: "What", cell: what },
    { label: "Counterparty", cell: (entry) => entry.kind === "grant" ? <>Test faucet · <TxHash session={session} txHash={entry.grant.tx_hash} /></> : entry.counterparty },
    {
      label: "Amount",
      cell: (entry) => {
        const signed = signedAmount(entry)
        return signed === undefined ? <Encrypted /> : <span data-testid="activity-amount">{signedText(signed.asset, signed.amount)}</span>
      }
    },
    { label: "Status", cell: (entry) => {
      const status = entry.kind === "grant" ? "confirmed" : entry.transfer.status
      return <span className={`status status-${status}`}>{status}</span>
    } }
  ]} />
)

/** The balance against what the list adds up to, for each asset the holder has a balance in. */
const ReconciliationNote = ({ line, complete }: { readonly line: Reconciliation; readonly complete: boolean }) => {
  const text = (amount: bigint) => `${Amount.format(line.asset, amount)} ${line.asset}`
  const state = !complete || line.unopened > 0 ? "incomplete" : line.listed === line.balance ? "matches" : "differs"
  return (
    <div className={`reconciliation reconciliation-${state}`} data-testid={`reconciliation-${line.asset}`} data-state={state}>
      <p className="figure">Balance {text(line.balance)}</p>
      <p data-testid={`reconciliation-sum-${line.asset}`}>
        {`The list adds up to ${text(line.listed)}: ${text(line.granted)} from the faucet + ${text(line.received)} received − ${text(line.sent)} sent (confirmed).`}
      </p>
      <p>
        {state === "matches" && <strong>✓ It equals the balance.</strong>}
        {state === "differs" && <strong>{`It differs from the balance by ${signedText(line.asset, line.balance - line.listed)}: a credit the list cannot show (a deposit from outside the service, D39), or a transfer confirmed on chain a moment before the service recorded it.`}</strong>}
        {state === "incomplete" && <strong>{!complete
          ? `More history exists than the page reads (the latest ${pagesMax * pageSize} transfers): it cannot check the balance.`
          : `${line.unopened} of your transfers could not be opened with your key: the page cannot check the balance.`}</strong>}
      </p>
      {line.pendingCount > 0 && <p className="muted">{`${line.pendingCount} pending (${signedText(line.asset, line.pending)}) not in the balance until confirmed.`}</p>}
      <p className="muted">Your agents' transfers move their balances, not yours, and are not counted.</p>
    </div>
  )
}

/** Starts a download of `text` as a file made in the page (a blob: URL, revoked after). */
const download = (name: string, text: string) => {
  const url = URL.createObjectURL(new Blob([text], { type: "text/csv;charset=utf-8" }))
  const link = document.createElement("a")
  link.href = url
  link.download = name
  link.click()
  setTimeout(() => URL.revokeObjectURL(url), 0)
}

/** The view in the address's fragment, read at the start and written back on every change. */
const useView = (): readonly [View, (change: Partial<View>) => void] => {
  const [view, setView] = useState<View>(() => viewOfFragment(globalThis.location.hash))
  useEffect(() => {
    const onHash = () => setView(viewOfFragment(globalThis.location.hash))
    globalThis.addEventListener("hashchange", onHash)
    return () => globalThis.removeEventListener("hashchange", onHash)
  }, [])
  const change = (next: Partial<View>) => {
    // Any change but paging goes back to the first page.
    const updated = { ...view, ...next, page: next.page ?? 1 }
    setView(updated)
    globalThis.history.replaceState(globalThis.history.state, "", `${globalThis.location.pathname}${fragmentOfView(updated)}`)
  }
  return [view, change] as const
}

const Controls = ({ view, change, onExport }: { readonly view: View; readonly change: (next: Partial<View>) => void; readonly onExport: (() => void) | undefined }) => (
  <div className="controls" role="search" aria-label="Activity">
    <div>
      <label htmlFor="activity-search">Search (counterparty, id or memo)</label>
      <input id="activity-search" type="search" value={view.q} onChange={(event) => change({ q: event.target.value })} autoComplete="off" />
    </div>
    <div>
      <label htmlFor="activity-kind">Show</label>
      <select id="activity-kind" value={view.kind} onChange={(event) => change({ kind: event.target.value as View["kind"] })}>
        <option value="all">Everything</option>
        <option value="mine">Your transfers</option>
        <option value="agents">Your agents' transfers</option>
        <option value="grants">Faucet grants</option>
      </select>
    </div>
    <div>
      <label htmlFor="status-filter">Status</label>
      <select id="status-filter" value={view.status} onChange={(event) => change({ status: event.target.value as View["status"] })}>
        <option value="">Any</option>
        <option value="pending">pending</option>
        <option value="confirmed">confirmed</option>
        <option value="failed">failed</option>
      </select>
    </div>
    <div>
      <label htmlFor="activity-from">From (day)</label>
      <input id="activity-from" type="date" value={view.from} onChange={(event) => change({ from: event.target.value })} />
    </div>
    <div>
      <label htmlFor="activity-to">To (day)</label>
      <input id="activity-to" type="date" value={view.to} onChange={(event) => change({ to: event.target.value })} />
    </div>
    <div>
      <label htmlFor="activity-sort">Order</label>
      <select id="activity-sort" value={view.sort} onChange={(event) => change({ sort: event.target.value as View["sort"] })}>
        <option value="newest">Newest first</option>
        <option value="oldest">Oldest first</option>
        <option value="largest">Largest amount first</option>
        <option value="smallest">Smallest amount first</option>
      </select>
    </div>
    <div className="control-actions">
      <button type="button" className="secondary" onClick={() => change(defaultView)}>Clear</button>
      <button type="button" className="secondary" disabled={onExport === undefined} onClick={onExport}>Export CSV</button>
    </div>
  </div>
)

interface Loaded {
  readonly activity: Activity
  readonly reconciliations: ReadonlyArray<Reconciliation>
}

const loadAll = async (session: Session, keyPair: EncryptionKey.KeyPair | undefined): Promise<Loaded> => {
  const [activity, balances] = await Promise.all([loadActivity(session.handle, session.mode, keyPair), loadBalances(keyPair)])
  const reconciliations = balances.flatMap((line) => {
    if (line.amount === undefined) return []
    const reconciliation = reconcile(activity.entries, line.asset, unitsOf(line.asset, line.amount))
    // An asset never held and never moved says nothing.
    return reconciliation.balance === 0n && reconciliation.listed === 0n && reconciliation.pendingCount === 0 ? [] : [reconciliation]
  })
  return { activity, reconciliations }
}

export const ActivityList = ({ session, keyPair, navigate, refreshKey }: PageProps & { readonly refreshKey: number }) => {
  const [view, change] = useView()
  const { zone } = useTimeZone()
  const loaded = useLoad(() => loadAll(session, keyPair), [session.handle, session.mode, keyPair, refreshKey])
  // A transfer made, confirmed or failed (here, elsewhere, by an agent): read again, quietly.
  useLive((signal) => {
    if (signal.kind === "connected" || signal.event.event.startsWith("transfer.")) loaded.refresh()
  })
  const value = loaded.value
  const shown = value === undefined ? [] : viewEntries(value.activity.entries, view, zone)
  const pages = Math.max(1, Math.ceil(shown.length / rowsPerPage))
  const page = Math.min(view.page, pages)
  const onExport = value === undefined ? undefined : () => {
    const day = new Date().toISOString().slice(0, 10)
    download(`activity-${session.handle.replace(/^@/, "")}-${day}.csv`, csvOf(shown, (iso) => formatInZone(iso, zone)))
  }
  return (
    <section aria-labelledby="activity-title">
      <h2 id="activity-title">Activity</h2>
      {loaded.loading && value === undefined && <Loading what="your activity" />}
      <ErrorNote error={loaded.error} />
      {keyPair === undefined
        ? <p className="muted">Unlock your key in Settings to read amounts and memos, search memos, and check the list against your balance.</p>
        : value?.reconciliations.map((line) => <ReconciliationNote key={line.asset} line={line} complete={value.activity.complete} />)}
      <Controls view={view} change={change} onExport={onExport} />
      {value !== undefined && (shown.length === 0
        ? <Empty>No activity matches.</Empty>
        : (
          <>
            <p className="muted" data-testid="activity-count">{`${shown.length} of ${value.activity.entries.length} shown`}{keyPair === undefined ? "" : "; memos and amounts were opened in this page."}</p>
            <ActivityTable entries={shown.slice((page - 1) * rowsPerPage, page * rowsPerPage)} session={session} navigate={navigate} caption="Activity" />
          </>
        ))}
      {pages > 1 && (
        <div className="row">
          <button type="button" className="secondary" disabled={page <= 1} onClick={() => change({ page: page - 1 })}>Previous</button>
          <span>{`Page ${page} of ${pages}`}</span>
          <button type="button" className="secondary" disabled={page >= pages} onClick={() => change({ page: page + 1 })}>Next</button>
        </div>
      )}
    </section>
  )
}
