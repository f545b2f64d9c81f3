/**
 * API keys: their format, their mode, and the principal a verified key stands for.
 *
 * A key is `hc_test_` or `hc_live_` followed by 32 random bytes in base64url
 * (43 characters). Only HMAC-SHA256(pepper, key) is ever stored (D8).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { ChainId, TokenContract, WalletAddress } from "./Chain.ts"
import type { AccountType } from "./Accounts.ts"

/**
 * D9: `test` keys act on testnet (chain id 46630) data only, `live` keys on mainnet (4663).
 *
 * @since 0.1.0
 * @category models
 */
export const Mode = Schema.Literals(["test", "live"])
export type Mode = typeof Mode.Type

/**
 * @since 0.1.0
 * @category constants
 */
export const chainIdOfMode = { test: 46630, live: 4663 } as const satisfies Record<Mode, number>

/**
 * The random part of a key, in bytes (>= 32 as the foundation issue requires).
 *
 * @since 0.1.0
 * @category constants
 */
export const apiKeyRandomBytes = 32

const apiKeyPattern = /^hc_(test|live)_[A-Za-z0-9_-]{43}$/

/**
 * The mode a well-formed key is for, or undefined for anything malformed.
 *
 * @since 0.1.0
 * @category predicates
 */
export const modeOfApiKey = (key: string): Mode | undefined => {
  const match = apiKeyPattern.exec(key)
  return match === null ? undefined : (match[1] as Mode)
}

/**
 * The authenticated caller: the key, its account and its mode.
 *
 * @since 0.1.0
 * @category models
 */
export interface Principal {
  readonly keyId: string
  readonly accountId: string
  readonly accountType: AccountType
  /** For an agent account, the account that owns it. */
  readonly ownerAccountId: string | null
  readonly mode: Mode
}

/**
 * An API key as listed to its owner (never its value).
 *
 * @since 0.1.0
 * @category models
 */
export const ApiKeyRecord = Schema.Struct({
  key_id: Schema.String.annotate({ description: "`key_` + ULID." }),
  name: Schema.String.annotate({ description: "The name given at creation." }),
  mode: Mode,
  key_hint: Schema.String.annotate({ description: "The key's last characters, to recognise it." }),
  created_at: Schema.String.annotate({ description: "ISO 8601 UTC." }),
  last_used_at: Schema.NullOr(Schema.String).annotate({ description: "Its last authenticated request." }),
  request_count: Schema.Int.annotate({ description: "Requests authenticated with it." }),
  revoked_at: Schema.NullOr(Schema.String).annotate({ description: "When it was revoked; revoked keys answer 401." })
})
export type ApiKeyRecord = typeof ApiKeyRecord.Type

/**
 * D40 / SPEC Authentication 5 (ext): one of the holder's keys with its figures. The total
 * transferred through the key is an amount, so it comes sealed to the account's key, one
 * box per asset that has one (`Note.openKeyTotal`); none means nothing confirmed yet.
 *
 * @since 0.1.0
 * @category models
 */
export const ApiKeyFigures = Schema.Struct({
  ...ApiKeyRecord.fields,
  totals: Schema.Array(Schema.Struct({
    asset: Schema.String.annotate({ description: "USDG or ETH." }),
    chain_id: ChainId,
    contract: TokenContract,
    account: WalletAddress,
    sealed_total: Schema.String.annotate({ description: "The total sent through the key, sealed to the account's key (open it client-side)." })
  }))
}).annotate({ identifier: "ApiKey", description: "(ext, D40) One of the account's API keys (never its value) with its figures." })
export type ApiKeyFigures = typeof ApiKeyFigures.Type

/**
 * @since 0.1.0
 * @category models
 */
export const ApiKeyFiguresList = Schema.Struct({ data: Schema.Array(ApiKeyFigures).annotate({ description: "The account's keys of this mode." }) }).annotate({ identifier: "ApiKeyList" })

/**
 * A key's name, as its holder gives it (dashboard, admin, `POST /v1/agents/{account_id}/keys`).
 *
 * @since 0.9.0
 * @category models
 */
export const ApiKeyName = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(100)).annotate({
  description: "1-100 characters, to recognise the key by."
})

