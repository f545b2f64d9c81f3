/**
 * Path ids are part of the contract: a well-formed id decodes, and anything else is
 * refused with the not-found answer of its resource (never echoing the value), which
 * the server's request validation turns into that resource's 404.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { TransferNotFound } from "../src/Errors.ts"
import { notFoundOfIssue, pathId } from "../src/PathIds.ts"

const transferId = pathId("tr", () => TransferNotFound.of())
const decode = Schema.decodeUnknownEffect(transferId)

describe("pathId", () => {
  it.effect("decodes a well-formed id", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* decode("tr_01JAZ3Y8X6Q4M2N7P5R9S0T1V2"), "tr_01JAZ3Y8X6Q4M2N7P5R9S0T1V2")
    }))

  it.effect("refuses another prefix, a lower-case ULID and control bytes with the resource's not-found body", () =>
    Effect.gen(function*() {
      for (const value of ["wh_01JAZ3Y8X6Q4M2N7P5R9S0T1V2", "tr_01jaz3y8x6q4m2n7p5r9s0t1v2", "tr_\u0000", "tr_01JAZ3Y8X6Q4M2N7P5R9S0T1VU"]) {
        const error = yield* Effect.flip(decode(value))
        const body = notFoundOfIssue(error.issue)
        assert.strictEqual(body?.error.code, "transfer_not_found", value)
        assert.notInclude(body?.error.message ?? "", value)
      }
    }))
})
