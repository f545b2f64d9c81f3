/**
 * The Activity page: the send form, which seals amount and memo here before anything leaves
 * the page, above the activity list (`Activity.tsx`); and a transfer's own page (`TransferDetail.tsx`).
 */
import { type FormEvent, type MouseEvent, useState } from "react"
import type { EncryptionKey } from "@pps/crypto"
import { Amount, type PpsTypes } from "@pps/sdk"
import type { PageProps } from "../App.tsx"
import type { Opened } from "../opened.ts"
import { ppsFor } from "../pps.ts"
import { amountTextProblem, type Attempt, InputProblem, isNetworkFailure, type Problem, problemOf, recipientTextProblem } from "../problems.ts"
import { FieldError, invalidProps, Page, ProblemNote } from "../ui.tsx"
import { ActivityList } from "./Activity.tsx"
import { type Transfer, TransferDetail, useLiveTransfer } from "./TransferDetail.tsx"


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

/** What was sent, with the transfer's status as the stream tells it (pending turns confirmed here), and a link to it. */
const SentResult = ({ sent, transferId, answered, navigate, refund }: {
  readonly sent: Draft
  readonly transferId: string
  /** The status the create answered (D14), shown until the transfer is read again. */
  readonly answered: string
  readonly navigate: (path: string) => void
  /** A refund's (D43), said as one. */
  readonly refund?: boolean
}) => {
  const transfer = useLiveTransfer(transferId)
  const open = (event: MouseEvent<HTMLAnchorElement>) => {
    event.preventDefault()
    navigate(`/transfers/${transferId}`)
  }
  return (
    <p className="success" role="status" data-testid="sent-result">
      {refund === true ? `Sent ${sent.amount} USDG back to ${sent.to}: refund ${transferId} is ` : `Sent ${sent.amount} USDG to ${sent.to}: transfer ${transferId} is `}
      <span data-testid="sent-status">{transfer.value?.status ?? answered}</span>.
      {" "}<a href={`/dashboard/transfers/${transferId}`} onClick={open}>Open it</a>
    </p>
  )
}

/** What a created transfer shows: a held one's note, or the transfer followed live. */
type Outcome = { readonly text: string } | { readonly sent: Draft; readonly transferId: string; readonly status: string }

/** What a payment's confirm answers (the SDK's `CreatedTransfer`) as the page shows it. */
const outcomeOf = (sent: Draft, created: PpsTypes.CreatedTransfer, held: string): Outcome =>
  created.kind === "held"
    ? { text: `${held} (${created.held.transaction_id}).` }
    : { sent, transferId: created.transfer.transfer_id, status: created.transfer.status }

/**
 * A payment reviewed before it is paid (a send, a refund): the draft under review, its one
 * Idempotency-Key (D6, D36: kept across a repeated confirm, a double click or a retry after the
 * network failed, dropped when the form is edited), and the refusal to show. `pay` seals and sends.
 */
const useReviewedPayment = (
  pay: (draft: Draft, idempotencyKey: string) => Promise<Outcome>,
  onPaid: (outcome: Outcome) => void,
  attempt: (draft: Draft) => Attempt = () => ({})
) => {
  const [key, setKey] = useState<string | undefined>(undefined)
  const [reviewing, setReviewing] = useState<Draft | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [problem, setProblem] = useState<Problem | undefined>(undefined)
  const review = (draft: Draft) => {
    const refused = checkDraft(draft)
    setProblem(refused === undefined ? undefined : problemOf(refused))
    if (refused !== undefined) return
    setKey(key ?? newSendKey())
    setReviewing(draft)
  }
  const confirm = async () => {
    if (reviewing === undefined || key === undefined) return
    setBusy(true)
    setProblem(undefined)
    try {
      const outcome = await pay(reviewing, key)
      setKey(undefined)
      setReviewing(undefined)
      onPaid(outcome)
    } catch (caught) {
      setProblem(problemOf(caught, attempt(reviewing)))
      // No answer: the review stays, and confirming again repeats the same request (same key).
      if (!isNetworkFailure(caught)) setReviewing(undefined)
    } finally {
      setBusy(false)
    }
  }
  return {
    reviewing,
    busy,
    problem,
    review,
    confirm,
    edited: () => {
      setKey(undefined)
      setProblem(undefined)
    },
    back: () => {
      setReviewing(undefined)
      setProblem(undefined)
    }
  }
}

/** A memo as the SDK takes it: none when empty. */
const memoOf = (draft: Draft) => (draft.memo === "" ? {} : { memo: draft.memo })

const SendForm = ({ keyPair, session, navigate, onSent }: PageProps & { readonly onSent: () => void }) => {
  const [fields, setFields] = useState<Draft>({ to: "", amount: "", memo: "" })
  const [result, setResult] = useState<Outcome | undefined>(undefined)
  const payment = useReviewedPayment(
    async (draft, idempotencyKey) =>
      // An agent's transfer above its approval threshold is held for its owner (D26).
      outcomeOf(draft, await ppsFor(keyPair).transfers.create({ to: draft.to, amount: draft.amount, ...memoOf(draft) }, { idempotencyKey }), "Held for approval"),
    (outcome) => {
      setResult(outcome)
      setFields({ to: fields.to, amount: "", memo: "" })
      onSent()
    },
    (draft) => ({ to: draft.to })
  )
  const { problem, reviewing } = payment
  if (keyPair === undefined) {
    return <p className="muted">To send, unlock your encryption key in Settings: the amount and memo are sealed in this page with it.</p>
  }
  const review = (event: FormEvent) => {
    event.preventDefault()
    setResult(undefined)
    payment.review({ to: fields.to.trim(), amount: fields.amount.trim(), memo: fields.memo })
  }
  const input = (field: keyof Draft, id: string) => ({
    id,
    value: fields[field],
    onChange: (event: { readonly target: { readonly value: string } }) => {
      setFields({ ...fields, [field]: event.target.value })
      payment.edited()
    },
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
        : <SendReview draft={reviewing} from={session.handle} busy={payment.busy} onConfirm={() => void payment.confirm()} onEdit={payment.back} />}
      {problem !== undefined && problem.field !== "to" && problem.field !== "amount" && problem.field !== "memo" && <ProblemNote problem={problem} />}
      {result !== undefined && ("text" in result
        ? <p className="success" role="status">{result.text}</p>
        : <SentResult sent={result.sent} transferId={result.transferId} answered={result.status} navigate={navigate} />)}
    </form>
  )
}

