/**
 * Settings: the encryption key in this browser (import the key file, or
 * generate one here and register it with its proof, D12; kept in IndexedDB
 * under a passphrase; never sent), its replacement (D55: a new key made here,
 * the balance kept; also the recovery of a lost key, after a passkey
 * confirmation), KYC status, passkeys and sessions.
 */
import { EncryptionKey } from "@pps/crypto"
import { startRegistration } from "@simplewebauthn/browser"
import type { PublicKeyCredentialCreationOptionsJSON } from "@simplewebauthn/browser"
import { type FormEvent, useState } from "react"
import type { PageProps } from "../App.tsx"
import { type AccountRecord, call, withStepUp } from "../api.ts"
import { ppsFor } from "../pps.ts"
import { checkPassphrase, forgetKey, keyFileText, parseKeyFile, publicKeyHex, storedKeyInfo, storeKey, storeKeyUnderPasskey, unlockKey, unlockKeyWithPasskey } from "../keyStore.ts"
import { browserTimeZone, knownTimeZones, useTimeZone, When } from "../time.tsx"
import { Empty, ErrorNote, Loading, Page, useLoad } from "../ui.tsx"

type KeyPair = EncryptionKey.KeyPair

const EncryptionKeySection = ({ session, keyPair, onKey }: PageProps & { readonly onKey: (keyPair: KeyPair | undefined) => void }) => {
  const registered = useLoad(() => ppsFor(undefined).encryptionKey.status(), [])
  const stored = useLoad(() => storedKeyInfo(session.account_id), [keyPair])
  const [passphrase, setPassphrase] = useState("")
  const [underPasskey, setUnderPasskey] = useState(false)
  /** Stores the key in this browser under the protection chosen. */
  const keep = (keyPair: KeyPair) => underPasskey ? storeKeyUnderPasskey(session.account_id, keyPair) : storeKey(session.account_id, keyPair, passphrase)
  const protectedBy = underPasskey ? "your passkey" : "your passphrase"
  const [file, setFile] = useState<File | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [note, setNote] = useState<string | undefined>(undefined)
  const [download, setDownload] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)

  const run = (act: () => Promise<void>) => async (event?: FormEvent) => {
    event?.preventDefault()
    setBusy(true)
    setError(undefined)
    setNote(undefined)
    try {
      await act()
    } catch (caught) {
      setError(caught)
    } finally {
      setBusy(false)
    }
  }
  const importFile = run(async () => {
    if (file === undefined) throw new Error("Choose your key file first.")
    const keyPair = parseKeyFile(await file.text(), session.account_id)
    const status = registered.value
    if (status?.public_key != null && status.public_key.toLowerCase() !== publicKeyHex(keyPair).toLowerCase()) {
      throw new Error("This key is not the one registered for the account.")
    }
    await keep(keyPair)
    setPassphrase("")
    onKey(keyPair)
    setNote(`Key imported and unlocked. It is stored in this browser, encrypted under ${protectedBy}.`)
  })
  const unlock = run(async () => {
    onKey(stored.value?.protection === "passkey" ? await unlockKeyWithPasskey(session.account_id) : await unlockKey(session.account_id, passphrase))
    setPassphrase("")
    setNote("Key unlocked for this tab.")
  })
  const generate = run(async () => {
    const keyPair = EncryptionKey.generate()
    await keep(keyPair)
    await ppsFor(keyPair).encryptionKey.register()
    setDownload(URL.createObjectURL(new Blob([keyFileText(session.account_id, keyPair)], { type: "application/json" })))
    setPassphrase("")
    onKey(keyPair)
    registered.reload()
    setNote("Key generated here and registered with its proof. Download the key file and keep it safe: it is the only copy outside this browser.")
  })
  /** D55: a new key made here replaces the registered one; the balance is kept, the old key not needed. */
  const replace = run(async () => {
    // The new key is stored as the key here is (a passkey's stays under the passkey); a passphrase
    // is checked first, so the new key never exists in this tab alone.
    const underThePasskey = underPasskey || stored.value?.protection === "passkey"
    if (!underThePasskey) checkPassphrase(passphrase)
    if (!globalThis.confirm("Replace the registered key with a new one made here? Your balance is kept. Transfers from before open only with the old key.")) return
    const next = EncryptionKey.generate()
    await withStepUp(() => ppsFor(next).encryptionKey.rotate(next))
    // Registered now: the key file is offered before anything else can fail.
    setDownload(URL.createObjectURL(new Blob([keyFileText(session.account_id, next)], { type: "application/json" })))
    onKey(next)
    registered.reload()
    await (underThePasskey ? storeKeyUnderPasskey(session.account_id, next) : storeKey(session.account_id, next, passphrase))
    setPassphrase("")
    setNote("A new key was made here and registered; your balance was re-encrypted to it. Download the new key file: transfers from now on open only with it.")
  })
  const forget = run(async () => {
    if (!globalThis.confirm("Remove the key from this browser? You will need the key file to read amounts here again.")) return
    await forgetKey(session.account_id)
    onKey(undefined)
    stored.reload()
  })

  return (
    <section aria-labelledby="key-title" className="panel">
      <h2 id="key-title">Encryption key</h2>
      {registered.loading && <Loading what="key status" />}
      <ErrorNote error={registered.error} />
      {registered.value !== undefined && (
        <p>Registered key: {registered.value.public_key === null ? "none yet" : <code className="wrap">{registered.value.public_key.slice(0, 18)}…</code>}
          {" · "}{registered.value.confidential_ready ? "confidential-ready" : "not confidential-ready"}</p>
      )}
      <p data-testid="key-status">
        {keyPair !== undefined
          ? "Unlocked in this tab."
          : stored.value !== undefined
          ? `Stored in this browser under ${stored.value.protection === "passkey" ? "a passkey" : "a passphrase"}, locked.`
          : "Not in this browser."}
      </p>
      {stored.value?.protection === "passkey" && keyPair === undefined
        ? <button type="button" disabled={busy} onClick={() => void unlock()}>Unlock with passkey</button>
        : (
          <>
            <label className="check">
              <input type="checkbox" checked={underPasskey} onChange={(event) => setUnderPasskey(event.target.checked)} />
              Protect the key with my passkey instead of a passphrase (where this browser offers the passkey PRF extension)
            </label>
            {!underPasskey && (
              <>
                <label htmlFor="key-passphrase">Passphrase (at least 8 characters; protects the key in this browser)</label>
                <input id="key-passphrase" type="password" autoComplete="off" value={passphrase} onChange={(event) => setPassphrase(event.target.value)} />
              </>
            )}
            {stored.value !== undefined && keyPair === undefined && (
              <button type="button" disabled={busy} onClick={() => void unlock()}>Unlock</button>
            )}
          </>
        )}
      <form onSubmit={(event) => void importFile(event)}>
        <label htmlFor="key-file">Key file (from <code>pps keygen</code>)</label>
        <input id="key-file" type="file" accept=".key,application/json" onChange={(event) => setFile(event.target.files?.[0])} />
        <button type="submit" disabled={busy}>Import key file</button>
      </form>
      {registered.value?.public_key === null && (
        <button type="button" className="secondary" disabled={busy} onClick={() => void generate()}>Generate a key here and register it</button>
      )}
      {registered.value?.public_key != null && (
        <>
          <p className="muted">Lost the key, or think it leaked? Replace it: a new key is made here and your balance is re-encrypted to it (the old key is not needed).</p>
          <button type="button" className="secondary" disabled={busy} onClick={() => void replace()}>Replace the key (keeps the balance)</button>
        </>
      )}
      {download !== undefined && <KeyFileNextStep href={download} fileName={`${session.account_id}.key`} />}
      {stored.value !== undefined && <button type="button" className="danger" disabled={busy} onClick={() => void forget()}>Remove key from this browser</button>}
      {note !== undefined && <p className="success" role="status">{note}</p>}
      <ErrorNote error={error} />
    </section>
  )
}

