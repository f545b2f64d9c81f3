/**
 * The holder's API keys with their figures (SPEC Authentication 5, D40): last use and
 * request count as the API gives them, and the total transferred through each key,
 * which the API gives only sealed to the account's key and this module opens.
 *
 * Internal: not exported from `@pps/sdk`; Promise users reach it through `Pps` (`keys.list`).
 *
 * @example
 * ```ts
 * import { KeyFile, Pps } from "@pps/sdk"
 *
 * const pps = new Pps({ apiKey: process.env.PPS_API_KEY!, keyPair: KeyFile.read(KeyFile.defaultPath("acct_...")).keyPair })
 * for (const key of await pps.keys.list()) console.log(key.name, key.totals)
 * ```
 *
 * @since 0.1.0
 * @internal
 */
import { type EncryptionKey, Note } from "@pps/crypto"
import * as Amount from "./Amount.ts"
import type { Client } from "./Client.ts"
import { ConfidentialError } from "./Errors.ts"
import { run } from "./internal/typedClient.ts"
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

const what = "GET /v1/accounts/me/api-keys"

/**
 * Lists the account's keys of the API key's mode with their figures, opening each sealed
 * total with the account's key pair.
 *
 * @since 0.1.0
 * @category requests
 */
export const list = async (client: Client, keyPair: EncryptionKey.KeyPair): Promise<ReadonlyArray<ApiKeyFigures>> => {
  const answer = await run(client, (api) => api.accounts.apiKeys())
  return answer.data.map((key) => {
    const totals = key.totals.map((total) => {
      const opened = Note.openKeyTotal(keyPair, Wire.hexBytes(what, "sealed_total", total.sealed_total), {
        chainId: BigInt(total.chain_id),
        contract: Wire.address(what, "contract", total.contract),
        account: Wire.address(what, "account", total.account),
        apiKeyId: key.key_id
      })
      if (!opened.ok) {
        throw new ConfidentialError(
          "statement_unopenable",
          `the ${total.asset} total of key ${key.key_id} does not open with this key (${opened.reason}); is it the key registered for this account?`
        )
      }
      return {
        asset: total.asset,
        amount: Amount.format(total.asset, opened.value.amount),
        amountBaseUnits: opened.value.amount,
        transfers: opened.value.transfers
      }
    })
    return {
      keyId: key.key_id,
      name: key.name,
      mode: key.mode,
      keyHint: key.key_hint,
      createdAt: key.created_at,
      lastUsedAt: key.last_used_at,
      requestCount: key.request_count,
      revokedAt: key.revoked_at,
      totals
    }
  })
}
