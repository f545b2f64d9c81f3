/**
 * The account an API key belongs to (`GET /v1/accounts/me`). The SDK reads it
 * to learn the account id, which names the account's key file and is checked
 * against the key file's own record before a key is used.
 *
 * Internal: not exported from `@pps/sdk` (the command line uses it).
 *
 * @since 0.1.0
 * @internal
 */
import type { AccountRecord } from "@pps/api/Accounts"
import type { Client } from "./Client.ts"
import { run } from "./internal/typedClient.ts"

/**
 * The account record, in the API's wire form (the contract's `Account`).
 *
 * @since 0.1.0
 * @category models
 */
export type Account = AccountRecord

/**
 * The account of the client's API key.
 *
 * @since 0.1.0
 * @category requests
 */
export const me = (client: Client): Promise<Account> => run(client, (api) => api.accounts.me())
