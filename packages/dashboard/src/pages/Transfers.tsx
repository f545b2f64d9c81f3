/**
 * Transfers: the list with filters, one transfer with its amount and memo
 * opened here, and the send form, which seals amount and memo here before
 * anything leaves the page.
 */
import type { EncryptionKey } from "@pps/crypto"
import { Amount, type PpsTypes } from "@pps/sdk"
import { type FormEvent, type MouseEvent, useState } from "react"
import type { PageProps } from "../App.tsx"
import { call, ppsFor } from "../api.ts"
import { amountTextProblem, InputProblem, isNetworkFailure, type Problem, problemOf, recipientTextProblem } from "../problems.ts"
import { When } from "../time.tsx"
import { Empty, Encrypted, ErrorNote, FieldError, invalidProps, Loading, Page, ProblemNote, useLoad } from "../ui.tsx"

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
              <When iso={t.created_at} testId="transfer-row-time" />
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

/** A link to another transfer's page (a refund's original, an original's refunds, D43). */
const TransferLink = ({ id, navigate }: { readonly id: string; readonly navigate: (path: string) => void }) => (
  <a href={`/dashboard/transfers/${id}`} onClick={(event) => { event.preventDefault(); navigate(`/transfers/${id}`) }}><code>{id}</code> </a>
)

const TransferDetail = (props: PageProps & { readonly transferId: string }) => {
  const { transferId, keyPair, navigate } = props
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
          <dt>Created</dt><dd><When iso={transfer.value.created_at} testId="transfer-created" /></dd>
          <dt>Confirmed</dt><dd>{transfer.value.confirmed_at === null ? "not yet" : <When iso={transfer.value.confirmed_at} />}</dd>
          {transfer.value.refund_of !== null && <><dt>Refund of</dt><dd><TransferLink id={transfer.value.refund_of} navigate={navigate} /></dd></>}
          {transfer.value.refunds.length > 0 && <><dt>Refunds</dt><dd>{transfer.value.refunds.map((id) => <TransferLink key={id} id={id} navigate={navigate} />)}</dd></>}
        </dl>
      )}
      {transfer.value !== undefined && keyPair !== undefined && transfer.value.direction === "received" && transfer.value.status === "confirmed" && transfer.value.confidential && (
        <RefundAction
          {...props}
          keyPair={keyPair}
          transfer={transfer.value}
          wholeAmount={opened.value === undefined ? undefined : Amount.format(opened.value.asset, opened.value.amount)}
        />
      )}
      <ErrorNote error={opened.error} />
    </>
  )
}

/**
 * The Refund action of a received, confirmed, confidential transfer (D43): the amount (the whole
 * of it unless changed) and a memo, reviewed as a send is, then sealed here and sent back to the
 * transfer's sender. The guardian refuses refunds that would add up to more than the transfer.
 */
