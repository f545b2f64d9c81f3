/**
 * The account an API key belongs to (`GET /v1/accounts/me`). The SDK reads it
 * to learn the account id, which names the account's key file and is checked
 * against the key file's own record before a key is used.
 *
 * @since 0.1.0
 */
import type { Client } from "./Client.ts"
import { request } from "./internal/http.ts"
import * as Wire from "./internal/wire.ts"

/**
 * The account record, in the API's wire form.
 *
 * @since 0.1.0
 * @category models
 */
export interface Account {
  readonly account_id: string
  readonly handle: string
  readonly type: string
  /** The account's on-chain address, 0x-prefixed. */
  readonly public_key: string
  readonly kyc_status: string
  readonly created_at: string
}

/**
 * The account of the client's API key.
 *
 * @since 0.1.0
 * @category requests
 */
export const me = async (client: Client): Promise<Account> => {
  const fields = Wire.fieldsOf((await request(client, "GET", "/v1/accounts/me")).json, "GET /v1/accounts/me")
  return {
    account_id: Wire.string(fields, "account_id"),
    handle: Wire.string(fields, "handle"),
    type: Wire.string(fields, "type"),
    public_key: Wire.string(fields, "public_key"),
    kyc_status: Wire.string(fields, "kyc_status"),
    created_at: Wire.string(fields, "created_at")
  }
}
