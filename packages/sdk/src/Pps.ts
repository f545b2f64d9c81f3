/**
 * The SDK's Promise surface, for code that does not use Effect (Effect programs use
 * `ApiClient`): every resource of the API, with the conventions a payments client needs
 * built in.
 *
 * - **Idempotency**: every POST takes an `idempotencyKey` option and carries it as its
 *   `Idempotency-Key` (or 128 random bits drawn for the call), and every retry of that call
 *   reuses it, so a retried payment is never paid twice (D6, D36). Keep your own key (an
 *   order id) to run a call again after your process lost its answer.
 * - **Retries** (`internal/retry.ts`, the one policy `ApiClient` and `pps` share): a network
 *   failure, an attempt without an answer, 408, 429, 502, 503 and 504 are retried with
 *   exponential backoff and jitter, honouring `Retry-After`, for up to 15 s after the first
 *   failure (`retryBudgetMs`: longer than a server restart); 409 `idempotency_key_in_progress`
 *   (the first attempt still runs on the server) is waited out with the same key, for up to
 *   90 s, until the first outcome is replayed. Each attempt may take 90 s
 *   (`defaultTimeoutMs`), longer than the server's longest create.
 * - **The contract**: every call goes through the typed client derived from `@pps/api`
 *   (as `ApiClient` is): paths and types are the contract's and answers are decoded against it.
 * - **Errors**: one class per API code (`Errors`), with `status`, `code` (typed as
 *   `Errors.Code`, the contract's codes), `param`, `reason` and `requestId`.
 * - **Results**: `transfers.create` (and `transfers.refund`, D43) answers a `CreatedTransfer`
 *   discriminated by `kind` (`"transfer"` or `"held"`, an agent's transfer held for its owner).
 * - **Confidentiality**: with the account's key pair, `transfers.create` seals the amount
 *   and memo here (`SealedTransfers`): nothing sent carries them in clear. An agent's key
 *   needs no key pair: its copy is sealed to its owner's key (D21). Who can open the
 *   boxes depends on the keys they are sealed to, which the API answers: they are checked
 *   against the chain only with `rpcUrl` and a pinned `deployment` (`trust: "chain"`
 *   insists on it). Without them (the default, `trust: "api"`) the api tier is trusted to
 *   answer the real guardian's and recipient's keys (and an agent's owner's, unless
 *   `ownerWallet` is pinned), and one that lied could read the amount (docs/security.md). Decryption (transfers, balances, held transactions, per-key
 *   totals) happens here too.
 *
 * @example
 * ```ts
 * import { KeyFile, Pps } from "@pps/sdk"
 *
 * const pps = new Pps({ apiKey: process.env.PPS_API_KEY!, keyPair: KeyFile.read("alice.key").keyPair })
 * const created = await pps.transfers.create({ to: "@bob", amount: "12.5", memo: "lunch" })
 * for await (const t of pps.transfers.list({ status: "confirmed" })) console.log(t.transfer_id)
 * if (created.kind === "transfer") {
 *   const { amount, memo } = await pps.transfers.decrypt(created.transfer.transfer_id)
 * }
 * ```
 *
 * @since 0.3.0
 */
import type { AccountRecord } from "@pps/api/Accounts"
import type { AgentRecord, AgentTransactionRecord, PendingAgentTransaction, SpendPolicyRecord } from "@pps/api/Agents"
import type { ApiKeyRecord, CreatedAgentApiKey } from "@pps/api/ApiKeys"
import type { EventPayload, EventRecord } from "@pps/api/Events"
import type { FaucetGrant } from "@pps/api/Faucet"
import type { TransferRecord } from "@pps/api/Transfers"
import type { CreatedWebhook, DeliveryPage, ReplayAccepted, RotatedSecret, UpdateWebhookRequest, WebhookRecord } from "@pps/api/Webhooks"
import { type EncryptionKey, Random } from "@pps/crypto"
import type { Effect } from "effect"
import type * as ApiClient from "./ApiClient.ts"
import * as ApiKeys from "./ApiKeys.ts"
import * as Client from "./Client.ts"
import * as Confidential from "./Confidential.ts"
import { type CreatedTransfer, createdTransfer } from "./internal/created.ts"
import { newIdempotencyKey } from "./internal/idempotency.ts"
import * as Retry from "./internal/retry.ts"
import { iterate, run } from "./internal/typedClient.ts"
import * as SealedTransfers from "./SealedTransfers.ts"

