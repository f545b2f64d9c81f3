/**
 * Developers → API keys (SPEC Authentication 2 and 5, D40): create with a name
 * (the value is shown once, here, and kept nowhere in the page), list with last
 * use, request count and the per-key USDG total opened here, revoke at once.
 */
import type { PageProps } from "../App.tsx"
import { call, ppsFor } from "../api.ts"
import { KeyForm, type KeyRow, keyRowOf, KeyTable, useKeyActions, type WireKey } from "../keys.tsx"
import { Empty, Encrypted, ErrorNote, Loading, Page, ShownOnce, useLoad } from "../ui.tsx"

/** A key with its USDG total, opened here when the key is unlocked. */
interface KeyWithTotal extends KeyRow {
  readonly usdgTotal: string | undefined
}

export const ApiKeysPage = ({ keyPair, session }: PageProps) => {
  const keys = useLoad(async (): Promise<ReadonlyArray<KeyWithTotal>> => {
    if (keyPair !== undefined) {
      const figures = await ppsFor(keyPair).keys.list()
      return figures.map((k) => ({ ...k, usdgTotal: k.totals.find((t) => t.asset === "USDG")?.amount ?? "0" }))
    }
    const listed = await call<{ readonly data: ReadonlyArray<WireKey> }>("GET", "/v1/accounts/me/api-keys")
    return listed.data.map((k) => ({ ...keyRowOf(k), usdgTotal: undefined }))
  }, [keyPair])
  const actions = useKeyActions({
    issue: (name) => call<{ readonly name: string; readonly api_key: string }>("POST", "/dashboard/api/api-keys", { name }),
    revoke: async (keyId) => {
      await call("POST", `/dashboard/api/api-keys/${encodeURIComponent(keyId)}/revoke`, {})
    },
    confirmText: (key) => `Revoke the key "${key.name}" (…${key.keyHint})? Requests with it fail from now on.`,
    reload: keys.reload
  })
  const totals = new Map(keys.value?.map((k) => [k.keyId, k.usdgTotal]) ?? [])

  return (
    <Page title="API keys">
      <p className="muted">{session.mode === "test" ? "Keys created here are test keys (hc_test_): they act on testnet only." : "Keys created here are live keys (hc_live_)."}</p>
      {actions.created !== undefined && <ShownOnce label={`New key "${actions.created.name}"`} value={actions.created.api_key} onDone={actions.done} />}
      <KeyForm inputId="key-name" label="Name" className="panel row" keys={actions} />
      {keys.loading && <Loading what="keys" />}
      <ErrorNote error={keys.error} />
      {keys.value !== undefined && (keys.value.length === 0 ? <Empty>No API keys yet.</Empty> : (
        <KeyTable caption="API keys" rows={keys.value} testIdPrefix="key-" onRevoke={(key) => void actions.revoke(key)}
          extra={{ header: "USDG sent", cell: (key) => totals.get(key.keyId) ?? <Encrypted /> }} />
      ))}
    </Page>
  )
}
