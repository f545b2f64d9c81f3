/**
 * The catalogue is one table: each class carries its code and status, codes are unique,
 * `of` builds D1's body with that code, the body encodes as D1's envelope (the tag never
 * reaches the wire), and `Effect.catchTag` tells the classes apart.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Errors from "../src/Errors.ts"

describe("the error catalogue", () => {
  it("has unique codes, each with a 4xx or 5xx status", () => {
    const entries = Object.entries(Errors.catalogue)
    assert.isAbove(entries.length, 30)
    assert.strictEqual(new Set(entries.map(([, error]) => error.code)).size, entries.length)
    for (const [tag, error] of entries) {
      assert.match(error.code, /^[a-z_]+$/, tag)
      assert.isTrue(error.status >= 400 && error.status <= 599, tag)
      assert.strictEqual(error.name, tag)
    }
    // SPEC's table, spot-checked: the statuses clients rely on most.
    assert.deepStrictEqual(
      [Errors.InsufficientBalance.status, Errors.RecipientNotConfidentialReady.status, Errors.TransactionExpired.status, Errors.Unauthorized.status],
      [402, 422, 409, 401]
    )
  })

  it.effect("builds D1's body, encodes it without the tag, and is told apart by its tag", () =>
    Effect.gen(function*() {
      const missing = Errors.AgentNotFound.of("acct_01JAZ3Y8X6Q4M2N7P5R9S0T1V2")
      assert.deepStrictEqual(missing.error, {
        code: "agent_not_found",
        message: "No agent account acct_01JAZ3Y8X6Q4M2N7P5R9S0T1V2.",
        param: "account_id"
      })
      const encoded = yield* Schema.encodeEffect(Errors.AgentNotFound)(missing)
      assert.deepStrictEqual(encoded, { error: missing.error })
      assert.deepStrictEqual(Errors.KycRequired.of().error, {
        code: "kyc_required",
        message: "Identity verification is not completed for this account."
      })
      const refused: Effect.Effect<string, Errors.InsufficientBalance | Errors.PolicyViolation> = Effect.fail(
        Errors.PolicyViolation.of("daily_limit_exceeded")
      )
      const caught = yield* refused.pipe(
        Effect.catchTag("InsufficientBalance", () => Effect.succeed("balance")),
        Effect.catchTag("PolicyViolation", (error) => Effect.succeed(error.error.reason))
      )
      assert.strictEqual(caught, "daily_limit_exceeded")
    }))
})