/**
 * @since 0.3.0
 * @category models
 */
export interface Options {
  readonly apiKey: string
  /** Default `http://127.0.0.1:8080`. */
  readonly baseUrl?: string
  /**
   * The account's key pair (a key file's): needed to seal an account's transfers and to
   * decrypt. An agent's key needs none: its transfers are sealed to its owner's key (D21).
   */
  readonly keyPair?: EncryptionKey.KeyPair
  /**
   * For an agent key, optional: its owner's public key, which the API's answer must then
   * name. Without it (and without `keyPair`) the agent's copy is sealed to the key the API
   * answers for its owner, checked against the chain with `ownerWallet` and `rpcUrl`.
   */
  readonly senderKey?: EncryptionKey.PublicKey
  /**
   * For an agent key: its owner's wallet address (`owner_address` in `agents.keys.create`'s answer),
   * pinned here. With `rpcUrl` and `deployment`, the key the agent's copy is sealed to must
   * be the one the pinned contract holds for this wallet; `trust: "chain"` needs it.
   */
  readonly ownerWallet?: string
  /**
   * A secret only this client holds, so a `transfers.create` repeated with the same
   * idempotency key seals identically and answers the first outcome (D36). With a key pair,
   * its secret key serves; otherwise (an agent's key) a random one drawn for this instance,
   * so a repeat from another process (or instance) is refused 409 `idempotency_key_reused`
   * instead: paid once either way. Give one you keep to replay across processes.
   */
  readonly sealingSecret?: Uint8Array
  /**
   * A chain RPC URL: before sealing, the chain id is compared with the RPC's and the
   * guardian's and recipients' keys are read from the pinned contract. Needs `deployment`.
   */
  readonly rpcUrl?: string
  /** The chain id and token contracts this client trusts, from the operator, not the API (`SealedTransfers.Deployment`). */
  readonly deployment?: SealedTransfers.Deployment
  /** `"api"` (default) or `"chain"`: refuse to seal unless `rpcUrl` and `deployment` (and for an agent `ownerWallet`) let every key be checked. */
  readonly trust?: SealedTransfers.Trust
  /**
   * Retries of a call, at most (after a network failure, an attempt without an answer, 408,
   * 429, 502, 503 or 504). Default 12; `retryBudgetMs` ends them first.
   */
  readonly maxRetries?: number
  /**
   * How long after a call's first failed attempt a retry may still start. Default 15 000 ms:
   * longer than a server restart (3-10 s), so a call in flight through one succeeds once.
   * `Retry-After` is honoured within it. 0: no retries.
   */
  readonly retryBudgetMs?: number
  /** Told before each retry is waited for (to log it): the method, URL, Idempotency-Key, wait and cause. */
  readonly onRetry?: (retry: RetryNotice) => void
  /** Per attempt. Default 90 s (`defaultTimeoutMs`). */
  readonly timeoutMs?: number
  /** A fetch of your own (tests, proxies). */
  readonly fetch?: Client.Fetch
}

// The models are the contract's wire types (`@pps/api`): what the typed client decodes.

/** D13. @since 0.3.0 @category models */
export type Transfer = TransferRecord

/** D26: an agent's transfer held for its owner. @since 0.3.0 @category models */
export type HeldTransaction = AgentTransactionRecord

/** D28: a held transaction awaiting its owner, as listed (no amounts). @since 0.4.0 @category models */
export type PendingTransaction = typeof PendingAgentTransaction.Type

/** D22: a spend policy as the API answers it. @since 0.3.0 @category models */
export type SpendPolicy = SpendPolicyRecord

