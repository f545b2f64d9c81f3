/**
 * The SDK's Promise facade for code that does not use Effect: every resource of the API,
 * with the conventions a payments client needs built in.
 *
 * - **Idempotency**: every POST carries an `Idempotency-Key` (yours, or 128 random bits),
 *   and every retry of that call reuses it, so a retried payment is never paid twice (D6,
 *   D36).
 * - **Retries**: a network failure, a timeout, 429 and 503 are retried with exponential
 *   backoff and jitter, honouring `Retry-After` (default 3 retries); 409
 *   `idempotency_key_in_progress` (the first attempt still runs on the server) is retried
 *   with the same key, for up to 90 s, until the first outcome is replayed. Each attempt
 *   may take 90 s (`defaultTimeoutMs`), longer than the server's longest create.
 * - **Errors**: one class per API code (`Errors`), with `status`, `code`, `param`,
 *   `reason` and `requestId`.
 * - **Confidentiality**: with the account's key pair, `transfers.create` seals the amount
 *   and memo here (`SealedTransfers`): nothing sent carries them in clear. Who can open the
 *   boxes depends on the keys they are sealed to, which the API answers: they are checked
 *   against the chain only with `rpcUrl` and a pinned `deployment` (`trust: "chain"`
 *   insists on it). Without them (the default, `trust: "api"`) the api tier is trusted to
 *   answer the real guardian's and recipient's keys, and one that lied could read the
 *   amount (docs/security.md). Decryption (transfers, balances, held transactions, per-key
 *   totals) happens here too.
 *
 * @example
 * ```ts
 * import { KeyFile, Pps } from "@pps/sdk"
 *
 * const pps = new Pps({ apiKey: process.env.PPS_API_KEY!, keyPair: KeyFile.read("alice.key").keyPair })
 * const transfer = await pps.transfers.create({ to: "@bob", amount: "12.5", memo: "lunch" })
 * for await (const t of pps.transfers.list({ status: "confirmed" })) console.log(t.transfer_id)
 * const { amount, memo } = await pps.transfers.decrypt(transfer.transfer_id)
 * ```
 *
 * @since 0.3.0
 */
import type { EncryptionKey } from "@pps/crypto"
import * as ApiKeys from "./ApiKeys.ts"
import * as Client from "./Client.ts"
import * as Confidential from "./Confidential.ts"
import { request } from "./internal/http.ts"
import * as SealedTransfers from "./SealedTransfers.ts"

/**
 * @since 0.3.0
 * @category models
 */
export interface Options {
  readonly apiKey: string
  /** Default `http://127.0.0.1:8080`. */
  readonly baseUrl?: string
  /** The account's key pair (a key file's): needed to seal transfers and to decrypt. */
  readonly keyPair?: EncryptionKey.KeyPair
  /** For an agent key: its owner's public key, which the agent's amounts are sealed to. */
  readonly senderKey?: EncryptionKey.PublicKey
  /**
   * For an agent key: a secret of its own, so a `transfers.create` repeated with the same
   * idempotency key seals identically (with a key pair, its secret key serves).
   */
  readonly sealingSecret?: Uint8Array
  /**
   * A chain RPC URL: before sealing, the chain id is compared with the RPC's and the
   * guardian's and recipients' keys are read from the pinned contract. Needs `deployment`.
   */
  readonly rpcUrl?: string
  /** The chain id and token contracts this client trusts, from the operator, not the API (`SealedTransfers.Deployment`). */
  readonly deployment?: SealedTransfers.Deployment
  /** `"api"` (default) or `"chain"`: refuse to seal unless `rpcUrl` and `deployment` let every key be checked. */
  readonly trust?: SealedTransfers.Trust
  /** Retries after a network failure, a timeout, 429 or 503. Default 3. */
  readonly maxRetries?: number
  /** Per attempt. Default 90 s (`defaultTimeoutMs`). */
  readonly timeoutMs?: number
  /** A fetch of your own (tests, proxies). */
  readonly fetch?: Client.Fetch
}