/**
 * The downloaded key file's next step: a browser saves downloads readable by other users of
 * the computer, and `pps` refuses such a key file (KeyFile: permissions_too_open). Said here,
 * with the commands that put it where `pps` looks (~/.pps/<account_id>.key) with mode 600.
 */
const KeyFileNextStep = ({ href, fileName }: { readonly href: string; readonly fileName: string }) => (
  <div className="panel" data-testid="key-file-next-step">
    <p><a href={href} download={fileName}>Download the key file</a> (<code>{fileName}</code>)</p>
    <p>
      Your browser saves it readable by anyone using this computer, and <code>pps</code> refuses a key file
      that others can read. After downloading, move it where <code>pps</code> looks for it and make it readable by you alone:
    </p>
    <pre className="wrap"><code>{`mkdir -p ~/.pps && mv ~/Downloads/${fileName} ~/.pps/ && chmod 600 ~/.pps/${fileName}`}</code></pre>
    <p className="muted">Or keep it elsewhere with <code>chmod 600</code> and name it with <code>--key-file</code>. It is the only copy outside this browser: keep a backup offline.</p>
  </div>
)

/** The time zone every time on the page is shown in: this browser's, or one the holder chooses (kept in this browser). */
const TimeZoneSection = () => {
  const { zone, chosen, choose } = useTimeZone()
  return (
    <section aria-labelledby="time-zone-title" className="panel">
      <h2 id="time-zone-title">Time zone</h2>
      <p>Times on these pages are shown in <strong data-testid="time-zone-in-force">{zone}</strong>; point at one to see it in UTC (ISO 8601).</p>
      <label htmlFor="time-zone-choice">Show times in</label>
      <select id="time-zone-choice" value={chosen ?? ""} onChange={(event) => choose(event.target.value === "" ? undefined : event.target.value)}>
        <option value="">This browser's time zone ({browserTimeZone()})</option>
        {knownTimeZones().map((name) => <option key={name} value={name}>{name}</option>)}
      </select>
    </section>
  )
}

