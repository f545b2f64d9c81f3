/**
 * API keys as the page manages them, the account's own (API keys page) and its agents' (Agents
 * page) alike: a name to create one with (its value shown once by the caller, never kept), a
 * table with last use and request count, and revocation after a confirmation. Creating a key
 * needs a recent passkey confirmation; `call` runs that step-up when the server asks for it.
 */
import { type FormEvent, type ReactNode, useState } from "react"
import { When } from "./time.tsx"
import { ErrorNote } from "./ui.tsx"

/** A key as a table row shows it (never its value). */
export interface KeyRow {
  readonly keyId: string
  readonly name: string
  readonly keyHint: string
  readonly lastUsedAt: string | null
  readonly requestCount: number
  readonly revokedAt: string | null
}

/** A key as the API lists it (`GET /v1/accounts/me/api-keys`, `GET /v1/agents/{id}/keys`). */
export interface WireKey {
  readonly key_id: string
  readonly name: string
  readonly key_hint: string
  readonly last_used_at: string | null
  readonly request_count: number
  readonly revoked_at: string | null
}

export const keyRowOf = (key: WireKey): KeyRow => ({
  keyId: key.key_id,
  name: key.name,
  keyHint: key.key_hint,
  lastUsedAt: key.last_used_at,
  requestCount: key.request_count,
  revokedAt: key.revoked_at
})

/**
 * The create form and the revoke action of a list of keys: `issue` creates one by name (the
 * answer, with its value, is kept in `created` until the person is done with it), `revoke`
 * revokes one after the person confirmed `confirmText(key)`; either reloads the list.
 */
export const useKeyActions = <Created,>(actions: {
  readonly issue: (name: string) => Promise<Created>
  readonly revoke: (keyId: string) => Promise<void>
  readonly confirmText: (key: KeyRow) => string
  readonly reload: () => void
}) => {
  const [name, setName] = useState("")
  const [created, setCreated] = useState<Created | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const create = async (event: FormEvent) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      setCreated(await actions.issue(name))
      setName("")
      actions.reload()
    } catch (caught) {
      setError(caught)
    } finally {
      setBusy(false)
    }
  }
  const revoke = async (key: KeyRow) => {
    if (!globalThis.confirm(actions.confirmText(key))) return
    setError(undefined)
    try {
      await actions.revoke(key.keyId)
      actions.reload()
    } catch (caught) {
      setError(caught)
    }
  }
  return { name, setName, created, done: () => setCreated(undefined), error, busy, create, revoke }
}

/** The name field and the create button (`inputId` labels the field), with the last action's error. */
export const KeyForm = ({ inputId, label, className, keys }: {
  readonly inputId: string
  readonly label: string
  readonly className: string
  readonly keys: Pick<ReturnType<typeof useKeyActions>, "name" | "setName" | "busy" | "create" | "error">
}) => (
  <>
    <form onSubmit={(event) => void keys.create(event)} className={className}>
      <label htmlFor={inputId}>{label}</label>
      <input id={inputId} required maxLength={100} value={keys.name} onChange={(event) => keys.setName(event.target.value)} />
      <button type="submit" disabled={keys.busy}>Create key</button>
    </form>
    <ErrorNote error={keys.error} />
  </>
)

/** The keys, with a Revoke button on each active one; `extra` adds a column (the API keys page's totals). */
export const KeyTable = ({ caption, rows, testIdPrefix, onRevoke, extra }: {
  readonly caption: string
  readonly rows: ReadonlyArray<KeyRow>
  readonly testIdPrefix: string
  readonly onRevoke: (key: KeyRow) => void
  readonly extra?: { readonly header: string; readonly cell: (key: KeyRow) => ReactNode }
}) => (
  <table>
    <caption className="visually-hidden">{caption}</caption>
    <thead>
      <tr>
        <th scope="col">Name</th><th scope="col">Key</th><th scope="col">Last used</th><th scope="col">Requests</th>
        {extra !== undefined && <th scope="col">{extra.header}</th>}
        <th scope="col">State</th>
      </tr>
    </thead>
    <tbody>
      {rows.map((key) => (
        <tr key={key.keyId} data-testid={`${testIdPrefix}${key.name}`}>
          <td>{key.name}</td>
          <td><code>…{key.keyHint}</code></td>
          <td>{key.lastUsedAt === null ? "never" : <When iso={key.lastUsedAt} />}</td>
          <td>{key.requestCount}</td>
          {extra !== undefined && <td>{extra.cell(key)}</td>}
          <td>
            {key.revokedAt !== null ? "revoked" : (
              <button type="button" className="danger" onClick={() => onRevoke(key)} aria-label={`Revoke ${key.name}`}>Revoke</button>
            )}
          </td>
        </tr>
      ))}
    </tbody>
  </table>
)
