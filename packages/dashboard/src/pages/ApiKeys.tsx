/**
 * Developers → API keys (SPEC Authentication 2 and 5, D40): create with a name
 * (the value is shown once, here, and kept nowhere in the page), list with last
 * use, request count and the per-key USDG total opened here, revoke at once.
 */
import { type FormEvent, useState } from "react"
import type { PageProps } from "../App.tsx"
import { call, ppsFor } from "../api.ts"
import { When } from "../time.tsx"
import { Empty, Encrypted, ErrorNote, Loading, Page, ShownOnce, useLoad } from "../ui.tsx"

interface KeyRow {
  readonly keyId: string
  readonly name: string
  readonly keyHint: string
  readonly createdAt: string
  readonly lastUsedAt: string | null
  readonly requestCount: number
  readonly revokedAt: string | null
  readonly usdgTotal: string | undefined
}

interface WireKey {
  readonly key_id: string
  readonly name: string
  readonly key_hint: string
  readonly created_at: string
  readonly last_used_at: string | null
  readonly request_count: number
  readonly revoked_at: string | null
}

export const ApiKeysPage = ({ keyPair, session }: PageProps) => {
  const [name, setName] = useState("")
  const [created, setCreated] = useState<{ readonly name: string; readonly value: string } | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const keys = useLoad(async (): Promise<ReadonlyArray<KeyRow>> => {
    if (keyPair !== undefined) {
      const figures = await ppsFor(keyPair).keys.list()
      return figures.map((k) => ({ ...k, usdgTotal: k.totals.find((t) => t.asset === "USDG")?.amount ?? "0" }))
    }
    const listed = await call<{ readonly data: ReadonlyArray<WireKey> }>("GET", "/v1/accounts/me/api-keys")
    return listed.data.map((k) => ({
      keyId: k.key_id, name: k.name, keyHint: k.key_hint, createdAt: k.created_at, lastUsedAt: k.last_used_at,
      requestCount: k.request_count, revokedAt: k.revoked_at, usdgTotal: undefined
    }))
  }, [keyPair])

  const create = async (event: FormEvent) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const issued = await call<{ readonly name: string; readonly api_key: string }>("POST", "/dashboard/api/api-keys", { name })
      setCreated({ name: issued.name, value: issued.api_key })
      setName("")
      keys.reload()
    } catch (caught) {
      setError(caught)
    } finally {
      setBusy(false)
    }
  }
  const revoke = async (key: KeyRow) => {
    if (!globalThis.confirm(`Revoke the key "${key.name}" (…${key.keyHint})? Requests with it fail from now on.`)) return
    setError(undefined)
    try {
      await call("POST", `/dashboard/api/api-keys/${encodeURIComponent(key.keyId)}/revoke`, {})
      keys.reload()
    } catch (caught) {
      setError(caught)
    }
  }

  return (
    <Page title="API keys">
      <p className="muted">{session.mode === "test" ? "Keys created here are test keys (hc_test_): they act on testnet only." : "Keys created here are live keys (hc_live_)."}</p>
      {created !== undefined && <ShownOnce label={`New key "${created.name}"`} value={created.value} onDone={() => setCreated(undefined)} />}
      <form onSubmit={(event) => void create(event)} className="panel row">
        <label htmlFor="key-name">Name</label>
        <input id="key-name" required maxLength={100} value={name} onChange={(event) => setName(event.target.value)} />
        <button type="submit" disabled={busy}>Create key</button>
      </form>
      <ErrorNote error={error} />
      {keys.loading && <Loading what="keys" />}
      <ErrorNote error={keys.error} />
      {keys.value !== undefined && (keys.value.length === 0 ? <Empty>No API keys yet.</Empty> : (
        <table>
          <caption className="visually-hidden">API keys</caption>
          <thead>
            <tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Last used</th><th scope="col">Requests</th><th scope="col">USDG sent</th><th scope="col">State</th></tr>
          </thead>
          <tbody>
            {keys.value.map((k) => (
              <tr key={k.keyId} data-testid={`key-${k.name}`}>
                <td>{k.name}</td>
                <td><code>…{k.keyHint}</code></td>
                <td>{k.lastUsedAt === null ? "never" : <When iso={k.lastUsedAt} />}</td>
                <td>{k.requestCount}</td>
                <td>{k.usdgTotal ?? <Encrypted />}</td>
                <td>
                  {k.revokedAt !== null ? "revoked" : (
                    <button type="button" className="danger" onClick={() => void revoke(k)} aria-label={`Revoke ${k.name}`}>Revoke</button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ))}
    </Page>
  )
}
