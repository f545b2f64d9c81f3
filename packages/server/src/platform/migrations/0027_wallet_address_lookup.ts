/**
 * An index on `lower(wallet_address)`: the account store matches a transfer's `to`, when it is an
 * address, ignoring case (addresses are stored checksummed, and callers send any case), and the
 * `UNIQUE` constraint's index on the column itself cannot serve that match: each such read
 * scanned the whole table. Built in the
 * migrator's one locked transaction, so on a large PostgreSQL store it holds writes to
 * `accounts` while it builds (docs/operations.md, "Database").
 *
 * @since 0.16.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const walletAddressLookup = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX accounts_wallet_address_lower ON accounts (lower(wallet_address))`
})
