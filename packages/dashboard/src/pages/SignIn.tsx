/**
 * Sign-in with a passkey, and enrollment of the first passkey through the
 * operator's one-time link (`/dashboard/enroll#invite=…`: the token is in the
 * fragment, which the browser never sends to a server).
 */
import { startAuthentication, startRegistration } from "@simplewebauthn/browser"
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from "@simplewebauthn/browser"
import { type FormEvent, useEffect, useState } from "react"
import { call, setCsrfToken } from "../api.ts"
import { ErrorNote } from "../ui.tsx"

interface Opened {
  readonly csrf_token: string
}

export const SignIn = ({ onSignedIn }: { readonly onSignedIn: () => void }) => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const signIn = async () => {
    setBusy(true)
    setError(undefined)
    try {
      const optionsJSON = await call<PublicKeyCredentialRequestOptionsJSON>("POST", "/dashboard/api/sign-in/options", {})
      const response = await startAuthentication({ optionsJSON })
      const opened = await call<Opened>("POST", "/dashboard/api/sign-in/verify", { response })
      setCsrfToken(opened.csrf_token)
      onSignedIn()
    } catch (caught) {
      setError(caught)
    } finally {
      setBusy(false)
    }
  }
  return (
    <main id="main" className="centered">
      <h1>Sign in to Private Payments</h1>
      <p>Use the passkey you enrolled for your account. Amounts stay encrypted until your own key opens them in this page.</p>
      <button type="button" onClick={() => void signIn()} disabled={busy}>{busy ? "Waiting for your passkey…" : "Sign in with a passkey"}</button>
      <ErrorNote error={error} />
      <p className="muted">No passkey yet? Ask your operator for an enrollment link.</p>
    </main>
  )
}

export const Enroll = ({ onSignedIn }: { readonly onSignedIn: () => void }) => {
  const invite = new URLSearchParams(globalThis.location.hash.slice(1)).get("invite") ?? ""
  const [name, setName] = useState("My passkey")
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [confirmed, setConfirmed] = useState(false)
  // Whose account the invite is for (the registration options name it): the person
  // confirms it is theirs before a passkey is made, so a link sent to the wrong person,
  // or planted by someone, does not silently enroll them into another account.
  const [handle, setHandle] = useState<string | undefined>(undefined)
  useEffect(() => {
    if (invite === "") return
    call<PublicKeyCredentialCreationOptionsJSON>("POST", "/dashboard/api/enroll/options", { invite }).then(
      (options) => setHandle(options.user.name),
      setError
    )
  }, [invite])
  const enroll = async (event: FormEvent) => {
    event.preventDefault()
    if (!confirmed) return
    setBusy(true)
    setError(undefined)
    try {
      // Fresh options: the first ones' challenge may have expired while the person read the page.
      const optionsJSON = await call<PublicKeyCredentialCreationOptionsJSON>("POST", "/dashboard/api/enroll/options", { invite })
      const response = await startRegistration({ optionsJSON })
      const opened = await call<Opened>("POST", "/dashboard/api/enroll/verify", { response, name })
      setCsrfToken(opened.csrf_token)
      // The invite is spent: drop it from the address bar and history.
      globalThis.history.replaceState(null, "", "/dashboard/")
      onSignedIn()
    } catch (caught) {
      setError(caught)
    } finally {
      setBusy(false)
    }
  }
  return (
    <main id="main" className="centered">
      <h1>Enroll a passkey</h1>
      {invite === ""
        ? <p className="error" role="alert">This link has no invite in it. Ask your operator for a new enrollment link.</p>
        : (
          handle === undefined ? (error === undefined && <p className="muted">Reading the invite…</p>) : (
          <form onSubmit={(event) => void enroll(event)}>
            <p data-testid="invite-handle">This invite is for the account <strong>{handle}</strong>. Create a passkey only if this
              account is yours; if it is not, close this page and tell your operator.</p>
            <label className="check">
              <input type="checkbox" required checked={confirmed} onChange={(event) => setConfirmed(event.target.checked)} />
              {` This is my account (${handle})`}
            </label>
            <label htmlFor="passkey-name">Name of this passkey</label>
            <input id="passkey-name" value={name} maxLength={64} onChange={(event) => setName(event.target.value)} />
            <button type="submit" disabled={busy || !confirmed}>{busy ? "Waiting for your authenticator…" : "Create passkey and sign in"}</button>
          </form>
        ))}
      <ErrorNote error={error} />
    </main>
  )
}
