/**
 * One transfer: its amount and memo opened here with the holder's key, its ids and hash with
 * copy buttons (the hash linked to the deployment's chain explorer when one is configured), and a
 * timeline (created, submitted to the chain, confirmed or failed) that follows the live event
 * stream, so a pending transfer turns confirmed on screen without a reload.
 */
import type { PpsTypes } from "@pps/sdk"
import type { ReactNode } from "react"
import type { PageProps } from "../App.tsx"
import { call, type Session } from "../api.ts"
import { concernsTransfer, seenEvents, useLive } from "../live.tsx"
import { amountText, type Opened, openTransfer } from "../opened.ts"
import { When } from "../time.tsx"
import { Copyable, CopyButton, Encrypted, ErrorNote, Loading, useLoad } from "../ui.tsx"

/** D13's transfer, as the SDK reads it. */
export type Transfer = PpsTypes.Transfer

/** Reads one transfer now, and again whenever the stream says it changed. */
export const useLiveTransfer = (transferId: string) => {
  const transfer = useLoad(() => call<Transfer>("GET", `/v1/transfers/${encodeURIComponent(transferId)}`), [transferId])
  useLive((signal) => {
    if (concernsTransfer(signal, transferId)) transfer.refresh()
  })
  return transfer
}

/** The explorer's page of a transaction, when the deployment names an explorer. */
const explorerUrl = (session: Session, txHash: string): string | undefined =>
  session.explorer_tx_url === null ? undefined : session.explorer_tx_url.replace("{tx_hash}", encodeURIComponent(txHash))

/** A transaction hash: linked to the chain explorer when one is configured, with its copy button. */
export const TxHash = ({ session, txHash }: { readonly session: Session; readonly txHash: string }) => {
  const url = explorerUrl(session, txHash)
  return (
    <span className="copyable">
      {url === undefined
        ? <code data-testid="tx-hash">{txHash}</code>
        : <a href={url} target="_blank" rel="noopener noreferrer" data-testid="tx-hash"><code>{txHash}</code><span className="visually-hidden"> (opens the chain explorer)</span></a>}
      {" "}<CopyButton value={txHash} what="transaction hash" />
    </span>
  )
}

type StepState = "done" | "current" | "waiting" | "failed"

const Step = ({ state, name, testId, children }: { readonly state: StepState; readonly name: string; readonly testId: string; readonly children: ReactNode }) => (
  <li className={`step step-${state}`} data-testid={testId} data-state={state}>
    <span className="step-name">{name}</span>
    <span className="visually-hidden">{` (${state === "done" ? "done" : state === "current" ? "in progress" : state === "failed" ? "failed" : "not yet"})`}</span>
    <div className="step-detail">{children}</div>
  </li>
)

/**
 * Created, submitted, confirmed (or failed). A transfer is handed to the chain with its creation
 * (its chain submission is recorded with it, and `transfer.initiated` says so); the Transfer (D13)
 * carries the transaction's hash once its outcome is known, and no time for the submission, so
 * the submitted step shows the time this tab heard `transfer.initiated`, when it did.
 */
const Timeline = ({ transfer, session }: { readonly transfer: Transfer; readonly session: Session }) => {
  const seen = seenEvents(transfer.transfer_id)
  const submittedAt = seen.find((event) => event.event === "transfer.initiated")?.timestamp
  const failedAt = seen.find((event) => event.event === "transfer.failed")?.timestamp
  const hash = transfer.tx_hash === null ? null : <>Transaction <TxHash session={session} txHash={transfer.tx_hash} /></>
  return (
    <ol className="timeline" aria-label="Timeline">
      <Step state="done" name="Created" testId="timeline-created"><When iso={transfer.created_at} testId="transfer-created" /></Step>
      <Step state="done" name="Submitted to the chain" testId="timeline-submitted">
        {submittedAt === undefined ? "With its creation." : <When iso={submittedAt} />}
      </Step>
      {transfer.status === "failed"
        ? <Step state="failed" name="Failed" testId="timeline-confirmed">No funds moved.{failedAt === undefined ? null : <> · <When iso={failedAt} /></>}{hash === null ? null : <> · {hash}</>}</Step>
        : (
          <Step state={transfer.status === "confirmed" ? "done" : "current"} name="Confirmed" testId="timeline-confirmed">
            {transfer.confirmed_at === null
              ? "Waiting for a block… (this page updates by itself)"
              : <>In a block at <When iso={transfer.confirmed_at} testId="transfer-confirmed" />{hash === null ? null : <> · {hash}</>}</>}
          </Step>
        )}
    </ol>
  )
}

/** A link to another transfer's page: a refund's original, an original's refunds (D43). */
const TransferLink = ({ id, navigate }: { readonly id: string; readonly navigate: (path: string) => void }) => (
  <a href={`/dashboard/transfers/${id}`} onClick={(event) => { event.preventDefault(); navigate(`/transfers/${id}`) }}><code>{id}</code></a>
)

export const TransferDetail = ({ transferId, keyPair, navigate, session, actions }: PageProps & {
  readonly transferId: string
  /** What the holder can do with the transfer as read and opened (the Refund action, D43). */
  readonly actions?: (transfer: Transfer, opened: Opened | undefined) => ReactNode
}) => {
  const transfer = useLiveTransfer(transferId)
  const opened = useLoad(async () => keyPair === undefined ? undefined : openTransfer(keyPair, transferId), [transferId, keyPair])
  const value = transfer.value
  return (
    <>
      <p><a href="/dashboard/activity" onClick={(event) => { event.preventDefault(); navigate("/activity") }}>← Activity</a></p>
      {transfer.loading && value === undefined && <Loading what="the transfer" />}
      <ErrorNote error={transfer.error} />
      {value !== undefined && (
        <>
          <dl className="detail">
            <dt>Transfer</dt><dd><Copyable value={value.transfer_id} what="transfer id" testId="transfer-id" /></dd>
            <dt>Status</dt><dd><span className={`status status-${value.status}`} data-testid="transfer-status">{value.status}</span></dd>
            <dt>From</dt><dd>{value.from}</dd>
            <dt>To</dt><dd>{value.to}</dd>
            <dt>Amount</dt>
            <dd data-testid="transfer-amount">
              {opened.value !== undefined ? amountText(opened.value.asset, opened.value.amount) : opened.loading && keyPair !== undefined ? "opening…" : <Encrypted />}
            </dd>
            <dt>Memo</dt>
            <dd data-testid="transfer-memo">{opened.value !== undefined ? (opened.value.memo === "" ? "(none)" : opened.value.memo) : <Encrypted />}</dd>
            <dt>Confidential</dt><dd>{value.confidential ? "yes" : "no"}</dd>
            {value.refund_of !== null && <><dt>Refund of</dt><dd><TransferLink id={value.refund_of} navigate={navigate} /></dd></>}
            {value.refunds.length > 0 && (
              <><dt>Refunds</dt><dd data-testid="transfer-refunds">{value.refunds.map((id, index) => <span key={id}>{index === 0 ? "" : ", "}<TransferLink id={id} navigate={navigate} /></span>)}</dd></>
            )}
          </dl>
          {actions?.(value, opened.value)}
          <h2>Timeline</h2>
          <Timeline transfer={value} session={session} />
        </>
      )}
      <ErrorNote error={opened.error} />
    </>
  )
}
