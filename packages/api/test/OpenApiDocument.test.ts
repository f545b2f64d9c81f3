/**
 * The request fields the schemas leave open for the server's own checks (a spend policy, a
 * webhook's event types) are typed in the OpenAPI document, and only there: the request
 * schemas the server decodes with stay open, so a bad policy is still 400 `invalid_policy`.
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
