/**
 * Small shared pieces of the page: loading, empty and error states, the
 * "encrypted" placeholder, a copy-once secret, and a hook that loads data.
 */
import { type ReactNode, useCallback, useEffect, useState } from "react"
import { describe } from "./api.ts"

export const Loading = ({ what }: { readonly what: string }) => (
  <p className="muted" role="status" aria-live="polite">Loading {what}…</p>
)

export const Empty = ({ children }: { readonly children: ReactNode }) => <p className="empty">{children}</p>

export const ErrorNote = ({ error }: { readonly error: unknown }) =>
  error === undefined || error === null ? null : <p className="error" role="alert">{describe(error)}</p>

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
