/**
 * Transfers: the list with filters, one transfer with its amount and memo
 * opened here, and the send form, which seals amount and memo here before
 * anything leaves the page.
 */
import type { EncryptionKey } from "@pps/crypto"
import { Amount, type PpsTypes } from "@pps/sdk"
import { type FormEvent, useState } from "react"
import type { PageProps } from "../App.tsx"
import { call, ppsFor } from "../api.ts"
import { Empty, Encrypted, ErrorNote, Loading, Page, useLoad } from "../ui.tsx"

/** D13's transfer, as the SDK reads it. */
export type Transfer = PpsTypes.Transfer

export interface TransferPage {
  readonly data: ReadonlyArray<Transfer>
  readonly has_more: boolean
}

export const TransferTable = ({ transfers, amounts, navigate }: {
  readonly transfers: ReadonlyArray<Transfer>
  readonly amounts: ReadonlyMap<string, string>
  readonly navigate: (path: string) => void
}) => (
  <table>
    <caption className="visually-hidden">Transfers, newest first</caption>
    <thead>
      <tr><th scope="col">When</th><th scope="col">Direction</th><th scope="col">Counterparty</th><th scope="col">Amount</th><th scope="col">Status</th></tr>
    </thead>
    <tbody>
      {transfers.map((t) => (
        <tr key={t.transfer_id}>
          <td>
            <a href={`/dashboard/transfers/${t.transfer_id}`} onClick={(event) => { event.preventDefault(); navigate(`/transfers/${t.transfer_id}`) }}>
              {new Date(t.created_at).toLocaleString()}
            </a>
          </td>
          <td>{t.direction}</td>
          <td>{t.direction === "sent" ? t.to : t.from}</td>
          <td>{amounts.get(t.transfer_id) ?? <Encrypted />}</td>
          <td><span className={`status status-${t.status}`}>{t.status}</span></td>
        </tr>
      ))}
    </tbody>
  </table>
)

/**
 * The amounts of confidential transfers, opened here with the holder's key (none without it).
 * One that does not open (a standard transfer's, or a failure) is left out and shows as encrypted.
 */
export const openAmounts = async (keyPair: EncryptionKey.KeyPair | undefined, transfers: ReadonlyArray<Transfer>): Promise<ReadonlyMap<string, string>> => {
  const amounts = new Map<string, string>()
  if (keyPair === undefined) return amounts
  const pps = ppsFor(keyPair)
  for (const transfer of transfers) {
    if (!transfer.confidential) continue
    const opened = await pps.transfers.decrypt(transfer.transfer_id).catch(() => undefined)
    if (opened !== undefined) amounts.set(transfer.transfer_id, `${Amount.format(opened.asset, opened.amount)} ${opened.asset}`)
  }
  return amounts
}

const statuses = ["", "pending", "confirmed", "failed"] as const

const TransferList = ({ navigate, keyPair, refreshKey }: PageProps & { readonly refreshKey: number }) => {
  const [status, setStatus] = useState<(typeof statuses)[number]>("")
  const [offset, setOffset] = useState(0)
  const pageSize = 20
  const list = useLoad(async () => {
    const page = await call<TransferPage>("GET", `/v1/transfers?limit=${pageSize}&offset=${offset}${status === "" ? "" : `&status=${status}`}`)
    return { page, amounts: await openAmounts(keyPair, page.data) }
  }, [status, offset, refreshKey, keyPair])
  return (
    <>
      <div className="row">
        <label htmlFor="status-filter">Status</label>
        <select id="status-filter" value={status} onChange={(event) => { setOffset(0); setStatus(event.target.value as (typeof statuses)[number]) }}>
          {statuses.map((s) => <option key={s} value={s}>{s === "" ? "Any" : s}</option>)}
        </select>
      </div>
      {list.loading && <Loading what="transfers" />}
      <ErrorNote error={list.error} />
      {list.value !== undefined && (list.value.page.data.length === 0
        ? <Empty>No transfers match.</Empty>
        : <TransferTable transfers={list.value.page.data} amounts={list.value.amounts} navigate={navigate} />)}
      <div className="row">
        <button type="button" className="secondary" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - pageSize))}>Newer</button>
        <button type="button" className="secondary" disabled={list.value?.page.has_more !== true} onClick={() => setOffset(offset + pageSize)}>Older</button>
      </div>
      <p className="muted">{keyPair === undefined ? "Unlock your key in Settings to read amounts; open a transfer for its memo." : "Open a transfer for its memo."}</p>
    </>
  )
}

