/**
 * What the generated OpenAPI document needs besides what the endpoints' schemas say:
 * a summary per operation, the servers, the licence and tag descriptions, the
 * `Idempotency-Key` request header of every POST (D6), the response headers every
 * answer carries (`X-Request-Id`; `Idempotent-Replayed` on a replay; `Retry-After` on
 * 429 and 503), and the list queries' `limit`/`offset` as the integers they are (the
 * contract decodes them from text, `Page.PageLimitQuery`, and the generator documents a
 * number decoded from text as a string). Applied once,
 * to the whole document, as an `OpenApi.Transform` on the API.
 *
 * `redocly lint` with its recommended rules finds no error in the result
 * (packages/server/test/openapi.test.ts).
 *
 * @since 0.3.0
 */
import { eventTypes } from "./Events.ts"
import { pageLimitMax } from "./Page.ts"

/**
 * One line per operation, by operation id (`group.endpoint`). An operation without one
 * is a defect the OpenAPI test reports.
 *
 * @since 0.3.0
 * @category constants
 */
export const summaries: Readonly<Record<string, string>> = {
  "accounts.me": "Read the caller's account",
  "accounts.encryptionKey": "Read the encryption key status and what a proof binds",
  "accounts.registerEncryptionKey": "Register the account's encryption key",
  "accounts.rotateEncryptionKey": "Replace the account's encryption key, keeping its balance",
  "accounts.balances": "Read balances (non-zero flags, or amounts with a decryption proof)",
  "accounts.apiKeys": "List the account's API keys with their sealed totals",
  "accounts.sealedBalances": "Read the balances sealed to the account's key",
  "transfers.create": "Create a transfer (plain or client-sealed)",
  "transfers.list": "List transfers",
  "transfers.prepare": "Prepare a client-sealed transfer",
  "transfers.get": "Read a transfer",
  "transfers.refund": "Refund a received transfer to its sender",
  "transfers.sealed": "Read the caller's sealed copy of a transfer",
  "agents.create": "Create an agent account",
  "agents.list": "List the caller's agents",
  "agents.page": "List the caller's agents, a page at a time",
  "agents.getPolicy": "Read an agent's spend policy",
  "agents.patchPolicy": "Update an agent's spend policy",
  "agents.createKey": "Create an API key for an agent",
  "agents.listKeys": "List an agent's API keys",
  "agents.revokeKey": "Revoke an agent's API key",
  "agents.rotateKey": "Replace an agent's API key in one step",
  "agents.getTransaction": "Read a held agent transaction's state",
  "agents.pending": "List held agent transactions",
  "agents.sealedTransaction": "Read a held transaction sealed to the owner's key",
  "agents.approve": "Approve a held agent transaction",
  "agents.reject": "Reject a held agent transaction",
  "test.faucet": "Get test USDG (testnet keys only)",
  "test.grants": "List the caller's faucet grants (testnet keys only)",
  "webhooks.create": "Create a webhook subscription",
  "webhooks.list": "List webhook subscriptions",
  "webhooks.get": "Get a webhook subscription",
  "webhooks.update": "Change a webhook subscription (url, events, enabled)",
  "events.list": "List the account's events",
  "events.get": "Get an event",
  "webhooks.remove": "Delete a webhook subscription",
  "webhooks.rotateSecret": "Rotate a webhook's signing secret",
  "webhooks.deliveries": "List a webhook's deliveries",
  "webhooks.replay": "Replay an event to a webhook",
  "events.stream": "Stream the account's events (server-sent events)"
}

const tagDescriptions: Readonly<Record<string, string>> = {
  accounts: "The caller's account, its encryption key, balances and API keys.",
  transfers: "Confidential and standard USDG/ETH transfers; amounts are never in an answer.",
  agents: "Agent accounts, their spend policies and API keys, and the owner's approval of held transactions.",
  test: "Testnet helpers (hc_test_ keys only).",
  webhooks: "Webhook subscriptions, their delivery log and replay.",
  events: "The account's events as a live, resumable stream."
}

const header = (description: string, schema: Record<string, unknown> = { type: "string" }) => ({ description, schema })

/** Query parameters that are integers on the wire, with their bounds. */
const integerQueries: Readonly<Record<string, { readonly minimum: number; readonly maximum?: number }>> = {
  limit: { minimum: 1, maximum: pageLimitMax },
  offset: { minimum: 0 }
}

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)