/** D13. @since 0.3.0 @category models */
export interface Transfer {
  readonly transfer_id: string
  readonly status: "pending" | "confirmed" | "failed"
  readonly from: string
  readonly to: string
  readonly confidential: boolean
  readonly asset: string
  readonly direction: "sent" | "received"
  readonly tx_hash: string | null
  readonly created_at: string
  readonly confirmed_at: string | null
}

/** D26: an agent's transfer held for its owner. @since 0.3.0 @category models */
export interface HeldTransaction {
  readonly transaction_id: string
  readonly status: string
  readonly agent: string
  readonly to: string
  readonly asset: string
  readonly confidential: boolean
  readonly requested_at: string
  readonly expires_at: string
  readonly transfer_id?: string | null
  readonly transfer_status?: string | null
}

/** @since 0.3.0 @category models */
export interface SpendPolicy {
  readonly daily_limit_usdg: number
  readonly per_transaction_limit_usdg: number
  readonly hitl_threshold_usdg?: number | null
  readonly allowed_recipients?: ReadonlyArray<string>
  readonly active_hours?: unknown
  readonly [field: string]: unknown
}

/** @since 0.3.0 @category models */
export interface Agent {
  readonly account_id: string
  readonly handle: string
  readonly [field: string]: unknown
}

/** @since 0.3.0 @category models */
export interface Webhook {
  readonly webhook_id: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly created_at: string
  /** Only in the answers that create or rotate it. */
  readonly secret?: string
}

/** @since 0.3.0 @category models */
export interface Page<A> {
  readonly data: ReadonlyArray<A>
  readonly limit: number
  readonly offset: number
  readonly has_more: boolean
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
 * How long 409 `idempotency_key_in_progress` is retried: the first attempt's run ends
 * within the server's longest create (above), whatever this client's own timeout is.
 */
const inProgressWindowMs = defaultTimeoutMs

const retryable = new Set([429, 503])
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether an answer is D6's "the first request with this key still runs". */
const inProgress = async (response: Response): Promise<boolean> => {
  if (response.status !== 409) return false
  const body: unknown = await response.clone().json().catch(() => undefined)
  return typeof body === "object" && body !== null && "error" in body && typeof body.error === "object" && body.error !== null &&
    "code" in body.error && body.error.code === "idempotency_key_in_progress"
}

const backoffMs = (attempt: number) => Math.min(500 * 2 ** attempt, 8_000) * (0.5 + Math.random() / 2)

const retryAfterMs = (response: Response): number | undefined => {
  const seconds = Number(response.headers.get("retry-after"))
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined
}

/** A random idempotency key: 128 bits from the platform's CSPRNG. */
const newIdempotencyKey = () => `pps_${globalThis.crypto.randomUUID()}`

/**
 * The transport the facade gives every request: an Idempotency-Key on each POST that
 * lacks one (the same on every attempt), retries with backoff, and a per-attempt timeout.
 * A 409 `idempotency_key_in_progress` is waited out with the same key (for up to
 * `inProgressWindowMs`, apart from `maxRetries`): giving up would leave the caller with an
 * error for a payment in flight, and a new call without a key would pay twice.
 */
const retryingFetch = (base: Client.Fetch, maxRetries: number, timeoutMs: number): Client.Fetch =>
async (url, init) => {
  const headers = new Headers(init.headers)
  if ((init.method ?? "GET").toUpperCase() === "POST" && !headers.has("idempotency-key")) {
    headers.set("idempotency-key", newIdempotencyKey())
  }
  let inProgressSince: number | undefined
  for (let attempt = 0, waits = 0;;) {
    let response: Response
    try {
      response = await base(url, { ...init, headers, signal: AbortSignal.timeout(timeoutMs) })
    } catch (cause) {
      if (attempt >= maxRetries) throw cause
      await sleep(backoffMs(attempt++))
      continue
    }
    if (await inProgress(response)) {
      inProgressSince ??= Date.now()
      if (Date.now() - inProgressSince >= inProgressWindowMs) return response
      await response.body?.cancel()
      await sleep(retryAfterMs(response) ?? backoffMs(waits++))
      continue
    }
    if (!retryable.has(response.status) || attempt >= maxRetries) return response
    await response.body?.cancel()
    await sleep(retryAfterMs(response) ?? backoffMs(attempt))
    attempt++
  }
}

const query = (values: Readonly<Record<string, string | number | boolean | undefined>>): string => {
  const entries = Object.entries(values).filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined)
  return entries.length === 0 ? "" : `?${new URLSearchParams(entries.map(([name, value]) => [name, String(value)])).toString()}`
}

