/**
 * The SDK over the session: every `/v1` call of the page that seals or opens an
 * amount goes through `Pps` here, with `sessionFetch` (session cookie and CSRF
 * token, never an API key). Only the pages that need it import this module, so
 * the SDK and the crypto backend load after sign-in, not with the sign-in page.
 */
import { Backend, type EncryptionKey } from "@pps/crypto"
import { Pps } from "@pps/sdk"
import { sessionFetch } from "./api.ts"

// The WebAssembly backend makes opening amounts fast; the pure one stays active if it cannot load.
void Backend.init().catch(() => undefined)

/** The SDK facade over the session: every `/v1` call of the page, sealing and opening amounts here. */
export const ppsFor = (keyPair: EncryptionKey.KeyPair | undefined): Pps =>
  new Pps({
    // Never sent: sessionFetch removes the header. The page holds no API key.
    apiKey: "",
    baseUrl: globalThis.location.origin,
    fetch: sessionFetch,
    maxRetries: 1,
    ...(keyPair === undefined ? {} : { keyPair })
  })
