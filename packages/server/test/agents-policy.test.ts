/**
 * The pure spend-policy rules (D22-D25): validation of whole policies and
 * partial updates, exact conversion of JSON-number limits, D23's recipient
 * matching with wildcards, and the active-hours window across midnight, time
 * zones and DST days. Tables of cases, each checked both ways where it matters.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  amountFreeViolation,
  canonicalRecipientEntry,
  entryMatches,
  isRecipientAllowed,
  isWithinActiveHours,
  parseActiveHours,
  type PolicyRules,
  policySnapshot,
  toSpendPolicyRecord,
  validatePolicy
} from "@pps/api/Agents"

const at = (iso: string) => Date.parse(iso)

const valid = (input: unknown, base?: PolicyRules, prefix = "") => {
  const result = validatePolicy(input, base, prefix)
  if (!result.ok) throw new Error(`expected a valid policy, got ${result.issue.param}: ${result.issue.message}`)
  return result.value
}

const invalidParam = (input: unknown, base?: PolicyRules, prefix = "") => {
  const result = validatePolicy(input, base, prefix)
  if (result.ok) throw new Error(`expected ${JSON.stringify(input)} to be refused`)
  return result.issue.param
}

describe("spend policy validation (D22, D24)", () => {
  it("applies D22's defaults and converts limits exactly to USDG base units", () => {
    const rules = valid({ daily_limit_usdg: 100.5, per_transaction_limit_usdg: 0.000001 })
    assert.strictEqual(rules.dailyLimitUnits, 100_500_000n)
    assert.strictEqual(rules.perTransactionLimitUnits, 1n)
    assert.strictEqual(rules.hitlThresholdUnits, null)
    assert.strictEqual(rules.allowedRecipients, null)
    assert.deepStrictEqual(rules.assets, ["USDG"])
    assert.strictEqual(rules.activeHours.text, "00:00-24:00")
    assert.strictEqual(rules.timeZone, "UTC")
    // 0.1 + 0.2 style float noise never enters: 0.3 is read from its decimal text "0.3".
    assert.strictEqual(valid({ daily_limit_usdg: 0.3, per_transaction_limit_usdg: 0.3 }).dailyLimitUnits, 300_000n)
    assert.strictEqual(valid({ daily_limit_usdg: 1e12, per_transaction_limit_usdg: 0 }).dailyLimitUnits, 10n ** 18n)
  })

  it("refuses every broken rule, naming its param", () => {
    const base = { daily_limit_usdg: 100, per_transaction_limit_usdg: 10 }
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [{ per_transaction_limit_usdg: 1 }, "spend_policy.daily_limit_usdg"],
      [{ daily_limit_usdg: 1 }, "spend_policy.per_transaction_limit_usdg"],
      [{ ...base, daily_limit_usdg: -1 }, "spend_policy.daily_limit_usdg"],
      [{ ...base, daily_limit_usdg: "100" }, "spend_policy.daily_limit_usdg"],
      [{ ...base, daily_limit_usdg: 1.0000001 }, "spend_policy.daily_limit_usdg"],
      [{ ...base, daily_limit_usdg: 1e13 }, "spend_policy.daily_limit_usdg"],
      [{ ...base, daily_limit_usdg: 1e-7 }, "spend_policy.daily_limit_usdg"],
      [{ ...base, per_transaction_limit_usdg: 100.000001 }, "spend_policy.per_transaction_limit_usdg"],
      [{ ...base, hitl_threshold_usdg: -0.5 }, "spend_policy.hitl_threshold_usdg"],
      [{ ...base, allowed_recipients: "@bob" }, "spend_policy.allowed_recipients"],
      [{ ...base, allowed_recipients: ["@bob", "not a name!"] }, "spend_policy.allowed_recipients.1"],
      [{ ...base, allowed_recipients: ["*.example.*"] }, "spend_policy.allowed_recipients.0"],
      [{ ...base, allowed_recipients: ["shop.*.com"] }, "spend_policy.allowed_recipients.0"],
      [{ ...base, allowed_recipients: Array.from({ length: 101 }, (_, i) => `@user${i}`) }, "spend_policy.allowed_recipients"],
      [{ ...base, assets: ["USDG", "DOGE"] }, "spend_policy.assets.1"],
      [{ ...base, assets: "USDG" }, "spend_policy.assets"],
      [{ ...base, active_hours: "09:00-09:00" }, "spend_policy.active_hours"],
      [{ ...base, active_hours: "00:00-00:00" }, "spend_policy.active_hours"],
      [{ ...base, active_hours: "24:00-06:00" }, "spend_policy.active_hours"],
      [{ ...base, active_hours: "09:00-24:30" }, "spend_policy.active_hours"],
      [{ ...base, active_hours: "9:00-17:00" }, "spend_policy.active_hours"],
      [{ ...base, active_hours: "09:60-17:00" }, "spend_policy.active_hours"],
      [{ ...base, time_zone: "Mars/Olympus_Mons" }, "spend_policy.time_zone"],
      [{ ...base, time_zone: 3 }, "spend_policy.time_zone"],
      [{ ...base, color: "blue" }, "spend_policy.color"],
      [{ ...base, policy_id: "pol_x" }, "spend_policy.policy_id"],
      [[], "spend_policy"]
    ]
    for (const [input, param] of cases) {
      assert.strictEqual(invalidParam(input, undefined, "spend_policy."), param, JSON.stringify(input))
    }
  })

  it("a partial update changes only the fields present, null clears, and the whole result is validated", () => {
    const base = valid({
      daily_limit_usdg: 100,
      per_transaction_limit_usdg: 10,
      hitl_threshold_usdg: 5,
      allowed_recipients: ["@Bob", "*.Example.com", "0xABCDEFabcdefABCDEFabcdefABCDEFabcdefABCD"],
      active_hours: "22:00-06:00",
      time_zone: "europe/paris"
    })
    assert.deepStrictEqual(base.allowedRecipients, ["bob", "*.example.com", "0xabcdefabcdefabcdefabcdefabcdefabcdefabcd"])
    assert.strictEqual(base.timeZone, "Europe/Paris")
    const patched = valid({ per_transaction_limit_usdg: 20 }, base)
    assert.strictEqual(patched.perTransactionLimitUnits, 20_000_000n)
    assert.strictEqual(patched.dailyLimitUnits, 100_000_000n)
    assert.strictEqual(patched.hitlThresholdUnits, 5_000_000n)
    assert.strictEqual(patched.activeHours.text, "22:00-06:00")
    const cleared = valid({ hitl_threshold_usdg: null, allowed_recipients: null, active_hours: null, time_zone: null }, base)
    assert.strictEqual(cleared.hitlThresholdUnits, null)
    assert.strictEqual(cleared.allowedRecipients, null)
    assert.strictEqual(cleared.activeHours.text, "00:00-24:00")
    assert.strictEqual(cleared.timeZone, "UTC")
    // Whole-object validation: a per-transaction limit above the existing daily limit is refused.
    assert.strictEqual(invalidParam({ per_transaction_limit_usdg: 101 }, base), "per_transaction_limit_usdg")
    assert.strictEqual(invalidParam({ daily_limit_usdg: 9 }, base), "per_transaction_limit_usdg")
    assert.strictEqual(invalidParam({ daily_limit_usdg: null }, base), "daily_limit_usdg")
    assert.deepStrictEqual(valid({ allowed_recipients: [] }, base).allowedRecipients, [])
  })

  it("the wire form gives the limits back as the same JSON numbers", () => {
    const rules = valid({ daily_limit_usdg: 1234.56789, per_transaction_limit_usdg: 0.1, hitl_threshold_usdg: 0 })
    const record = toSpendPolicyRecord({ ...rules, policyId: "pol_1", agentAccountId: "acct_1", updatedAt: "x" })
    assert.strictEqual(record.daily_limit_usdg, 1234.56789)
    assert.strictEqual(record.per_transaction_limit_usdg, 0.1)
    assert.strictEqual(record.hitl_threshold_usdg, 0)
  })

  it("limits are whole units of the asset spent: scaled to ETH's 18 decimals for the guardian", () => {
    const rules = valid({ daily_limit_usdg: 2, per_transaction_limit_usdg: 1.5, hitl_threshold_usdg: 1 })
    assert.deepStrictEqual(policySnapshot(rules, "USDG"), {
      perTransactionLimit: 1_500_000n,
      dailyLimit: 2_000_000n,
      hitlThreshold: 1_000_000n,
      timeZone: "UTC"
    })
    assert.strictEqual(policySnapshot(rules, "ETH").dailyLimit, 2n * 10n ** 18n)
  })
})

describe("recipient matching (D23)", () => {
  it("matches exact names and wildcards case-insensitively, never the bare domain", () => {
    const table: ReadonlyArray<readonly [string, string, boolean]> = [
      ["@bob", "bob", true],
      ["BOB", "bob", true],
      ["@bob", "bobby", false],
      ["@alice/bot", "alice/bot", true],
      ["@alice/bot", "alice", false],
      ["*.example.com", "shop.example.com", true],
      ["*.example.com", "a.b.example.com", true],
      ["*.Example.COM", "shop.example.com", true],
      ["*.example.com", "example.com", false],
      ["*.example.com", ".example.com", false],
      ["*.example.com", "a..example.com", false],
      ["*.example.com", "shopexample.com", false],
      ["*.example.com", "shop.example.com.evil", false],
      ["*.com", "example.com", true],
      ["0xABCDEFabcdefABCDEFabcdefABCDEFabcdefABCD", "0xabcdefabcdefabcdefabcdefabcdefabcdefabcd", true],
      ["0xabcdefabcdefabcdefabcdefabcdefabcdefabcd", "0xabcdefabcdefabcdefabcdefabcdefabcdefabce", false]
    ]
    for (const [entry, name, expected] of table) {
      const canonical = canonicalRecipientEntry(entry)
      assert.isDefined(canonical, entry)
      assert.strictEqual(entryMatches(canonical!, name), expected, `${entry} vs ${name}`)
    }
  })

  it("null allows anyone, [] no one, and any of the recipient's names counts", () => {
    assert.isTrue(isRecipientAllowed(null, ["anyone"]))
    assert.isFalse(isRecipientAllowed([], ["bob"]))
    // @bob allows a transfer to bob's wallet address too (the same recipient).
    assert.isTrue(isRecipientAllowed(["bob"], ["bob", "0x00000000000000000000000000000000000000b0"]))
    assert.isFalse(isRecipientAllowed(["carol"], ["bob", "0x00000000000000000000000000000000000000b0"]))
  })
})

describe("active hours", () => {
  const table: ReadonlyArray<readonly [string, string, string, boolean]> = [
    // window, zone, instant, active?
    ["00:00-24:00", "UTC", "2026-06-01T00:00:00Z", true],
    ["00:00-24:00", "UTC", "2026-06-01T23:59:59Z", true],
    ["09:00-17:00", "UTC", "2026-06-01T08:59:59Z", false],
    ["09:00-17:00", "UTC", "2026-06-01T09:00:00Z", true],
    ["09:00-17:00", "UTC", "2026-06-01T16:59:59Z", true],
    ["09:00-17:00", "UTC", "2026-06-01T17:00:00Z", false],
    // Overnight windows wrap midnight.
    ["22:00-06:00", "UTC", "2026-06-01T21:59:00Z", false],
    ["22:00-06:00", "UTC", "2026-06-01T22:00:00Z", true],
    ["22:00-06:00", "UTC", "2026-06-01T23:59:59Z", true],
    ["22:00-06:00", "UTC", "2026-06-02T00:00:00Z", true],
    ["22:00-06:00", "UTC", "2026-06-02T05:59:59Z", true],
    ["22:00-06:00", "UTC", "2026-06-02T06:00:00Z", false],
    ["23:30-00:30", "UTC", "2026-06-01T00:15:00Z", true],
    ["23:30-00:30", "UTC", "2026-06-01T12:00:00Z", false],
    ["23:00-00:00", "UTC", "2026-06-01T23:59:59Z", true],
    ["23:00-00:00", "UTC", "2026-06-01T00:00:00Z", false],
    // Read in the policy's zone: Kolkata is UTC+05:30.
    ["09:00-17:00", "Asia/Kolkata", "2026-06-01T03:29:00Z", false],
    ["09:00-17:00", "Asia/Kolkata", "2026-06-01T03:30:00Z", true],
    ["09:00-17:00", "Asia/Kolkata", "2026-06-01T11:29:00Z", true],
    ["09:00-17:00", "Asia/Kolkata", "2026-06-01T11:30:00Z", false],
    // Tokyo's local midnight is 15:00 UTC the day before.
    ["22:00-06:00", "Asia/Tokyo", "2026-06-01T14:00:00Z", true],
    ["22:00-06:00", "Asia/Tokyo", "2026-06-01T21:00:00Z", false],
    // New York, spring forward (2026-03-08 02:00 EST → 03:00 EDT at 07:00Z): 02:xx never exists.
    ["02:00-03:00", "America/New_York", "2026-03-08T06:59:59Z", false],
    ["02:00-03:00", "America/New_York", "2026-03-08T07:00:00Z", false],
    ["09:00-17:00", "America/New_York", "2026-03-08T13:00:00Z", true],
    ["09:00-17:00", "America/New_York", "2026-03-07T13:00:00Z", false],
    // Fall back (2026-11-01 02:00 EDT → 01:00 EST at 06:00Z): 01:30 happens twice, both inside.
    ["01:00-02:00", "America/New_York", "2026-11-01T05:30:00Z", true],
    ["01:00-02:00", "America/New_York", "2026-11-01T06:30:00Z", true],
    ["01:00-02:00", "America/New_York", "2026-11-01T07:00:00Z", false],
    // Paris in summer is UTC+2, in winter UTC+1: the same window moves in UTC.
    ["09:00-17:00", "Europe/Paris", "2026-07-01T07:00:00Z", true],
    ["09:00-17:00", "Europe/Paris", "2026-01-15T07:00:00Z", false],
    ["09:00-17:00", "Europe/Paris", "2026-01-15T08:00:00Z", true],
    // Paris spring forward at 01:00Z on 2026-03-29: 02:30 local never occurs.
    ["02:00-03:00", "Europe/Paris", "2026-03-29T00:59:59Z", false],
    ["02:00-03:00", "Europe/Paris", "2026-03-29T01:00:00Z", false]
  ]
  it("windows, midnight wrap, time zones and DST days", () => {
    for (const [window, zone, instant, expected] of table) {
      const hours = parseActiveHours(window)
      assert.isDefined(hours, window)
      assert.strictEqual(isWithinActiveHours(hours!, zone, at(instant)), expected, `${window} ${zone} ${instant}`)
    }
  })

  it("D25's amount-free order: asset, then recipient, then active hours", () => {
    const rules = valid({
      daily_limit_usdg: 10,
      per_transaction_limit_usdg: 10,
      allowed_recipients: ["@bob"],
      active_hours: "09:00-17:00"
    })
    const night = at("2026-06-01T03:00:00Z")
    const day = at("2026-06-01T12:00:00Z")
    assert.strictEqual(amountFreeViolation(rules, { asset: "ETH", recipientNames: ["carol"], activeHoursAtMs: night }), "asset_not_allowed")
    assert.strictEqual(amountFreeViolation(rules, { asset: "USDG", recipientNames: ["carol"], activeHoursAtMs: night }), "recipient_not_allowed")
    assert.strictEqual(amountFreeViolation(rules, { asset: "USDG", recipientNames: ["bob"], activeHoursAtMs: night }), "outside_active_hours")
    assert.strictEqual(amountFreeViolation(rules, { asset: "USDG", recipientNames: ["bob"], activeHoursAtMs: day }), undefined)
    // An approval skips the window, not the asset and recipient rules.
    assert.strictEqual(amountFreeViolation(rules, { asset: "USDG", recipientNames: ["bob"], activeHoursAtMs: null }), undefined)
    assert.strictEqual(amountFreeViolation(rules, { asset: "USDG", recipientNames: ["carol"], activeHoursAtMs: null }), "recipient_not_allowed")
  })
})
