/**
 * The request fields the schemas leave open for the server's own checks (a spend policy, a
 * webhook's event types) are typed in the OpenAPI document, and only there: the request
 * schemas the server decodes with stay open, so a bad policy is still 400 `invalid_policy`.
 * The live event stream is documented as server-sent events carrying the webhook payloads, and
 * the headers clients send instead of a body or a URL parameter (the stream's `Last-Event-ID`,
 * the balance proof's `X-Decryption-Proof`) are declared.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { OpenApi } from "effect/http-api"
import { CreateAgentRequest, PatchSpendPolicyRequest } from "../src/Agents.ts"
import { PublicApi } from "../src/Api.ts"
import { eventTypes } from "../src/Events.ts"

const document: unknown = OpenApi.fromApi(PublicApi)
/** The value at a path of the document (undefined where there is none). */
const at = (...keys: ReadonlyArray<string>): unknown =>
  keys.reduce<unknown>((value, key) => (typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined), document)
const schema = (...keys: ReadonlyArray<string>) => at("components", "schemas", ...keys)

describe("the OpenAPI document's open inputs", () => {
  it("lists the event types a webhook may subscribe to", () => {
    assert.deepStrictEqual(schema("CreateWebhookRequest", "properties", "events", "items"), { type: "string", enum: [...eventTypes] })
  })

  it("types the spend policy on create (both limits required) and on PATCH (any subset), no other field", () => {
    const created = ["CreateAgentRequest", "properties", "spend_policy"]
    assert.deepStrictEqual(schema(...created, "required"), ["daily_limit_usdg", "per_transaction_limit_usdg"])
    assert.strictEqual(schema(...created, "additionalProperties"), false)
    assert.deepStrictEqual(schema(...created, "properties", "hitl_threshold_usdg", "type"), ["number", "null"])
    assert.strictEqual(schema("SpendPolicyPatch", "type"), "object")
    assert.strictEqual(schema("SpendPolicyPatch", "required"), undefined)
    assert.strictEqual(schema("SpendPolicyPatch", "additionalProperties"), false)
    assert.deepStrictEqual(Object.keys(schema("SpendPolicyPatch", "properties") ?? {}), Object.keys(schema(...created, "properties") ?? {}))
  })

  it("leaves the decoding schemas open, so the server's policy checks still answer invalid_policy", () => {
    assert.isTrue(Schema.is(CreateAgentRequest)({ name: "bot", spend_policy: { daily_limit_usdg: -1, surprise: true } }))
    assert.isTrue(Schema.is(PatchSpendPolicyRequest)({ daily_limit_usdg: "ten" }))
  })
})

describe("the OpenAPI document's event stream and declared headers", () => {
  const parameters = (route: string) =>
    (at("paths", route, "get", "parameters") as ReadonlyArray<{ readonly name: string; readonly in: string }> | undefined ?? [])
      .map((parameter) => `${parameter.in} ${parameter.name}`)

  it("documents GET /v1/events/stream as text/event-stream whose data is a webhook payload of each event type", () => {
    const content = at("paths", "/v1/events/stream", "get", "responses", "200", "content") as Record<string, unknown>
    assert.deepStrictEqual(Object.keys(content), ["text/event-stream"])
    const data = ["paths", "/v1/events/stream", "get", "responses", "200", "content", "text/event-stream", "schema", "properties", "data"]
    assert.strictEqual(at(...data, "contentMediaType"), "application/json")
    const payloads = at(...data, "contentSchema", "anyOf") as ReadonlyArray<{ readonly properties: { readonly event: { readonly enum?: ReadonlyArray<string>; readonly const?: string } } }>
    const documented = payloads.flatMap((payload) => payload.properties.event.enum ?? [payload.properties.event.const ?? ""])
    assert.deepStrictEqual([...documented].sort(), [...eventTypes].sort())
    assert.includeMembers(parameters("/v1/events/stream"), ["header last-event-id", "query after"])
  })

  it("declares X-Decryption-Proof on the balances, next to the decryption_proof query", () => {
    assert.includeMembers(parameters("/v1/accounts/me/balances"), ["header x-decryption-proof", "query decryption_proof"])
  })
})