/**
 * The body that creates a key: its name.
 *
 * @since 0.9.0
 * @category models
 */
export const CreateApiKeyRequest = Schema.Struct({ name: ApiKeyName }).annotate({
  identifier: "CreateApiKeyRequest",
  examples: [{ name: "shopping-bot" }]
})

/**
 * A key just created: its value, in this answer only (D8: only a keyed hash is kept).
 *
 * @since 0.9.0
 * @category models
 */
export const CreatedApiKey = Schema.Struct({
  key_id: Schema.String.annotate({ description: "`key_` + ULID." }),
  name: Schema.String.annotate({ description: "The name given at creation." }),
  mode: Mode,
  api_key: Schema.String.annotate({ description: "The key itself (`hc_test_…` / `hc_live_…`): shown in this answer only, never again." })
})
export type CreatedApiKey = typeof CreatedApiKey.Type

/**
 * D44 (ext): an agent's key, created by its owner. Besides the key, the answer names the
 * agent and its owner's wallet address: the agent's amounts are sealed to the encryption key
 * registered on chain for that wallet, which a client checking keys against the chain
 * (`trust: "chain"`) pins.
 *
 * @since 0.9.0
 * @category models
 */
export const CreatedAgentApiKey = Schema.Struct({
  ...CreatedApiKey.fields,
  account_id: Schema.String.annotate({ description: "The agent account the key acts for." }),
  agent: Schema.String.annotate({ description: "The agent's handle, `@owner/name`." }),
  owner_address: WalletAddress.annotate({
    description: "The owner's wallet address: the agent's amounts are sealed to the encryption key the chain's registry holds for it."
  })
}).annotate({
  identifier: "CreatedAgentApiKey",
  description: "(ext, D44) An agent's API key, its value shown in this answer only.",
  examples: [{
    key_id: "key_01JAZ3Y8X6Q4M2N7P5R9S0T1V4",
    name: "shopping-bot",
    mode: "test",
    api_key: "hc_test_9lV0cW3sQq2fJ6yRrT8uZ1bN4mK7pE5xA0dG2hY3iL6",
    account_id: "acct_01JAZ3Y8X6Q4M2N7P5R9S0T1V3",
    agent: "@alice/bot",
    owner_address: "0x2546BcD3c84621e976D8185a91A922aE77ECEc30"
  }]
})
export type CreatedAgentApiKey = typeof CreatedAgentApiKey.Type

/**
 * An account's keys as listed (never their values), newest last.
 *
 * @since 0.9.0
 * @category models
 */
export const ApiKeyList = Schema.Struct({
  data: Schema.Array(ApiKeyRecord).annotate({ description: "The keys of this mode, oldest first, revoked ones included." })
}).annotate({ identifier: "AgentApiKeyList" })

/**
 * A key's revocation: from the answer on, a request with it is 401 `unauthorized`.
 *
 * @since 0.9.0
 * @category models
 */
export const RevokedApiKey = Schema.Struct({
  key_id: Schema.String.annotate({ description: "The revoked key." }),
  revoked: Schema.Literal(true)
}).annotate({ identifier: "RevokedApiKey" })

/**
 * The body that replaces a key (D56): the new key's name, by default the old key's.
 *
 * @since 0.12.0
 * @category models
 */
export const RotateApiKeyRequest = Schema.Struct({ name: Schema.optionalKey(ApiKeyName) }).annotate({
  identifier: "RotateApiKeyRequest",
  examples: [{}, { name: "shopping-bot-2" }]
})
export type RotateApiKeyRequest = typeof RotateApiKeyRequest.Type

/**
 * A key that replaced another (D56): the new key, its value in this answer only, and the key it
 * revoked in the same transaction.
 *
 * @since 0.12.0
 * @category models
 */
export const RotatedAgentApiKey = Schema.Struct({
  ...CreatedAgentApiKey.fields,
  replaced_key_id: Schema.String.annotate({ description: "The key this one replaced: revoked when this answer was written." })
}).annotate({
  identifier: "RotatedAgentApiKey",
  description: "(ext, D56) An agent's new API key, its value shown in this answer only, and the key it replaced (revoked)."
})
export type RotatedAgentApiKey = typeof RotatedAgentApiKey.Type