const RefundAction = ({ transfer, wholeAmount, keyPair, session, navigate }: PageProps & {
  readonly transfer: Transfer
  readonly wholeAmount: string | undefined
  readonly keyPair: EncryptionKey.KeyPair
}) => {
  const [fields, setFields] = useState<{ readonly amount: string; readonly memo: string } | undefined>(undefined)
  // One Idempotency-Key per reviewed refund, kept across a repeated confirm (D6, D36).
  const [refundKey, setRefundKey] = useState<string | undefined>(undefined)
  const [reviewing, setReviewing] = useState<Draft | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | undefined>(undefined)
  const [refunded, setRefunded] = useState<{ readonly text: string; readonly transferId?: string } | undefined>(undefined)
  if (fields === undefined) {
    return (
      <div className="row">
        <button type="button" className="secondary" onClick={() => { setRefunded(undefined); setFields({ amount: wholeAmount ?? "", memo: "" }) }}>Refund</button>
        {refunded !== undefined && (
          <p className="success" role="status">
            {refunded.text}{refunded.transferId !== undefined && <>{" "}<a href={`/dashboard/transfers/${refunded.transferId}`} onClick={(event) => { event.preventDefault(); navigate(`/transfers/${refunded.transferId}`) }}>Open it</a></>}
          </p>
        )}
      </div>
    )
  }
  const review = (event: FormEvent) => {
    event.preventDefault()
    const draft = { to: transfer.from, amount: fields.amount.trim(), memo: fields.memo }
    const refused = checkDraft(draft)
    if (refused !== undefined) return setProblem(problemOf(refused))
    setProblem(undefined)
    setRefundKey(refundKey ?? newSendKey())
    setReviewing(draft)
  }
  const confirm = async () => {
    if (reviewing === undefined || refundKey === undefined) return
    setBusy(true)
    setProblem(undefined)
    try {
      const sent = await ppsFor(keyPair).transfers.refund(
        transfer.transfer_id,
        { amount: reviewing.amount, ...(reviewing.memo === "" ? {} : { memo: reviewing.memo }) },
        { idempotencyKey: refundKey }
      )
      setRefunded(sent.kind === "held"
        ? { text: `Refund held for approval (${sent.held.transaction_id}).` }
        : { text: `Sent ${reviewing.amount} USDG back to ${transfer.from}: refund ${sent.transfer.transfer_id} is ${sent.transfer.status}.`, transferId: sent.transfer.transfer_id })
      setFields(undefined)
      setRefundKey(undefined)
      setReviewing(undefined)
    } catch (caught) {
      setProblem(problemOf(caught))
      // No answer: the review stays, and confirming again repeats the same request (same key).
      if (!isNetworkFailure(caught)) setReviewing(undefined)
    } finally {
      setBusy(false)
    }
  }
  const edit = (field: "amount" | "memo") => (event: { readonly target: { readonly value: string } }) => {
    setFields({ ...fields, [field]: event.target.value })
    setRefundKey(undefined)
    setProblem(undefined)
  }
  return (
    <form onSubmit={review} role="dialog" aria-labelledby="refund-title" className="panel" noValidate>
      <h2 id="refund-title">Refund to {transfer.from}</h2>
      <label htmlFor="refund-amount">Amount (USDG){wholeAmount === undefined ? "" : `, at most the ${wholeAmount} received`}</label>
      <input id="refund-amount" value={fields.amount} onChange={edit("amount")} inputMode="decimal" autoComplete="off" disabled={reviewing !== undefined} {...invalidProps(problem, "amount", "refund-amount-error")} />
      <FieldError problem={problem} field="amount" id="refund-amount-error" />
      <label htmlFor="refund-memo">Memo (optional, encrypted)</label>
      <input id="refund-memo" value={fields.memo} onChange={edit("memo")} maxLength={512} autoComplete="off" disabled={reviewing !== undefined} {...invalidProps(problem, "memo", "refund-memo-error")} />
      <FieldError problem={problem} field="memo" id="refund-memo-error" />
      {reviewing === undefined
        ? <div className="row"><button type="submit">Review</button><button type="button" className="secondary" onClick={() => { setFields(undefined); setProblem(undefined) }}>Cancel</button></div>
        : <SendReview draft={reviewing} from={session.handle} busy={busy} refundOf={transfer.transfer_id} onConfirm={() => void confirm()} onEdit={() => { setReviewing(undefined); setProblem(undefined) }} />}
      {problem !== undefined && problem.field !== "amount" && problem.field !== "memo" && <ProblemNote problem={problem} />}
    </form>
  )
}

/** What the holder typed, trimmed: what the review shows and the send seals. */
interface Draft {
  readonly to: string
  readonly amount: string
  readonly memo: string
}

/** The page's own checks of a draft, in the words a refusal of the API would use (`problems.ts`). */
const checkDraft = (draft: Draft): InputProblem | undefined => {
  const to = recipientTextProblem(draft.to)
  if (to !== undefined) return new InputProblem("to", to)
  const amount = amountTextProblem(draft.amount)
  if (amount !== undefined) return new InputProblem("amount", amount)
  if (new TextEncoder().encode(draft.memo).length > 512) {
    return new InputProblem("memo", "The memo is too long: at most 512 bytes (fewer characters if it has accents or emoji).")
  }
  return undefined
}

/** One key per reviewed send (D6, D36): drawn from the platform's CSPRNG, never Math.random. */
const newSendKey = () => `pps_dash_${globalThis.crypto.randomUUID()}`

/** The review: what is about to be paid, said once more before it is sealed and sent (a refund's too, D43). */
const SendReview = ({ draft, from, busy, onConfirm, onEdit, refundOf }: {
  readonly draft: Draft
  readonly from: string
  readonly busy: boolean
  readonly onConfirm: () => void
  readonly onEdit: () => void
  readonly refundOf?: string
}) => (
  <div className="review" role="region" aria-labelledby="review-title" data-testid="send-review">
    <h3 id="review-title">{refundOf === undefined ? "Review the transfer" : "Review the refund"}</h3>
    <p className="figure">You are sending {refundOf === undefined ? "" : "back "}<span data-testid="review-amount">{draft.amount} USDG</span> to <span data-testid="review-to">{draft.to}</span></p>
    <dl className="detail">
      {refundOf !== undefined && <><dt>Refund of</dt><dd><code>{refundOf}</code></dd></>}
      <dt>From</dt><dd>{from}</dd>
      <dt>To</dt><dd>{draft.to}</dd>
      <dt>Amount</dt><dd>{draft.amount} USDG</dd>
      <dt>Memo</dt><dd data-testid="review-memo">{draft.memo === "" ? "(none)" : draft.memo}</dd>
      <dt>Confidential</dt><dd>Yes: the amount and the memo are sealed in this page; only you and the recipient can read them, not the service.</dd>
    </dl>
    <div className="row">
      <button type="button" disabled={busy} onClick={onConfirm}>{busy ? "Sealing and sending…" : "Confirm and send"}</button>
      <button type="button" className="secondary" disabled={busy} onClick={onEdit}>Edit</button>
    </div>
  </div>
)