const id = (value: string) => encodeURIComponent(value)

/**
 * The client. One per API key; safe to share.
 *
 * @since 0.3.0
 * @category constructors
 */
export class Pps {
  readonly client: Client.Client
  readonly #options: Options

  constructor(options: Options) {
    this.#options = options
    this.client = Client.make({
      apiKey: options.apiKey,
      ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }),
      fetch: retryingFetch(
        options.fetch ?? ((url, init) => globalThis.fetch(url, init)),
        options.maxRetries ?? 3,
        options.timeoutMs ?? defaultTimeoutMs
      )
    })
  }

  #keyPair(): EncryptionKey.KeyPair {
    const keyPair = this.#options.keyPair
    if (keyPair === undefined) throw new Error("this needs the account's key pair: new Pps({ apiKey, keyPair })")
    return keyPair
  }

  async #json<A>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, body?: unknown, idempotencyKey?: string): Promise<A> {
    const answer = await request(this.client, method, path, {
      ...(body === undefined ? {} : { body }),
      ...(idempotencyKey === undefined ? {} : { headers: { "idempotency-key": idempotencyKey } })
    })
    return answer.json as A
  }

  /** Every page of a list, as one async iteration. */
  async *#pages<A>(path: string, values: Readonly<Record<string, string | number | boolean | undefined>>): AsyncGenerator<A> {
    const limit = Number(values["limit"] ?? 100)
    for (let offset = Number(values["offset"] ?? 0);; offset += limit) {
      const page = await this.#json<Page<A>>("GET", `${path}${query({ ...values, limit, offset })}`)
      yield* page.data
      if (!page.has_more) return
    }
  }

  /**
   * Transfers (D13-D18). `create` seals the amount and memo here unless `confidential` is
   * false (a standard transfer's amount is public on chain).
   */
  readonly transfers = {
    create: async (
      transfer: { readonly to: string; readonly amount: string; readonly memo?: string; readonly asset?: string; readonly confidential?: boolean },
      /** `recipientAddress`: the address a handle `to` must resolve to (else the API's resolution is trusted). */
      options: { readonly idempotencyKey?: string; readonly recipientAddress?: string } = {}
    ): Promise<Transfer | HeldTransaction> => {
      const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey()
      if (transfer.confidential === false) {
        return this.#json("POST", "/v1/transfers", { ...transfer, confidential: false }, idempotencyKey)
      }
      const senderKey = this.#options.senderKey ?? this.#keyPair().publicKey
      const sealingSecret = this.#options.sealingSecret ?? this.#options.keyPair?.secretKey
      const answer = await SealedTransfers.send(this.client, {
        to: transfer.to,
        amount: transfer.amount,
        ...(transfer.memo === undefined ? {} : { memo: transfer.memo }),
        ...(transfer.asset === undefined ? {} : { asset: transfer.asset })
      }, {
        senderKey,
        idempotencyKey,
        ...(sealingSecret === undefined ? {} : { sealingSecret }),
        ...(this.#options.rpcUrl === undefined ? {} : { rpcUrl: this.#options.rpcUrl }),
        ...(this.#options.deployment === undefined ? {} : { deployment: this.#options.deployment }),
        ...(this.#options.trust === undefined ? {} : { trust: this.#options.trust }),
        ...(options.recipientAddress === undefined ? {} : { recipientAddress: options.recipientAddress })
      })
      return answer.body as Transfer | HeldTransaction
    },
    get: (transferId: string): Promise<Transfer> => this.#json("GET", `/v1/transfers/${id(transferId)}`),
    /** Every transfer matching, newest first, across pages (D16). */
    list: (filter: {
      readonly status?: "pending" | "confirmed" | "failed"
      readonly from?: string
      readonly to?: string
      readonly includeAgents?: boolean
      readonly pageSize?: number
    } = {}): AsyncGenerator<Transfer> =>
      this.#pages("/v1/transfers", {
        status: filter.status,
        from: filter.from,
        to: filter.to,
        include_agents: filter.includeAgents,
        limit: filter.pageSize ?? 100
      }),
    /** Amount and memo, opened here and checked against the chain's ciphertext. */
    decrypt: (transferId: string) => Confidential.decryptTransfer(this.client, this.#keyPair(), transferId)
  }

  /** Balances, decrypted here and proven to the API (D20). */
  readonly balances = {
    read: () => Confidential.readBalances(this.client, this.#keyPair())
  }

  /** Agent accounts and their spend policies (D21-D24). */
  readonly agents = {
    create: (agent: { readonly name: string; readonly spend_policy: SpendPolicy }, options: { readonly idempotencyKey?: string } = {}): Promise<Agent> =>
      this.#json("POST", "/v1/accounts/me/agents", agent, options.idempotencyKey),
    list: (): Promise<{ readonly agents: ReadonlyArray<Agent> }> => this.#json("GET", "/v1/accounts/me/agents"),
    policy: {
      get: (agentId: string): Promise<SpendPolicy> => this.#json("GET", `/v1/agents/${id(agentId)}/spend-policy`),
      update: (agentId: string, patch: Partial<SpendPolicy>): Promise<SpendPolicy> =>
        this.#json("PATCH", `/v1/agents/${id(agentId)}/spend-policy`, patch)
    }
  }

  /** Held agent transactions (D26-D28): open the amount here before deciding. */
  readonly approvals = {
    list: (): Promise<{ readonly pending: ReadonlyArray<HeldTransaction> }> => this.#json("GET", "/v1/agents/transactions/pending"),
    /** The amount the guardian would pay, and whether the agent's own note agrees. */
    open: (transactionId: string) => Confidential.openHeld(this.client, this.#keyPair(), transactionId),
    approve: (transactionId: string): Promise<HeldTransaction> =>
      this.#json("POST", `/v1/agents/transactions/${id(transactionId)}/approve`, {}),
    reject: (transactionId: string): Promise<HeldTransaction> =>
      this.#json("POST", `/v1/agents/transactions/${id(transactionId)}/reject`, {})
  }

  /** Webhook subscriptions (D33-D35). The secret is in the create and rotate answers only. */
  readonly webhooks = {
    create: (webhook: { readonly url: string; readonly events: ReadonlyArray<string> }): Promise<Webhook> =>
      this.#json("POST", "/v1/webhooks", webhook),
    list: (): Promise<{ readonly data: ReadonlyArray<Webhook> }> => this.#json("GET", "/v1/webhooks"),
    delete: async (webhookId: string): Promise<void> => {
      await this.#json("DELETE", `/v1/webhooks/${id(webhookId)}`)
    },
    rotateSecret: (webhookId: string): Promise<{ readonly webhook_id: string; readonly secret: string; readonly previous_secret_expires_at: string }> =>
      this.#json("POST", `/v1/webhooks/${id(webhookId)}/rotate-secret`, {}),
    deliveries: (webhookId: string, page: { readonly limit?: number; readonly offset?: number } = {}): Promise<Page<Record<string, unknown>>> =>
      this.#json("GET", `/v1/webhooks/${id(webhookId)}/deliveries${query({ limit: page.limit, offset: page.offset })}`),
    replay: (webhookId: string, eventId: string): Promise<{ readonly delivery_id: string; readonly event_id: string; readonly status: string }> =>
      this.#json("POST", `/v1/webhooks/${id(webhookId)}/replay/${id(eventId)}`, {})
  }

  /** The account's API keys with last use, request count and decrypted totals (D40). */
  readonly keys = {
    list: () => ApiKeys.list(this.client, this.#keyPair())
  }
}
