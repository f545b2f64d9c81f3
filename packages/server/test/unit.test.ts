/**
 * The pure rules of the foundation: handles (D10), API key format and modes
 * (D8, D9), ids (D3), log redaction, and that validation messages never carry
 * the rejected value.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { canonicalAccountHandle, canonicalHandle, displayHandle, isKycSufficient } from "@pps/api/Accounts"
import { chainIdOfMode, modeOfApiKey } from "@pps/api/ApiKeys"
import { describeIssue } from "../src/http/RequestValidation.ts"
import { isId, makeId, ulid } from "../src/platform/Ids.ts"
import { redact, redactText } from "../src/platform/Logging.ts"
import { checkToken, makeToken, preparationKey } from "../src/transfers/preparation.ts"

describe("handles (D10)", () => {
  it("accepts 3-30 of a-z 0-9 _ - . case-insensitively, with an optional @", () => {
    assert.strictEqual(canonicalHandle("Alice"), "alice")
    assert.strictEqual(canonicalHandle("@a.b-c_9"), "a.b-c_9")
    assert.strictEqual(canonicalHandle("abc"), "abc")
    assert.strictEqual(canonicalHandle("x".repeat(30)), "x".repeat(30))
    for (const bad of ["ab", "x".repeat(31), "a b", "a/b", "@@abc", "émile", "", "ab!"]) {
      assert.isUndefined(canonicalHandle(bad), bad)
    }
    assert.strictEqual(displayHandle("alice"), "@alice")
  })
  it("KYC: only verified and enhanced may move money or read balances (D11)", () => {
    assert.deepStrictEqual(
      (["unverified", "pending", "verified", "enhanced"] as const).map(isKycSufficient),
      [false, false, true, true]
    )
  })
})

describe("API keys (D8, D9)", () => {
  it("tells the mode of a well-formed key and refuses everything else", () => {
    const random = "A".repeat(42) + "_"
    assert.strictEqual(modeOfApiKey(`hc_test_${random}`), "test")
    assert.strictEqual(modeOfApiKey(`hc_live_${random}`), "live")
    for (const bad of [`hc_test_${random}x`, `hc_test_${random.slice(1)}`, `hc_prod_${random}`, `HC_TEST_${random}`, `hc_test_${"=".repeat(43)}`, ""]) {
      assert.isUndefined(modeOfApiKey(bad), bad)
    }
    assert.deepStrictEqual(chainIdOfMode, { test: 46630, live: 4663 })
  })
})

describe("ids (D3)", () => {
  it("are prefix + 26 Crockford base32 characters, sort by time, and do not repeat", () => {
    const id = makeId("acct")
    assert.isTrue(isId("acct", id))
    assert.isFalse(isId("key", id))
    const earlier = ulid(1_700_000_000_000)
    const later = ulid(1_700_000_000_001)
    assert.isTrue(earlier < later)
    // 1_700_000_000_000 ms in 10 Crockford base32 digits (computed independently).
    assert.strictEqual(earlier.slice(0, 10), "01HF7YAT00")
    // Mostly in the same millisecond, and across some twenty refills of the ids' random pool.
    const many = new Set(Array.from({ length: 10_000 }, () => makeId("tr")))
    assert.strictEqual(many.size, 10_000)
  })
})

describe("log redaction", () => {
  it("masks sensitive fields by name and secrets inside any text", () => {
    const key = "hc_live_" + "b".repeat(43)
    const out = JSON.stringify(redact({
      amount: "12.5",
      memo: "rent",
      nested: { api_key: "x", decryption_proof: "AAAA", safe: `presented ${key} and Bearer abc.def` },
      list: [{ privateKey: "0x" + "1".repeat(64) }],
      transfer_id: "tr_1",
      big: 10n
    }))
    for (const leaked of ["12.5", "rent", key, "AAAA", "abc.def", "1".repeat(64)]) assert.notInclude(out, leaked)
    assert.include(out, "tr_1")
    assert.strictEqual(redactText("whsec_abc123 and adm_xyz"), "[REDACTED] and [REDACTED]")
  })
})

describe("validation messages", () => {
  it("name the field but never the rejected value", () => {
    const schema = Schema.Struct({ amount: Schema.String, memo: Schema.optionalKey(Schema.String) })
    const result = Schema.decodeUnknownExit(schema)({ amount: 98765.4321, memo: "secret memo" })
    assert.isTrue(result._tag === "Failure")
    const issue = Schema.decodeUnknownOption(schema)({ amount: 98765.4321 })
    assert.isTrue(issue._tag === "None")
    try {
      Schema.decodeUnknownSync(schema)({ amount: 98765.4321, memo: "secret memo" })
      assert.fail("expected a decoding failure")
    } catch (error) {
      const described = describeIssue("Payload", (error as Schema.SchemaError).issue)
      assert.strictEqual(described.param, "amount")
      assert.notInclude(described.message, "98765")
      assert.notInclude(described.message, "secret memo")
    }
    try {
      Schema.decodeUnknownSync(schema)({})
      assert.fail("expected a decoding failure")
    } catch (error) {
      const described = describeIssue("Payload", (error as Schema.SchemaError).issue)
      assert.deepStrictEqual(described, { message: "The body field 'amount' is required.", param: "amount" })
    }
  })
})

describe("any account's handle (D10, D21)", () => {
  it("is an account handle or an agent's owner/name, canonical", () => {
    assert.strictEqual(canonicalAccountHandle("@Alice"), "alice")
    assert.strictEqual(canonicalAccountHandle("@alice/Shopper-1"), "alice/shopper-1")
    for (const bad of ["@al", "alice/", "alice/a_b", "alice/x/y", "/agent", "@@alice", "alice/" + "a".repeat(33)]) {
      assert.isUndefined(canonicalAccountHandle(bad), bad)
    }
  })
})

describe("prepared transfer tokens (ext)", () => {
  const key = preparationKey(new Uint8Array(32).fill(1))
  const facts = {
    transferId: "tr_01JZ0000000000000000000000",
    senderAccountId: "acct_a",
    mode: "test",
    asset: "USDG",
    recipientAddress: "0x00000000000000000000000000000000000000Aa",
    senderKey: "0x01",
    recipientKey: "0x02"
  }
  const now = 1_800_000_000_000
  const token = makeToken(key, { ...facts, expiresAtMs: now + 60_000 })
  it("stands for exactly what was prepared, until it expires", () => {
    assert.isUndefined(checkToken(key, token, facts, now))
    // Addresses compare without their checksum case.
    assert.isUndefined(checkToken(key, token, { ...facts, recipientAddress: facts.recipientAddress.toLowerCase() }, now))
    assert.strictEqual(checkToken(key, token, facts, now + 60_000), "expired")
    for (const [name, value] of Object.entries({
      transferId: "tr_01JZ0000000000000000000001",
      senderAccountId: "acct_b",
      mode: "live",
      asset: "ETH",
      recipientAddress: "0x00000000000000000000000000000000000000Ab",
      senderKey: "0x03",
      recipientKey: "0x04"
    })) {
      assert.strictEqual(checkToken(key, token, { ...facts, [name]: value }, now), "mismatch", name)
    }
    assert.strictEqual(checkToken(preparationKey(new Uint8Array(32).fill(2)), token, facts, now), "mismatch")
  })
  it("an edited expiry is a mismatch; a malformed token is malformed", () => {
    const [version, expiry, mac] = token.split(".")
    assert.strictEqual(checkToken(key, `${version}.${Number(expiry) + 1}.${mac}`, facts, now), "mismatch")
    for (const bad of ["", "v1", `v2.${expiry}.${mac}`, `v1.${expiry}.${mac}x`, `v1.12.${mac}`]) {
      assert.strictEqual(checkToken(key, bad, facts, now), "malformed", bad)
    }
  })
})