const SendForm = ({ keyPair, session, navigate, onSent }: PageProps & { readonly onSent: () => void }) => {
  const [fields, setFields] = useState<Draft>({ to: "", amount: "", memo: "" })
  // The Idempotency-Key of what was reviewed: kept across a repeated confirm (a double
  // click, a retry after the network failed), dropped when the form is edited.
  const [sendKey, setSendKey] = useState<string | undefined>(undefined)
  const [reviewing, setReviewing] = useState<Draft | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | undefined>(undefined)
  const [result, setResult] = useState<{ readonly text: string; readonly transferId?: string } | undefined>(undefined)
  if (keyPair === undefined) {
    return <p className="muted">To send, unlock your encryption key in Settings: the amount and memo are sealed in this page with it.</p>
  }
  const edit = (field: keyof Draft) => (value: string) => {
    setFields({ ...fields, [field]: value })
    setSendKey(undefined)
    setProblem(undefined)
  }
  const review = (event: FormEvent) => {
    event.preventDefault()
    setResult(undefined)
    const draft = { to: fields.to.trim(), amount: fields.amount.trim(), memo: fields.memo }
    const refused = checkDraft(draft)
    if (refused !== undefined) {
      setProblem(problemOf(refused))
      return
    }
    setProblem(undefined)
    setSendKey(sendKey ?? newSendKey())
    setReviewing(draft)
  }
  const confirm = async () => {
    if (reviewing === undefined || sendKey === undefined) return
    setBusy(true)
    setProblem(undefined)
    try {
      const sent = await ppsFor(keyPair).transfers.create(
        { to: reviewing.to, amount: reviewing.amount, ...(reviewing.memo === "" ? {} : { memo: reviewing.memo }) },
        { idempotencyKey: sendKey }
      )
      // An agent's transfer above its approval threshold is held for its owner (D26).
      setResult(sent.kind === "held"
        ? { text: `Held for approval (${sent.held.transaction_id}).` }
        : { text: `Sent ${reviewing.amount} USDG to ${reviewing.to}: transfer ${sent.transfer.transfer_id} is ${sent.transfer.status}.`, transferId: sent.transfer.transfer_id })
      setFields({ to: fields.to, amount: "", memo: "" })
      setSendKey(undefined)
      setReviewing(undefined)
      onSent()
    } catch (caught) {
      const refused = problemOf(caught, { to: reviewing.to })
      setProblem(refused)
      // No answer: the review stays, and confirming again repeats the same request (same key).
      if (!isNetworkFailure(caught)) setReviewing(undefined)
    } finally {
      setBusy(false)
    }
  }
  const openResult = (transferId: string) => (event: MouseEvent<HTMLAnchorElement>) => {
    event.preventDefault()
    navigate(`/transfers/${transferId}`)
  }
  const input = (field: keyof Draft, id: string) => ({
    id,
    value: fields[field],
    onChange: (event: { readonly target: { readonly value: string } }) => edit(field)(event.target.value),
    autoComplete: "off",
    disabled: reviewing !== undefined,
    ...invalidProps(problem, field, `${id}-error`)
  })
  return (
    <form onSubmit={review} aria-labelledby="send-title" className="panel" noValidate>
      <h2 id="send-title">Send USDG</h2>
      <label htmlFor="send-to">Recipient (@handle or 0x address)</label>
      <input {...input("to", "send-to")} />
      <FieldError problem={problem} field="to" id="send-to-error" />
      <label htmlFor="send-amount">Amount (USDG)</label>
      <input {...input("amount", "send-amount")} inputMode="decimal" />
      <FieldError problem={problem} field="amount" id="send-amount-error" />
      <label htmlFor="send-memo">Memo (optional, encrypted)</label>
      <input {...input("memo", "send-memo")} maxLength={512} />
      <FieldError problem={problem} field="memo" id="send-memo-error" />
      {reviewing === undefined
        ? <button type="submit">Review</button>
        : <SendReview draft={reviewing} from={session.handle} busy={busy} onConfirm={() => void confirm()} onEdit={() => { setReviewing(undefined); setProblem(undefined) }} />}
      {problem !== undefined && problem.field !== "to" && problem.field !== "amount" && problem.field !== "memo" && <ProblemNote problem={problem} />}
      {result !== undefined && (
        <p className="success" role="status">
          {result.text}{result.transferId !== undefined && <>{" "}<a href={`/dashboard/transfers/${result.transferId}`} onClick={openResult(result.transferId)}>Open it</a></>}
        </p>
      )}
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