/**
 * A spend policy as written on create, or the fields of a change (D24; null clears an
 * optional one). The contract leaves it open on purpose (the server validates the whole
 * policy and names the field in 400 `invalid_policy`), so its shape is written here.
 *
 * @since 0.4.0
 * @category models
 */
export interface SpendPolicyInput {
  readonly daily_limit_usdg?: number
  readonly per_transaction_limit_usdg?: number
  readonly hitl_threshold_usdg?: number | null
  readonly allowed_recipients?: ReadonlyArray<string> | null
  readonly assets?: ReadonlyArray<string>
  readonly active_hours?: string
  readonly time_zone?: string
}

/** D21. @since 0.3.0 @category models */
export type Agent = AgentRecord

/** A page of agents (`agents.page`, D61), in D16's envelope. @since 0.11.0 @category models */
export interface AgentPage {
  readonly data: ReadonlyArray<Agent>
  readonly limit: number
  readonly offset: number
  readonly has_more: boolean
}

/** The account of the client's key (`accounts.me()`). @since 0.9.0 @category models */
export type Account = AccountRecord

/**
 * D44: an agent's key as its owner created it: the value (shown in this answer only), the agent,
 * and the owner's wallet address (`owner_address`), whose registered key the agent's amounts are
 * sealed to. @since 0.9.0 @category models
 */
export type NewAgentKey = CreatedAgentApiKey

/** D44: an agent's key as listed (never its value). @since 0.9.0 @category models */
export type AgentKey = ApiKeyRecord

/** D33: a subscription as listed (no secret). @since 0.3.0 @category models */
export type Webhook = WebhookRecord

/** D33: a subscription as created, with its signing secret (in this answer only). @since 0.5.0 @category models */
export type NewWebhook = CreatedWebhook

/** D35: a rotated signing secret. @since 0.5.0 @category models */
export type RotatedWebhookSecret = RotatedSecret

/** What `transfers.create` answers, discriminated by `kind` (`internal/created.ts`). @since 0.5.0 @category models */
export type { CreatedTransfer } from "./internal/created.ts"

/** The key registration status (`encryptionKey.status()`). @since 0.5.0 @category models */
export type EncryptionKeyStatus = Confidential.EncryptionKeyStatus

/** A registration's answer (`encryptionKey.register()`). @since 0.5.0 @category models */
export type Registration = Confidential.Registration

/** A transfer opened here (`transfers.decrypt`). @since 0.5.0 @category models */
export type DecryptedTransfer = Confidential.DecryptedTransfer

/** Balances proven to the API (`balances.read()`). @since 0.5.0 @category models */
export type Balances = Confidential.Balances

/** A decryption proof and what it claims (`balances.prove()`). @since 0.5.0 @category models */
export type BalanceProof = Confidential.BalanceProof

/** A held transaction opened by its owner (`approvals.open`). @since 0.5.0 @category models */
export type OpenedHeldTransaction = Confidential.HeldTransaction

/** An API key with its decrypted totals (`keys.list()`). @since 0.5.0 @category models */
export type KeyFigures = ApiKeys.ApiKeyFigures

/** The pinned deployment of `Options.deployment`. @since 0.5.0 @category models */
export type Deployment = SealedTransfers.Deployment

/** `Options.trust`. @since 0.5.0 @category models */
export type Trust = SealedTransfers.Trust

/** A `fetch` of your own (`Options.fetch`). @since 0.5.0 @category models */
export type Fetch = Client.Fetch

/** What `Options.onRetry` is told before a retry: method, URL, Idempotency-Key, retry number, wait and cause. @since 0.5.0 @category models */
export type RetryNotice = Retry.Retry

/** D34: a page of deliveries. @since 0.4.0 @category models */
export type Deliveries = DeliveryPage

/**
 * A page of `GET /v1/events` (D59).
 *
 * @since 0.9.0
 * @category models
 */
export interface EventPage {
  readonly data: ReadonlyArray<EventRecord>
  readonly limit: number
  readonly offset: number
  readonly has_more: boolean
}

/** An event as a webhook receives it (D30), from the live stream. @since 0.4.0 @category models */
export type Event = EventPayload

