/**
 * How the page talks to the server: with the session cookie (HttpOnly, so the
 * page never reads it) and the session's CSRF token in `X-CSRF-Token`, never an
 * API key. `/dashboard/api` holds the session-only endpoints (passkeys,
 * sessions, API key creation and revocation); `/v1` is the public API, reached
 * with `call`, or through the SDK's `Pps` facade (`pps.ts`) with `sessionFetch`,
 * which swaps its bearer header for the session's credentials. This module does
 * not import the SDK: the sign-in page's script stays small.
 */
import { startAuthentication } from "@simplewebauthn/browser"
import type { PublicKeyCredentialRequestOptionsJSON } from "@simplewebauthn/browser"

let csrfToken: string | undefined

/** Remembers the CSRF token of the current session (from sign-in or `GET /dashboard/api/session`). */
export const setCsrfToken = (token: string | undefined) => {
  csrfToken = token
}

/** An error answer of the API (D1), in words a person can read. */
export class ApiProblem extends Error {
  override readonly name = "ApiProblem"
  readonly status: number
  readonly code: string
  readonly param: string | undefined
  readonly requestId: string | undefined
  constructor(status: number, code: string, message: string, param?: string, requestId?: string) {
    super(message)
    this.status = status
    this.code = code
    this.param = param
    this.requestId = requestId
  }
}

let onSessionEnded: () => void = () => {}

/**
 * What the page does when the server says its session is over (a 401 while
 * signed in: expired, signed out elsewhere, passkey removed): the shell drops
 * the key, the CSRF token and the session, and shows sign-in, so decrypted data
 * and an unlocked key do not stay on an unattended screen.
 */
export const setSessionEndedHandler = (handler: () => void) => {
  onSessionEnded = handler
}

/** The fetch every request of the page goes through: session cookie and CSRF token, no API key. */
export const sessionFetch = async (url: string, init: RequestInit): Promise<Response> => {
  const headers = new Headers(init.headers)
  // The SDK always writes a bearer header; the page has no key to put there.
  headers.delete("authorization")
  const token = csrfToken
  const signedIn = token !== undefined
  if (token !== undefined) headers.set("x-csrf-token", token)
  const response = await globalThis.fetch(url, { ...init, headers, credentials: "same-origin" })
  // Before sign-in a 401 is a refused ceremony, not an ended session.
  if (response.status === 401 && signedIn) {
    csrfToken = undefined
    onSessionEnded()
  }
  return response
}

interface ErrorBody {
  readonly error?: { readonly code?: string; readonly message?: string; readonly param?: string; readonly request_id?: string }
}

const problemOf = async (response: Response): Promise<ApiProblem> => {
  const text = await response.text()
  let parsed: ErrorBody = {}
  try {
    parsed = JSON.parse(text) as ErrorBody
  } catch {
    // Not D1 JSON (a proxy's page): the status alone speaks.
  }
  return new ApiProblem(
    response.status,
    parsed.error?.code ?? "http_error",
    parsed.error?.message ?? `The server answered ${response.status}.`,
    parsed.error?.param,
    parsed.error?.request_id
  )
}

/**
 * Step-up: the holder confirms presence with a passkey (user verification
 * required), which the server asks for before adding or removing a passkey or
 * creating an API key when the session's last passkey check is over five
 * minutes old.
 */
const stepUp = async (): Promise<void> => {
  const options = await sessionFetch("/dashboard/api/step-up/options", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
  if (!options.ok) throw await problemOf(options)
  const optionsJSON = (await options.json()) as PublicKeyCredentialRequestOptionsJSON
  const response = await startAuthentication({ optionsJSON })
  const verified = await sessionFetch("/dashboard/api/step-up/verify", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ response })
  })
  if (!verified.ok) throw await problemOf(verified)
}

/**
 * Runs `act` (an SDK call over the session); on `reauthentication_required`, steps up once and
 * runs it again, as `call` does for the page's own requests.
 */
export const withStepUp = async <A>(act: () => Promise<A>): Promise<A> => {
  try {
    return await act()
  } catch (caught) {
    const code = typeof caught === "object" && caught !== null && "code" in caught ? caught.code : undefined
    if (code !== "reauthentication_required") throw caught
    await stepUp()
    return act()
  }
}

/** A JSON call to the dashboard's own endpoints or to `/v1`; on `reauthentication_required`, steps up once and retries. */
export const call = async <A>(method: "GET" | "POST" | "PATCH" | "DELETE", path: string, body?: unknown): Promise<A> => {
  const send = () =>
    sessionFetch(path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
  let response = await send()
  if (response.status === 403) {
    const problem = await problemOf(response.clone())
    if (problem.code !== "reauthentication_required") throw problem
    await stepUp()
    response = await send()
  }
  if (!response.ok) throw await problemOf(response)
  if (response.status === 204) return undefined as A
  return (await response.json()) as A
}

/** The signed-in holder, as `GET /dashboard/api/session` tells. */
export interface Session {
  readonly session_id: string
  readonly account_id: string
  readonly handle: string
  readonly mode: "test" | "live"
  readonly csrf_token: string
  /** The chain explorer's page of a transaction, `{tx_hash}` to fill in; null: hashes are not linked. */
  readonly explorer_tx_url: string | null
}

/** `GET /v1/accounts/me`. */
export interface AccountRecord {
  readonly account_id: string
  readonly handle: string
  readonly type: string
  readonly public_key: string
  readonly kyc_status: string
  readonly created_at: string
}
