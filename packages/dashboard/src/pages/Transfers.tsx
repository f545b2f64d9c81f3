/**
 * The Activity page: the send form, which seals amount and memo here before anything leaves
 * the page, above the activity list (`Activity.tsx`); and a transfer's own page (`TransferDetail.tsx`).
 */
import { type FormEvent, type MouseEvent, useState } from "react"
import type { PageProps } from "../App.tsx"
import { ppsFor } from "../pps.ts"
import { amountTextProblem, InputProblem, isNetworkFailure, type Problem, problemOf, recipientTextProblem } from "../problems.ts"
import { FieldError, invalidProps, Page, ProblemNote } from "../ui.tsx"
import { ActivityList } from "./Activity.tsx"
import { TransferDetail, useLiveTransfer } from "./TransferDetail.tsx"


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

/** The review: what is about to be paid, said once more before it is sealed and sent. */
const SendReview = ({ draft, from, busy, onConfirm, onEdit }: {
  readonly draft: Draft
  readonly from: string
  readonly busy: boolean
  readonly onConfirm: () => void
  readonly onEdit: () => void
}) => (
  <div className="review" role="region" aria-labelledby="review-title" data-testid="send-review">
    <h3 id="review-title">Review the transfer</h3>
    <p className="figure">You are sending <span data-testid="review-amount">{draft.amount} USDG</span> to <span data-testid="review-to">{draft.to}</span></p>
    <dl className="detail">
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

/** What was sent, with the transfer's status as the stream tells it (pending turns confirmed here), and a link to it. */
const SentResult = ({ sent, transferId, answered, navigate }: {
  readonly sent: Draft
  readonly transferId: string
  /** The status the create answered (D14), shown until the transfer is read again. */
  readonly answered: string
  readonly navigate: (path: string) => void
}) => {
  const transfer = useLiveTransfer(transferId)
  const open = (event: MouseEvent<HTMLAnchorElement>) => {
    event.preventDefault()
    navigate(`/transfers/${transferId}`)
  }
  return (
    <p className="success" role="status" data-testid="sent-result">
      {`Sent ${sent.amount} USDG to ${sent.to}: transfer ${transferId} is `}
      <span data-testid="sent-status">{transfer.value?.status ?? answered}</span>.
      {" "}<a href={`/dashboard/transfers/${transferId}`} onClick={open}>Open it</a>
    </p>
  )
}

const SendForm = ({ keyPair, session, navigate, onSent }: PageProps & { readonly onSent: () => void }) => {
  const [fields, setFields] = useState<Draft>({ to: "", amount: "", memo: "" })
  // The Idempotency-Key of what was reviewed: kept across a repeated confirm (a double
  // click, a retry after the network failed), dropped when the form is edited.
  const [sendKey, setSendKey] = useState<string | undefined>(undefined)
  const [reviewing, setReviewing] = useState<Draft | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | undefined>(undefined)
  const [result, setResult] = useState<{ readonly text: string } | { readonly sent: Draft; readonly transferId: string; readonly status: string } | undefined>(undefined)
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
        : { sent: reviewing, transferId: sent.transfer.transfer_id, status: sent.transfer.status })
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
      {result !== undefined && ("text" in result
        ? <p className="success" role="status">{result.text}</p>
        : <SentResult sent={result.sent} transferId={result.transferId} answered={result.status} navigate={navigate} />)}
    </form>
  )
}

/** The Activity page (the send form above the activity list), or one transfer's page. */
export const Transfers = (props: PageProps & { readonly transferId: string | undefined }) => {
  // A send reloads the list at once (its event comes a little later and refreshes it again).
  const [refreshKey, setRefreshKey] = useState(0)
  return props.transferId !== undefined && props.transferId !== ""
    ? <Page title="Transfer"><TransferDetail {...props} transferId={props.transferId} /></Page>
    : (
      <Page title="Activity">
        <SendForm {...props} onSent={() => setRefreshKey((k) => k + 1)} />
        <ActivityList {...props} refreshKey={refreshKey} />
      </Page>
    )
}
