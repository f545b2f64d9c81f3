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

/**
 * Copies `value` to the clipboard; says "Copied" once it is there. `what` names the value for
 * assistive technology ("Copy transfer id"), after the visible word, so both read alike.
 */
export const CopyButton = ({ value, what }: { readonly value: string; readonly what: string }) => {
  const [copied, setCopied] = useState(false)
  return (
    <button type="button" className="secondary copy" onClick={() => {
      void navigator.clipboard.writeText(value).then(() => setCopied(true), () => setCopied(false))
    }}>{copied ? "Copied" : "Copy"}<span className="visually-hidden">{` ${what}`}</span></button>
  )
}

/** An id or hash, in code type, with its copy button. */
export const Copyable = ({ value, what, testId }: { readonly value: string; readonly what: string; readonly testId?: string }) => (
  <span className="copyable"><code data-testid={testId}>{value}</code> <CopyButton value={value} what={what} /></span>
)

/** A secret shown once (an API key, a webhook secret): copy it now, it is not shown again. */
export const ShownOnce = ({ label, value, onDone }: { readonly label: string; readonly value: string; readonly onDone: () => void }) => (
  <div className="shown-once" role="region" aria-label={label}>
    <p><strong>{label}</strong>: copy it now; it will not be shown again.</p>
    <code data-testid="secret-value">{value}</code>
    <div className="row">
      <CopyButton value={value} what={label} />
      <button type="button" className="secondary" onClick={onDone}>Done</button>
    </div>
  </div>
)

/** One column of a `DataTable`: its name (the header, and the label of the cell on a phone) and how a row fills it. */
export interface Column<Row> {
  readonly label: string
  /** Shown as the header instead of `label` (still read by assistive technology as `label`): "" for an actions column. */
  readonly hidden?: boolean
  readonly cell: (row: Row) => ReactNode
}

/**
 * A table that becomes a stack of cards on a phone (styles.css, `table.data`): every cell
 * carries its column's name, which the narrow layout writes before it, so no column is cut off
 * or scrolled out of sight.
 */
export const DataTable = <Row,>({ caption, columns, rows, rowKey, rowTestId }: {
  readonly caption: string
  readonly columns: ReadonlyArray<Column<Row>>
  readonly rows: ReadonlyArray<Row>
  readonly rowKey: (row: Row) => string
  readonly rowTestId?: (row: Row) => string
}) => (
  <table className="data">
    <caption className="visually-hidden">{caption}</caption>
    <thead>
      <tr>
        {columns.map((column) => (
          <th scope="col" key={column.label}>{column.hidden === true ? <span className="visually-hidden">{column.label}</span> : column.label}</th>
        ))}
      </tr>
    </thead>
    <tbody>
      {rows.map((row) => (
        <tr key={rowKey(row)} data-testid={rowTestId?.(row)}>
          {columns.map((column) => <td key={column.label} data-label={column.hidden === true ? "" : column.label}>{column.cell(row)}</td>)}
        </tr>
      ))}
    </tbody>
  </table>
)

/**
 * Loads `load()` now and whenever `reload` is called (showing that it loads), or `refresh`
 * (quietly: what is shown stays until the new value comes, as a live update wants). An answer
 * that comes after a newer load's is dropped.
 */
export const useLoad = <A,>(load: () => Promise<A>, deps: ReadonlyArray<unknown>) => {
  const [state, setState] = useState<{ readonly loading: boolean; readonly value: A | undefined; readonly error: unknown }>({
    loading: true,
    value: undefined,
    error: undefined
  })
  const latest = useRef(0)
  const run = useCallback((quiet: boolean) => {
    const attempt = ++latest.current
    if (!quiet) setState((previous) => ({ ...previous, loading: true }))
    load().then(
      (value) => {
        if (attempt === latest.current) setState({ loading: false, value, error: undefined })
      },
      (error: unknown) => {
        if (attempt === latest.current) setState((previous) => ({ loading: false, value: quiet ? previous.value : undefined, error }))
      }
    )
    // `deps` is the caller's list of what `load` reads, as with useEffect.
  }, deps)
  const reload = useCallback(() => run(false), [run])
  const refresh = useCallback(() => run(true), [run])
  useEffect(reload, [reload])
  return { ...state, reload, refresh }
}

export const timeLeft = (until: string, nowMs: number): string => {
  const ms = Date.parse(until) - nowMs
  if (ms <= 0) return "expired"
  const minutes = Math.floor(ms / 60_000)
  return minutes >= 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min left` : `${minutes} min left`
}
