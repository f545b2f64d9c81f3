/**
 * Small shared pieces of the page: loading, empty and error states, the
 * "encrypted" placeholder, a copy-once secret, and a hook that loads data.
 */
import { type ReactNode, useCallback, useEffect, useRef, useState } from "react"
import { type Attempt, type Problem, problemOf } from "./problems.ts"

export const Loading = ({ what }: { readonly what: string }) => (
  <p className="muted" role="status" aria-live="polite">Loading {what}…</p>
)

export const Empty = ({ children }: { readonly children: ReactNode }) => <p className="empty">{children}</p>

/** The API's code (and request id) under a message, in small type: what support asks for. */
const SupportCode = ({ problem }: { readonly problem: Problem }) =>
  problem.code === undefined ? null : (
    <small className="support-code">
      {` code ${problem.code}`}{problem.requestId === undefined ? "" : ` · ${problem.requestId}`}
    </small>
  )

/** A problem shown where it is not about one field. */
export const ProblemNote = ({ problem }: { readonly problem: Problem }) => (
  <p className="error" role="alert">{problem.message}<SupportCode problem={problem} /></p>
)

/** An error not about one field, in the person's words (`problems.ts`). */
export const ErrorNote = ({ error, attempt }: { readonly error: unknown; readonly attempt?: Attempt }) =>
  error === undefined || error === null ? null : <ProblemNote problem={problemOf(error, attempt)} />

/** The error under one field, when the problem is about it; `id` is what the input's aria-describedby names. */
export const FieldError = ({ problem, field, id }: { readonly problem: Problem | undefined; readonly field: string; readonly id: string }) =>
  problem === undefined || problem.field !== field ? null : (
    <p id={id} className="error field-error" role="alert" data-testid={`field-error-${field}`}>{problem.message}<SupportCode problem={problem} /></p>
  )

/** The props an input gets so that its error is announced with it. */
export const invalidProps = (problem: Problem | undefined, field: string, id: string) =>
  problem?.field === field ? { "aria-invalid": true, "aria-describedby": id } : { "aria-invalid": false }

/**
 * A modal confirmation (the browser's own `<dialog>`: focus is kept inside, Escape cancels).
 * What it asks is in `children`; nothing happens until the person presses `confirmLabel`.
 */
export const ConfirmDialog = ({ title, confirmLabel, danger, busy, onConfirm, onCancel, children }: {
  readonly title: string
  readonly confirmLabel: string
  readonly danger?: boolean
  readonly busy?: boolean
  readonly onConfirm: () => void
  readonly onCancel: () => void
  readonly children: ReactNode
}) => {
  const dialog = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    const element = dialog.current
    if (element !== null && !element.open) element.showModal()
    return () => element?.close()
  }, [])
  return (
    <dialog ref={dialog} aria-labelledby="confirm-title" className="confirm" onCancel={(event) => { event.preventDefault(); onCancel() }}>
      <h2 id="confirm-title">{title}</h2>
      {children}
      <div className="row">
        <button type="button" className={danger === true ? "danger" : undefined} disabled={busy} onClick={onConfirm}>{confirmLabel}</button>
        <button type="button" className="secondary" onClick={onCancel}>Cancel</button>
      </div>
    </dialog>
  )
}

/** Where an amount would be when the key is not unlocked: the page cannot read it either. */
export const Encrypted = () => <span className="encrypted" title="Unlock your encryption key in Settings to read it">encrypted</span>

export const Page = ({ title, children }: { readonly title: string; readonly children: ReactNode }) => (
  <section aria-labelledby="page-title">
    <h1 id="page-title">{title}</h1>
    {children}
  </section>
)

/** A secret shown once (an API key, a webhook secret): copy it now, it is not shown again. */
export const ShownOnce = ({ label, value, onDone }: { readonly label: string; readonly value: string; readonly onDone: () => void }) => {
  const [copied, setCopied] = useState(false)
  return (
    <div className="shown-once" role="region" aria-label={label}>
      <p><strong>{label}</strong>: copy it now; it will not be shown again.</p>
      <code data-testid="secret-value">{value}</code>
      <div className="row">
        <button type="button" onClick={() => {
          void navigator.clipboard.writeText(value).then(() => setCopied(true), () => setCopied(false))
        }}>{copied ? "Copied" : "Copy"}</button>
        <button type="button" className="secondary" onClick={onDone}>Done</button>
      </div>
    </div>
  )
}

/** Loads `load()` now and whenever `reload` is called; keeps loading, value and error apart. */
export const useLoad = <A,>(load: () => Promise<A>, deps: ReadonlyArray<unknown>) => {
  const [state, setState] = useState<{ readonly loading: boolean; readonly value: A | undefined; readonly error: unknown }>({
    loading: true,
    value: undefined,
    error: undefined
  })
  const reload = useCallback(() => {
    setState((previous) => ({ ...previous, loading: true }))
    load().then(
      (value) => setState({ loading: false, value, error: undefined }),
      (error: unknown) => setState({ loading: false, value: undefined, error })
    )
    // `deps` is the caller's list of what `load` reads, as with useEffect.
  }, deps)
  useEffect(reload, [reload])
  return { ...state, reload }
}

export const timeLeft = (until: string, nowMs: number): string => {
  const ms = Date.parse(until) - nowMs
  if (ms <= 0) return "expired"
  const minutes = Math.floor(ms / 60_000)
  return minutes >= 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min left` : `${minutes} min left`
}