const TransferDetail = ({ transferId, keyPair, navigate }: PageProps & { readonly transferId: string }) => {
  const transfer = useLoad(() => call<Transfer>("GET", `/v1/transfers/${encodeURIComponent(transferId)}`), [transferId])
  const opened = useLoad(async () => {
    if (keyPair === undefined) return undefined
    return ppsFor(keyPair).transfers.decrypt(transferId)
  }, [transferId, keyPair])
  return (
    <>
      <p><a href="/dashboard/transfers" onClick={(event) => { event.preventDefault(); navigate("/transfers") }}>← All transfers</a></p>
      {transfer.loading && <Loading what="the transfer" />}
      <ErrorNote error={transfer.error} />
      {transfer.value !== undefined && (
        <dl className="detail">
          <dt>Transfer</dt><dd><code>{transfer.value.transfer_id}</code></dd>
          <dt>Status</dt><dd>{transfer.value.status}</dd>
          <dt>From</dt><dd>{transfer.value.from}</dd>
          <dt>To</dt><dd>{transfer.value.to}</dd>
          <dt>Amount</dt>
          <dd data-testid="transfer-amount">
            {opened.value !== undefined ? `${Amount.format(opened.value.asset, opened.value.amount)} ${opened.value.asset}` : opened.loading && keyPair !== undefined ? "opening…" : <Encrypted />}
          </dd>
          <dt>Memo</dt>
          <dd data-testid="transfer-memo">{opened.value !== undefined ? (opened.value.memo === "" ? "(none)" : opened.value.memo) : <Encrypted />}</dd>
          <dt>Confidential</dt><dd>{transfer.value.confidential ? "yes" : "no"}</dd>
          <dt>Transaction</dt><dd><code>{transfer.value.tx_hash ?? "not yet on chain"}</code></dd>
          <dt>Created</dt><dd>{transfer.value.created_at}</dd>
          <dt>Confirmed</dt><dd>{transfer.value.confirmed_at ?? "not yet"}</dd>
        </dl>
      )}
      <ErrorNote error={opened.error} />
    </>
  )
}

const SendForm = ({ keyPair, onSent }: PageProps & { readonly onSent: () => void }) => {
  const [to, setTo] = useState("")
  const [amount, setAmount] = useState("")
  const [memo, setMemo] = useState("")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [result, setResult] = useState<string | undefined>(undefined)
  if (keyPair === undefined) {
    return <p className="muted">To send, unlock your encryption key in Settings: the amount and memo are sealed in this page with it.</p>
  }
  const send = async (event: FormEvent) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    setResult(undefined)
    try {
      const sent = await ppsFor(keyPair).transfers.create({ to, amount, ...(memo === "" ? {} : { memo }) })
      // An agent's transfer above its approval threshold is held for its owner (D26).
      setResult(sent.kind === "held" ? `Held for approval (${sent.held.transaction_id}).` : `Transfer ${sent.transfer.transfer_id} is ${sent.transfer.status}.`)
      setAmount("")
      setMemo("")
      onSent()
    } catch (caught) {
      setError(caught)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form onSubmit={(event) => void send(event)} aria-labelledby="send-title" className="panel">
      <h2 id="send-title">Send USDG</h2>
      <label htmlFor="send-to">Recipient (@handle or 0x address)</label>
      <input id="send-to" required value={to} onChange={(event) => setTo(event.target.value)} autoComplete="off" />
      <label htmlFor="send-amount">Amount (USDG)</label>
      <input id="send-amount" required inputMode="decimal" value={amount} onChange={(event) => setAmount(event.target.value)} autoComplete="off" />
      <label htmlFor="send-memo">Memo (optional, encrypted)</label>
      <input id="send-memo" value={memo} maxLength={512} onChange={(event) => setMemo(event.target.value)} autoComplete="off" />
      <button type="submit" disabled={busy}>{busy ? "Sealing and sending…" : "Send"}</button>
      <ErrorNote error={error} />
      {result !== undefined && <p className="success" role="status">{result}</p>}
    </form>
  )
}

export const Transfers = (props: PageProps & { readonly transferId: string | undefined }) => {
  const [refreshKey, setRefreshKey] = useState(0)
  return (
    <Page title="Transfers">
      {props.transferId !== undefined && props.transferId !== ""
        ? <TransferDetail {...props} transferId={props.transferId} />
        : (
          <>
            <SendForm {...props} onSent={() => setRefreshKey((k) => k + 1)} />
            <TransferList {...props} refreshKey={refreshKey} />
          </>
        )}
    </Page>
  )
}