/**
 * The Refund action of a received, confirmed, confidential transfer (D43): the amount (the whole of
 * it, opened here, unless lowered) and a memo, reviewed as a send is, then sealed here and sent back
 * to the transfer's sender with one Idempotency-Key per reviewed refund. The guardian refuses
 * refunds that would add up to more than the transfer.
 */
const RefundAction = ({ transfer, opened, keyPair, session, navigate }: PageProps & {
  readonly transfer: Transfer
  readonly opened: Opened | undefined
  readonly keyPair: EncryptionKey.KeyPair
}) => {
  const [fields, setFields] = useState<{ readonly amount: string; readonly memo: string } | undefined>(undefined)
  const [result, setResult] = useState<Outcome | undefined>(undefined)
  const payment = useReviewedPayment(
    async (draft, idempotencyKey) =>
      outcomeOf(draft, await ppsFor(keyPair).transfers.refund(transfer.transfer_id, { amount: draft.amount, ...memoOf(draft) }, { idempotencyKey }), "Refund held for approval"),
    (outcome) => {
      setResult(outcome)
      setFields(undefined)
    }
  )
  const { problem, reviewing } = payment
  const resultNote = result === undefined ? null : "text" in result
    ? <p className="success" role="status">{result.text}</p>
    : <SentResult sent={result.sent} transferId={result.transferId} answered={result.status} navigate={navigate} refund />
  if (fields === undefined) {
    const whole = opened === undefined ? "" : Amount.format(opened.asset, opened.amount)
    return <div className="row"><button type="button" className="secondary" onClick={() => { setResult(undefined); setFields({ amount: whole, memo: "" }) }}>Refund</button>{resultNote}</div>
  }
  const review = (event: FormEvent) => {
    event.preventDefault()
    payment.review({ to: transfer.from, amount: fields.amount.trim(), memo: fields.memo })
  }
  const edit = (field: "amount" | "memo") => (event: { readonly target: { readonly value: string } }) => {
    setFields({ ...fields, [field]: event.target.value })
    payment.edited()
  }
  const locked = { autoComplete: "off", disabled: reviewing !== undefined }
  return (
    <form onSubmit={review} role="dialog" aria-labelledby="refund-title" className="panel" noValidate>
      <h2 id="refund-title">Refund to {transfer.from}</h2>
      <label htmlFor="refund-amount">Amount (USDG){opened === undefined ? "" : `, at most the ${Amount.format(opened.asset, opened.amount)} received`}</label>
      <input id="refund-amount" value={fields.amount} onChange={edit("amount")} inputMode="decimal" {...locked} {...invalidProps(problem, "amount", "refund-amount-error")} />
      <FieldError problem={problem} field="amount" id="refund-amount-error" />
      <label htmlFor="refund-memo">Memo (optional, encrypted)</label>
      <input id="refund-memo" value={fields.memo} onChange={edit("memo")} maxLength={512} {...locked} {...invalidProps(problem, "memo", "refund-memo-error")} />
      <FieldError problem={problem} field="memo" id="refund-memo-error" />
      {reviewing === undefined
        ? <div className="row"><button type="submit">Review</button><button type="button" className="secondary" onClick={() => { setFields(undefined); payment.back() }}>Cancel</button></div>
        : <SendReview draft={reviewing} from={session.handle} busy={payment.busy} refundOf={transfer.transfer_id} onConfirm={() => void payment.confirm()} onEdit={payment.back} />}
      {problem !== undefined && problem.field !== "amount" && problem.field !== "memo" && <ProblemNote problem={problem} />}
    </form>
  )
}

/** The Refund action where it applies: a confidential transfer this account received, confirmed, with the key unlocked. */
const refundActionOf = (props: PageProps) => (transfer: Transfer, opened: Opened | undefined) =>
  props.keyPair !== undefined && transfer.direction === "received" && transfer.status === "confirmed" && transfer.confidential
    ? <RefundAction {...props} keyPair={props.keyPair} transfer={transfer} opened={opened} />
    : null

/** The Activity page (the send form above the activity list), or one transfer's page. */
export const Transfers = (props: PageProps & { readonly transferId: string | undefined }) => {
  // A send reloads the list at once (its event comes a little later and refreshes it again).
  const [refreshKey, setRefreshKey] = useState(0)
  return props.transferId !== undefined && props.transferId !== ""
    ? <Page title="Transfer"><TransferDetail {...props} transferId={props.transferId} actions={refundActionOf(props)} /></Page>
    : (
      <Page title="Activity">
        <SendForm {...props} onSent={() => setRefreshKey((k) => k + 1)} />
        <ActivityList {...props} refreshKey={refreshKey} />
      </Page>
    )
}