/** A faucet grant (ext). @since 0.4.0 @category models */
export type Grant = typeof FaucetGrant.Type

/**
 * The options of every POST: its Idempotency-Key (1-255 characters). Without one, a key is drawn
 * for the call (its retries reuse it), so running the call again acts again.
 *
 * @since 0.5.0
 * @category models
 */
export interface Keyed {
  readonly idempotencyKey?: string
}

/** D16: one page of a list. @since 0.3.0 @category models */
export interface Page<A> {
  readonly data: ReadonlyArray<A>
  readonly limit: number
  readonly offset: number
  readonly has_more: boolean
}

/** What `transfers.list` lists (D16). @since 0.4.0 @category models */
export interface ListFilter {
  readonly status?: Transfer["status"]
  /** ISO 8601, exclusive. */
  readonly from?: string
  /** ISO 8601, exclusive. */
  readonly to?: string
  /** Also the transfers of the caller's agents (ext). */
  readonly includeAgents?: boolean
  /** Transfers fetched per request (default 100, the most the API allows). */
  readonly pageSize?: number
}

/**
 * The per-attempt timeout. A create may run on the server for the guardian's authorization
 * (its client gives up after 30 s), D14's wait for settlement (TRANSFER_CREATE_TIMEOUT_MS,
 * 5 s by default) and the guardian's settle (30 s again): about 65 s before database time.
 * An attempt abandoned earlier tells the caller "failed" about a payment still in flight.
 *
 * @since 0.4.0
 * @category constants
 */
export const defaultTimeoutMs = 90_000

/**
 * The client. One per API key; safe to share.
 *
 * Its calls, the confidential steps' included (`SealedTransfers`, `Confidential`,
 * `ApiKeys`), go through the typed client derived from the contract (`@pps/api`) with
 * Effect's `HttpApiClient`: paths, request and answer types are the contract's, and answers
 * are decoded against it. Below it, the facade's own fetch carries the conventions above
 * (idempotency keys, retries, timeouts).
 *
 * @since 0.3.0
 * @category constructors
 */
export class Pps {
  /** The connection (its fetch carries the conventions above), which the SDK's internal steps take. */
  readonly #client: Client.Client
  /**
   * The connection of the live event stream: the caller's fetch without the facade's
   * retries and per-attempt timeout, which would cut a stream that stays open for an hour.
   */
  readonly #streamClient: Client.Client
  readonly #options: Options
  /**
   * What seals a create identically when it is repeated with its idempotency key: the
   * caller's secret, the key pair's, or one drawn for this instance (an agent's key, which
   * has no secret of its own). Never sent, never derived from the API key (which the api
   * tier sees on every request).
   */
  readonly #sealingSecret: Uint8Array