interface Passkey {
  readonly credential_id: string
  readonly name: string
  readonly created_at: string
  readonly last_used_at: string | null
}

interface SessionRow {
  readonly session_id: string
  readonly user_agent: string
  readonly created_at: string
  readonly last_seen_at: string
  readonly current: boolean
}

export const Settings = (props: PageProps & { readonly onKey: (keyPair: KeyPair | undefined) => void; readonly onSignedOut: () => void }) => {
  const account = useLoad(() => call<AccountRecord>("GET", "/v1/accounts/me"), [])
  const passkeys = useLoad(() => call<{ readonly data: ReadonlyArray<Passkey> }>("GET", "/dashboard/api/passkeys"), [])
  const sessions = useLoad(() => call<{ readonly data: ReadonlyArray<SessionRow> }>("GET", "/dashboard/api/sessions"), [])
  const [error, setError] = useState<unknown>(undefined)
  const [passkeyName, setPasskeyName] = useState("Another passkey")

  const act = (what: () => Promise<void>) => () => {
    setError(undefined)
    what().catch(setError)
  }
  const addPasskey = act(async () => {
    const optionsJSON = await call<PublicKeyCredentialCreationOptionsJSON>("POST", "/dashboard/api/passkeys/options", {})
    const response = await startRegistration({ optionsJSON })
    await call("POST", "/dashboard/api/passkeys/verify", { response, name: passkeyName })
    passkeys.reload()
  })
  const removePasskey = (passkey: Passkey) => act(async () => {
    if (!globalThis.confirm(`Remove the passkey "${passkey.name}"?`)) return
    await call("DELETE", `/dashboard/api/passkeys/${encodeURIComponent(passkey.credential_id)}`)
    passkeys.reload()
  })
  const signOut = (everywhere: boolean) => act(async () => {
    await call("POST", everywhere ? "/dashboard/api/sign-out-everywhere" : "/dashboard/api/sign-out", {})
    props.onSignedOut()
  })

  return (
    <Page title="Settings">
      <ErrorNote error={error} />
      <EncryptionKeySection {...props} />
      <TimeZoneSection />
      <section aria-labelledby="kyc-title" className="panel">
        <h2 id="kyc-title">Identity verification</h2>
        {account.loading && <Loading what="the account" />}
        <ErrorNote error={account.error} />
        {account.value !== undefined && <p>{account.value.handle} · KYC status: <strong>{account.value.kyc_status}</strong></p>}
      </section>
      <section aria-labelledby="passkeys-title" className="panel">
        <h2 id="passkeys-title">Passkeys</h2>
        {passkeys.loading && <Loading what="passkeys" />}
        <ErrorNote error={passkeys.error} />
        {passkeys.value !== undefined && (passkeys.value.data.length === 0 ? <Empty>No passkeys.</Empty> : (
          <ul className="stack">
            {passkeys.value.data.map((p) => (
              <li key={p.credential_id} className="row">
                <span>{p.name} · added <When iso={p.created_at} /> · last used {p.last_used_at === null ? "never" : <When iso={p.last_used_at} />}</span>
                <button type="button" className="danger" onClick={removePasskey(p)} aria-label={`Remove passkey ${p.name}`}>Remove</button>
              </li>
            ))}
          </ul>
        ))}
        <div className="row">
          <label htmlFor="new-passkey-name">Name</label>
          <input id="new-passkey-name" value={passkeyName} maxLength={64} onChange={(event) => setPasskeyName(event.target.value)} />
          <button type="button" onClick={addPasskey}>Add a passkey</button>
        </div>
      </section>
      <section aria-labelledby="sessions-title" className="panel">
        <h2 id="sessions-title">Sessions</h2>
        {sessions.loading && <Loading what="sessions" />}
        <ErrorNote error={sessions.error} />
        {sessions.value !== undefined && (
          <ul className="stack">
            {sessions.value.data.map((s) => (
              <li key={s.session_id}>{s.current ? "This browser" : s.user_agent.slice(0, 60)} · signed in <When iso={s.created_at} /> · last active <When iso={s.last_seen_at} /></li>
            ))}
          </ul>
        )}
        <div className="row">
          <button type="button" className="secondary" onClick={signOut(false)}>Sign out</button>
          <button type="button" className="danger" onClick={signOut(true)}>Sign out everywhere</button>
        </div>
      </section>
    </Page>
  )
}
