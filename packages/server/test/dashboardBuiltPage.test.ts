/**
 * Goal: the dashboard's files go out in the encoding the client accepts (RFC 9110 12.5.3
 * weights, `*`, a refused `br;q=0`), Brotli before gzip, and as built when it accepts neither.
 */
import { assert, describe, it } from "@effect/vitest"
import { acceptedEncodings } from "../src/dashboard/BuiltPage.ts"

const accepted = (header: string | undefined) => [...acceptedEncodings(header)].sort()

describe("the dashboard's content negotiation", () => {
  it("takes what a browser lists, and nothing without a header", () => {
    assert.deepStrictEqual(accepted("gzip, deflate, br, zstd"), ["br", "gzip"])
    assert.deepStrictEqual(accepted("gzip"), ["gzip"])
    assert.deepStrictEqual(accepted(undefined), [])
    assert.deepStrictEqual(accepted(""), [])
    assert.deepStrictEqual(accepted("identity"), [])
  })

  it("reads weights: q=0 refuses, any other weight accepts, a malformed one refuses", () => {
    assert.deepStrictEqual(accepted("br;q=0, gzip;q=0.5"), ["gzip"])
    assert.deepStrictEqual(accepted("BR ; Q=0.1"), ["br"])
    assert.deepStrictEqual(accepted("br;q=x"), [])
  })

  it("covers the unlisted with *, and lets a listed weight win over it", () => {
    assert.deepStrictEqual(accepted("*"), ["br", "gzip"])
    assert.deepStrictEqual(accepted("*;q=0"), [])
    assert.deepStrictEqual(accepted("*, br;q=0"), ["gzip"])
  })
})
