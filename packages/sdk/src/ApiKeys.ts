/**
 * The holder's API keys with their figures (SPEC Authentication 5, D40): last use and
 * request count as the API gives them, and the total transferred through each key,
 * which the API gives only sealed to the account's key and this module opens.
 *
 * @example
 * ```ts
 * import { ApiKeys, Client, KeyFile } from "@pps/sdk"
 *
 * const client = Client.make({ apiKey: process.env.PPS_API_KEY! })
 * const { keyPair } = KeyFile.read(KeyFile.defaultPath("acct_..."))
 * for (const key of await ApiKeys.list(client, keyPair)) console.log(key.name, key.totals)
 * ```
 *
 * @since 0.1.0
 */
import { type EncryptionKey, Note } from "@pps/crypto"
import * as Amount from "./Amount.ts"
import type { Client } from "./Client.ts"
import { ConfidentialError } from "./Confidential.ts"
import { request } from "./internal/http.ts"
import * as Wire from "./internal/wire.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface KeyTotal {
  readonly asset: string
  /** Decimal string in the asset's units (D4): "1234.5". */
  readonly amount: string
  readonly amountBaseUnits: bigint
  readonly transfers: bigint
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ApiKeyFigures {
  readonly keyId: string
  readonly name: string
  readonly mode: string
  readonly keyHint: string
  readonly createdAt: string
  readonly lastUsedAt: string | null
  readonly requestCount: number
  readonly revokedAt: string | null
  /** One per asset sent through the key; an asset absent means 0. */
  readonly totals: ReadonlyArray<KeyTotal>
}

const path = "/v1/accounts/me/api-keys"

/**
 * Lists the account's keys of the API key's mode with their figures, opening each sealed
 * total with the account's key pair.
 *
 * @since 0.1.0
 * @category requests
 */
export const list = async (client: Client, keyPair: EncryptionKey.KeyPair): Promise<ReadonlyArray<ApiKeyFigures>> => {
  const body = Wire.fieldsOf((await request(client, "GET", path)).json, `GET ${path}`)
  return Wire.array(body, "data").map((item, i) => {
    const key = Wire.fieldsOf(item, `GET ${path} data[${i}]`)
    const keyId = Wire.string(key, "key_id")
    const totals = Wire.array(key, "totals").map((entry, j) => {
      const total = Wire.fieldsOf(entry, `GET ${path} data[${i}].totals[${j}]`)
      const asset = Wire.string(total, "asset")
      const opened = Note.openKeyTotal(keyPair, Wire.hexBytes(total, "sealed_total"), {
        chainId: Wire.integer(total, "chain_id"),
        contract: Wire.address(total, "contract"),
        account: Wire.address(total, "account"),
        apiKeyId: keyId
      })
      if (!opened.ok) {
        throw new ConfidentialError(
          "statement_unopenable",
          `the ${asset} total of key ${keyId} does not open with this key (${opened.reason}); is it the key registered for this account?`
        )
      }
      return {
        asset,
        amount: Amount.format(asset, opened.value.amount),
        amountBaseUnits: opened.value.amount,
        transfers: opened.value.transfers
      }
    })
    return {
      keyId,
      name: Wire.string(key, "name"),
      mode: Wire.string(key, "mode"),
      keyHint: Wire.string(key, "key_hint"),
      createdAt: Wire.string(key, "created_at"),
      lastUsedAt: Wire.nullableString(key, "last_used_at"),
      requestCount: Number(Wire.integer(key, "request_count")),
      revokedAt: Wire.nullableString(key, "revoked_at"),
      totals
    }
  })
}