  constructor(options: Options) {
    this.#options = options
    this.#sealingSecret = options.sealingSecret ?? options.keyPair?.secretKey ?? Random.secure(32)
    this.#client = Client.make({
      apiKey: options.apiKey,
      ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }),
      fetch: Retry.retryingFetch(options.fetch ?? ((url, init) => globalThis.fetch(url, init)), {
        maxRetries: options.maxRetries ?? Retry.defaults.maxRetries,
        budgetMs: options.retryBudgetMs ?? Retry.defaults.budgetMs,
        attemptTimeoutMs: options.timeoutMs ?? defaultTimeoutMs,
        baseDelayMs: Retry.defaults.baseDelayMs,
        onRetry: options.onRetry
      })
    })
    this.#streamClient = Client.make({
      apiKey: options.apiKey,
      baseUrl: this.#client.baseUrl,
      ...(options.fetch === undefined ? {} : { fetch: options.fetch })
    })
  }

  #keyPair(): EncryptionKey.KeyPair {
    const keyPair = this.#options.keyPair
    if (keyPair === undefined) throw new Error("this needs the account's key pair: new Pps({ apiKey, keyPair })")
    return keyPair
  }

  /** What this client seals with and checks against (`SealedTransfers.SealOptions`), for a create or a refund. */
  #sealOptions(senderKey: EncryptionKey.PublicKey | undefined): SealedTransfers.SealOptions {
    return {
      ...(senderKey === undefined ? {} : { senderKey }),
      sealingSecret: this.#sealingSecret,
      ...(this.#options.ownerWallet === undefined ? {} : { ownerWallet: this.#options.ownerWallet }),
      ...(this.#options.rpcUrl === undefined ? {} : { rpcUrl: this.#options.rpcUrl }),
      ...(this.#options.deployment === undefined ? {} : { deployment: this.#options.deployment }),
      ...(this.#options.trust === undefined ? {} : { trust: this.#options.trust })
    }
  }

  /** Runs one call of the typed client over this facade's fetch (`internal/typedClient.ts`). */
  #run<A, E>(call: (api: ApiClient.Client) => Effect.Effect<A, E>, idempotencyKey?: string): Promise<A> {
    return run(this.#client, call, idempotencyKey)
  }

  /** Every page of `GET /v1/agents`, as one async iteration. */
  async *#agentPages(limit: number): AsyncGenerator<Agent> {
    for (let offset = 0;; offset += limit) {
      const page = await this.#run((api) => api.agents.page({ query: { limit, offset } }))
      yield* page.data
      if (!page.has_more) return
    }
  }

  /** Every page of `transfers.list`, as one async iteration. */
  async *#transferPages(filter: ListFilter): AsyncGenerator<Transfer> {
    const limit = filter.pageSize ?? 100
    for (let offset = 0;; offset += limit) {
      const page = await this.#run((api) =>
        api.transfers.list({
          query: {
            limit,
            offset,
            ...(filter.status === undefined ? {} : { status: filter.status }),
            ...(filter.from === undefined ? {} : { from: filter.from }),
            ...(filter.to === undefined ? {} : { to: filter.to }),
            ...(filter.includeAgents === undefined ? {} : { include_agents: filter.includeAgents })
          }
        })
      )
      yield* page.data
      if (!page.has_more) return
    }
  }

  /**
   * Transfers (D13-D18). `create` seals the amount and memo here unless `confidential` is
   * false (a standard transfer's amount is public on chain), and answers a `CreatedTransfer`:
   * `{ kind: "transfer", transfer }`, or `{ kind: "held", held }` for an agent's transfer
   * held for its owner's approval (202, D26).
   */
  readonly transfers = {
    create: async (
      transfer: {
        readonly to: string
        readonly amount: string
        readonly memo?: string
        readonly asset?: string
        readonly confidential?: boolean
        /** (D57) ISO 8601: a hold's approval window ends no later than this (an x402 requirement's expiry). */
        readonly approvalExpiresAt?: string
      },
      /** `recipientAddress`: the address a handle `to` must resolve to (else the API's resolution is trusted). */
      options: { readonly idempotencyKey?: string; readonly recipientAddress?: string } = {}
    ): Promise<CreatedTransfer> => {
      const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey()
      if (transfer.confidential === false) {
        const { approvalExpiresAt, ...plain } = transfer
        const payload = { ...plain, confidential: false, ...(approvalExpiresAt === undefined ? {} : { approval_expires_at: approvalExpiresAt }) }
        const answer = await this.#run((api) => api.transfers.create({ payload }), idempotencyKey)
        return createdTransfer(answer)
      }
      // Without either, an agent's key: its copy is sealed to its owner's key as answered (checked with ownerWallet).
      const senderKey = this.#options.senderKey ?? this.#options.keyPair?.publicKey
      const answer = await SealedTransfers.send(this.#client, {
        to: transfer.to,
        amount: transfer.amount,
        ...(transfer.memo === undefined ? {} : { memo: transfer.memo }),
        ...(transfer.asset === undefined ? {} : { asset: transfer.asset }),
        ...(transfer.approvalExpiresAt === undefined ? {} : { approvalExpiresAt: transfer.approvalExpiresAt })
      }, {
        ...this.#sealOptions(senderKey),
        idempotencyKey,
        ...(options.recipientAddress === undefined ? {} : { recipientAddress: options.recipientAddress })
      })
      return createdTransfer(answer.body)
    },
    /**
     * Sends up to a received transfer's amount back to its sender (D43), sealed here as
     * `create` is; without `amount`, the whole amount, read from this account's copy (an agent's
     * key, whose copy is its owner's, must name the amount). Answers the refund (`kind:
     * "transfer"`, its `refund_of` the original) or an agent's refund held for its owner.
     */
    refund: async (
      transferId: string,
      refund: { readonly amount?: string; readonly memo?: string } = {},
      options: { readonly idempotencyKey?: string } = {}
    ): Promise<CreatedTransfer> => {
      const senderKey = this.#options.senderKey ?? this.#options.keyPair?.publicKey
      const answer = await SealedTransfers.refund(this.#client, {
        transferId,
        ...(refund.amount === undefined ? {} : { amount: refund.amount }),
        ...(refund.memo === undefined ? {} : { memo: refund.memo })
      }, {
        ...this.#sealOptions(senderKey),
        idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
        ...(this.#options.keyPair === undefined ? {} : { keyPair: this.#options.keyPair })
      })
      return createdTransfer(answer.body)
    },
    get: (transferId: string): Promise<Transfer> => this.#run((api) => api.transfers.get({ params: { transfer_id: transferId } })),
    /** Every transfer matching, newest first, across pages (D16). */
    list: (filter: ListFilter = {}): AsyncGenerator<Transfer> => this.#transferPages(filter),
    /** Amount and memo, opened here and checked against the chain's ciphertext. */
    decrypt: (transferId: string): Promise<DecryptedTransfer> => Confidential.decryptTransfer(this.#client, this.#keyPair(), transferId)
  }

  /**
   * The account's encryption key: whether one is registered (and what a proof of
   * possession binds), and registering the key pair's public key (harmless when repeated).
   */
  readonly encryptionKey = {
    status: (): Promise<EncryptionKeyStatus> => Confidential.encryptionKeyStatus(this.#client),
    register: (): Promise<Registration> => Confidential.registerKey(this.#client, this.#keyPair()),
    /**
     * D55: replaces the registered key by `newKeyPair`'s, keeping the balance (the guardian
     * re-encrypts it); the old key is not needed, so this is also a lost key's recovery. Make a
     * new `Pps` with the new key pair afterwards.
     */
    rotate: (newKeyPair: EncryptionKey.KeyPair, options: Keyed = {}): Promise<Registration> =>
      Confidential.rotateKey(this.#client, newKeyPair, options)
  }

  /** Balances, decrypted here and proven to the API (D20); `prove` makes the proof only. */
  readonly balances = {
    read: (): Promise<Balances> => Confidential.readBalances(this.#client, this.#keyPair()),
    prove: (): Promise<BalanceProof> => Confidential.proveBalances(this.#client, this.#keyPair())
  }

  /** The account of the client's key: for an agent key, the agent's own (its `account_id`). */
  readonly accounts = {
    me: (): Promise<Account> => this.#run((api) => api.accounts.me())
  }

  /**
   * Agent accounts (D21), their spend policies (D22-D24) and keys (D44), and what an agent's own
   * key may read about itself (D42): its policy and its held transactions' state.
   */
  readonly agents = {
    create: (agent: { readonly name: string; readonly spend_policy: SpendPolicyInput }, options: Keyed = {}): Promise<Agent> =>
      this.#run((api) => api.agents.create({ payload: agent }), options.idempotencyKey),
    list: (): Promise<{ readonly agents: ReadonlyArray<Agent> }> => this.#run((api) => api.agents.list()),
    /**
     * One page of the agents (`GET /v1/agents`, D61), oldest first: `{ data, limit, offset, has_more }`.
     * An account has at most `AGENTS_PER_ACCOUNT_MAX` agents per mode (default 100).
     */
    page: (page: { readonly limit?: number; readonly offset?: number } = {}): Promise<AgentPage> =>
      this.#run((api) => api.agents.page({ query: page })),
    /** Every agent, oldest first, reading `GET /v1/agents` a page at a time (D61). */
    all: (options: { readonly pageSize?: number } = {}): AsyncGenerator<Agent> => this.#agentPages(options.pageSize ?? 100),
    policy: {
      /**
       * The owner reads any of its agents' policies; an agent key its own (D42). Without
       * `agentId`, the policy of the key's own account (an agent key's).
       */
      get: async (agentId?: string): Promise<SpendPolicy> => {
        const accountId = agentId ?? (await this.accounts.me()).account_id
        return this.#run((api) => api.agents.getPolicy({ params: { account_id: accountId } }))
      },
      update: (agentId: string, patch: SpendPolicyInput): Promise<SpendPolicy> =>
        this.#run((api) => api.agents.patchPolicy({ params: { account_id: agentId }, payload: { ...patch } }))
    },
    /**
     * The agent's API keys, managed by its owner (D44; an agent key is refused 403
     * `not_agent_owner`). `create` answers the key's value once: nothing keeps it, and a retry
     * with the same idempotency key answers 409 `key_shown_once` (revoke that key and create
     * another). `revoke` takes effect on the key's next request (401). `rotate` (D56) replaces a
     * leaked key in one step: the new key (its value once, named as the old one unless a name is
     * given) and the old key's revocation commit together.
     */
    keys: {
      create: (
        agentId: string,
        key: { readonly name: string },
        options: Keyed = {}
      ): Promise<NewAgentKey> =>
        this.#run((api) => api.agents.createKey({ params: { account_id: agentId }, payload: { name: key.name } }), options.idempotencyKey),
      list: (agentId: string): Promise<{ readonly data: ReadonlyArray<AgentKey> }> =>
        this.#run((api) => api.agents.listKeys({ params: { account_id: agentId } })),
      revoke: (agentId: string, keyId: string, options: Keyed = {}): Promise<{ readonly key_id: string; readonly revoked: true }> =>
        this.#run((api) => api.agents.revokeKey({ params: { account_id: agentId, key_id: keyId } }), options.idempotencyKey),
      rotate: (
        agentId: string,
        keyId: string,
        key: { readonly name?: string } = {},
        options: Keyed = {}
      ): Promise<NewAgentKey & { readonly replaced_key_id: string }> =>
        this.#run(
          (api) =>
            api.agents.rotateKey({
              params: { account_id: agentId, key_id: keyId },
              payload: key.name === undefined ? {} : { name: key.name }
            }),
          options.idempotencyKey
        )
    },
    /**
     * Held transactions' state (D42): `pending_approval`, `approved` (with its transfer),
     * `rejected` or `expired`; never an amount. For the agent's own key and its owner's.
     */
    transactions: {
      get: (transactionId: string): Promise<HeldTransaction> =>
        this.#run((api) => api.agents.getTransaction({ params: { transaction_id: transactionId } }))
    }
  }

  /** Held agent transactions (D26-D28): open the amount here before deciding. */
  readonly approvals = {
    list: (): Promise<{ readonly pending: ReadonlyArray<PendingTransaction> }> => this.#run((api) => api.agents.pending()),
    /** The amount the guardian would pay, and whether the agent's own note agrees. */
    open: (transactionId: string): Promise<OpenedHeldTransaction> => Confidential.openHeld(this.#client, this.#keyPair(), transactionId),
    /**
     * Approves it, which makes its transfer. Run again with the same `idempotencyKey` after a
     * lost answer, it answers the decision made: never a second transfer, nor a refusal of an
     * approval that went through.
     */
    approve: (transactionId: string, options: Keyed = {}): Promise<HeldTransaction> =>
      this.#run((api) => api.agents.approve({ params: { transaction_id: transactionId } }), options.idempotencyKey),
    reject: (transactionId: string, options: Keyed = {}): Promise<HeldTransaction> =>
      this.#run((api) => api.agents.reject({ params: { transaction_id: transactionId } }), options.idempotencyKey)
  }

  /** Webhook subscriptions (D33-D35, D59). The secret is in the create and rotate answers only. */
  readonly webhooks = {
    /** Run again with the same `idempotencyKey`, the same subscription (and secret), never a second one. */
    create: (webhook: { readonly url: string; readonly events: ReadonlyArray<string> }, options: Keyed = {}): Promise<CreatedWebhook> =>
      this.#run((api) => api.webhooks.create({ payload: webhook }), options.idempotencyKey),
    list: (): Promise<{ readonly data: ReadonlyArray<WebhookRecord> }> => this.#run((api) => api.webhooks.list()),
    /** One subscription (D59). */
    get: (webhookId: string): Promise<WebhookRecord> => this.#run((api) => api.webhooks.get({ params: { webhook_id: webhookId } })),
    /** Changes its url, events or enabled (D59); a disabled subscription gets no new deliveries. */
    update: (webhookId: string, changes: UpdateWebhookRequest): Promise<WebhookRecord> =>
      this.#run((api) => api.webhooks.update({ params: { webhook_id: webhookId }, payload: changes })),
    delete: (webhookId: string): Promise<void> => this.#run((api) => api.webhooks.remove({ params: { webhook_id: webhookId } })),
    /** The key is sent, but a rotation is not bound to it: a retry after a fault rotates again (docs/api.md). */
    rotateSecret: (webhookId: string, options: Keyed = {}): Promise<RotatedSecret> =>
      this.#run((api) => api.webhooks.rotateSecret({ params: { webhook_id: webhookId } }), options.idempotencyKey),
    deliveries: (webhookId: string, page: { readonly limit?: number; readonly offset?: number } = {}): Promise<Deliveries> =>
      this.#run((api) => api.webhooks.deliveries({ params: { webhook_id: webhookId }, query: page })),
    replay: (webhookId: string, eventId: string, options: Keyed = {}): Promise<typeof ReplayAccepted.Type> =>
      this.#run((api) => api.webhooks.replay({ params: { webhook_id: webhookId, event_id: eventId } }), options.idempotencyKey)
  }

  /** The account's API keys with last use, request count and decrypted totals (D40). */
  readonly keys = {
    list: (): Promise<ReadonlyArray<KeyFigures>> => ApiKeys.list(this.#client, this.#keyPair())
  }

  /**
   * The live event stream (ext, `GET /v1/events/stream`): every event a webhook of this account
   * would receive, as it happens, decoded against the contract. `stream` resolves once the
   * server answered (a stream without `lastEventId` starts then); the iteration ends when the
   * server ends the stream (its lifetime, an hour): open it again with the last event's `id`
   * as `lastEventId` to miss nothing. Neither retried nor timed out (it is open for long).
   */
  readonly events = {
    /** The account's recorded events, newest first, within retention (D59): Stripe's event shape, no amounts. */
    list: (query: { readonly limit?: number; readonly offset?: number; readonly type?: string } = {}): Promise<EventPage> =>
      this.#run((api) => api.events.list({ query })),
    /** One recorded event (D59). */
    get: (eventId: string): Promise<EventRecord> => this.#run((api) => api.events.get({ params: { event_id: eventId } })),
    /** `types`: only events of these types (the server filters them, D58); all when absent. */
    stream: async (options: { readonly lastEventId?: string; readonly types?: ReadonlyArray<string> } = {}): Promise<AsyncIterable<Event>> => {
      const headers = options.lastEventId === undefined ? {} : { "last-event-id": options.lastEventId }
      const query = options.types === undefined ? {} : { types: options.types.join(",") }
      const stream = await run(this.#streamClient, (api) => api.events.stream({ query, headers }))
      return iterate(this.#streamClient, stream)
    }
  }

  /**
   * Test USDG (ext, `hc_test_` keys only: a live key is refused 403 `test_mode_only`):
   * minted and shielded into the caller's confidential balance. The grant is public on chain,
   * so the answer repeats it.
   */
  readonly faucet = (
    grant: { readonly amount: string; readonly asset?: string },
    options: Keyed = {}
  ): Promise<Grant> => this.#run((api) => api.test.faucet({ payload: grant }), options.idempotencyKey)
}