const completeOperation = (method: string, operation: Json): Json => {
  const operationId = typeof operation["operationId"] === "string" ? operation["operationId"] : ""
  const parameters = Array.isArray(operation["parameters"]) ? operation["parameters"].filter(isObject) : []
  const typed = parameters.map((parameter) => {
    const bounds = parameter["in"] === "query" && typeof parameter["name"] === "string" ? integerQueries[parameter["name"]] : undefined
    if (bounds === undefined) return parameter
    const schema = isObject(parameter["schema"]) ? parameter["schema"] : {}
    const description = typeof schema["description"] === "string" ? { description: schema["description"] } : {}
    return { ...parameter, schema: { type: "integer", ...bounds, ...description } }
  })
  if (method === "post") {
    typed.push({
      name: "Idempotency-Key",
      in: "header",
      required: false,
      description: "D6/D36: 1-255 characters naming one operation for 24 hours; a retry with the same key and body replays the first answer.",
      schema: { type: "string", minLength: 1, maxLength: 255 }
    })
  }
  const responses = isObject(operation["responses"]) ? operation["responses"] : {}
  const withHeaders = Object.fromEntries(Object.entries(responses).map(([status, response]) => {
    if (!isObject(response)) return [status, response]
    const headers: Json = {
      ...(isObject(response["headers"]) ? response["headers"] : {}),
      "X-Request-Id": header("The request's id (`req_…`), also in every error body's `request_id`.")
    }
    if (method === "post" && status.startsWith("2")) {
      headers["Idempotent-Replayed"] = header("`true` when the answer is the replay of an earlier request with the same Idempotency-Key.")
    }
    if (status === "429" || status === "503") {
      headers["Retry-After"] = header("Seconds to wait before retrying.", { type: "integer", minimum: 0 })
    }
    return [status, { ...response, headers }]
  }))
  return {
    ...operation,
    summary: summaries[operationId] ?? operation["summary"],
    ...(typed.length === 0 ? {} : { parameters: typed }),
    responses: withHeaders
  }
}

/**
 * The transform of the whole document.
 *
 * @since 0.3.0
 * @category transforms
 */
/**
 * The spend policy's fields as JSON Schema. The request schemas leave `spend_policy` and the
 * PATCH body open (`Unknown`) on purpose: `validatePolicy` checks the whole object and answers
 * 400 `invalid_policy` naming the field (SPEC's table), where a typed request schema would
 * answer `invalid_request`. So the types are written into the document only: clients
 * generated from it get typed policies, and what the server decodes and answers is unchanged.
 */
const limit = (description: string) => ({ type: "number", minimum: 0, maximum: 1_000_000_000_000, description })
const policyProperties: Json = {
  daily_limit_usdg: limit("Most the agent may send per day in its time zone, in USDG (at most 6 decimals)."),
  per_transaction_limit_usdg: limit("Most one transfer may send, in USDG (at most 6 decimals)."),
  hitl_threshold_usdg: { ...limit("Transfers above it wait for the owner's approval (D26); null: never held."), type: ["number", "null"] },
  allowed_recipients: {
    type: ["array", "null"],
    items: { type: "string" },
    description: "Handles, 0x addresses and `*.domain` wildcards (D23); null: anyone."
  },
  assets: { type: "array", items: { type: "string", enum: ["USDG", "ETH"] }, description: "Assets the agent may send (default USDG)." },
  active_hours: { type: "string", pattern: "^\\d{2}:\\d{2}-\\d{2}:\\d{2}$", description: "`HH:MM-HH:MM` in `time_zone`; may wrap midnight." },
  time_zone: { type: "string", description: "IANA zone of the day and the hours (default UTC)." }
}

/** Types the request fields the schemas leave open for the server's own checks (see above). */
const typeOpenInputs = (schemas: Json): Json => {
  const object = (name: string): Json => (isObject(schemas[name]) ? schemas[name] : {})
  const properties = (schema: Json): Json => (isObject(schema["properties"]) ? schema["properties"] : {})
  const webhook = object("CreateWebhookRequest")
  const webhookProperties = properties(webhook)
  const events = isObject(webhookProperties["events"]) ? webhookProperties["events"] : {}
  const agent = object("CreateAgentRequest")
  const patch = object("SpendPolicyPatch")
  const policy = (description: string) => ({ type: "object", description, properties: policyProperties, additionalProperties: false })
  return {
    ...schemas,
    // `parseEventTypes` checks the entries to name the one at fault; the document lists them.
    CreateWebhookRequest: {
      ...webhook,
      properties: { ...webhookProperties, events: { ...events, items: { type: "string", enum: [...eventTypes] } } }
    },
    CreateAgentRequest: {
      ...agent,
      properties: {
        ...properties(agent),
        spend_policy: {
          ...policy("D22: the agent's spend policy, validated whole (400 invalid_policy naming the field)."),
          required: ["daily_limit_usdg", "per_transaction_limit_usdg"]
        }
      }
    },
    SpendPolicyPatch: { ...patch, ...policy(typeof patch["description"] === "string" ? patch["description"] : "D24: fields to change.") }
  }
}

export const completeDocument = (spec: Record<string, unknown>): Record<string, unknown> => {
  const paths = isObject(spec["paths"]) ? spec["paths"] : {}
  const completedPaths = Object.fromEntries(Object.entries(paths).map(([path, item]) => [
    path,
    isObject(item)
      ? Object.fromEntries(Object.entries(item).map(([method, operation]) => [
        method,
        isObject(operation) ? completeOperation(method, operation) : operation
      ]))
      : item
  ]))
  const tags = Array.isArray(spec["tags"]) ? spec["tags"].filter(isObject) : []
  const info = isObject(spec["info"]) ? spec["info"] : {}
  const components = isObject(spec["components"]) ? spec["components"] : {}
  return {
    ...spec,
    info: { ...info, license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" } },
    servers: [
      { url: "http://127.0.0.1:8080", description: "The embedded default (`npm start`)." }
    ],
    tags: tags.map((tag) => ({ ...tag, description: tagDescriptions[String(tag["name"])] ?? tag["description"] })),
    paths: completedPaths,
    components: { ...components, schemas: typeOpenInputs(isObject(components["schemas"]) ? components["schemas"] : {}) }
  }
}
