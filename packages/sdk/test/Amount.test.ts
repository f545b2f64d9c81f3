/**
 * Decrypted amounts print as the shortest exact decimal in the asset's units
 * (D4), with integer arithmetic only, and an unknown asset is refused.
 */
import { describe, expect, it } from "vitest"
import { Amount } from "../src/index.ts"

describe("Amount.format", () => {
  it("writes base units as the shortest exact decimal in the asset's units", () => {
    expect(Amount.format("USDG", 12_500_000n)).toBe("12.5")
    expect(Amount.format("USDG", 0n)).toBe("0")
    expect(Amount.format("USDG", 1n)).toBe("0.000001")
    expect(Amount.format("USDG", 1_000_000_000_000_000_000n)).toBe("1000000000000")
    expect(Amount.format("ETH", 1n)).toBe("0.000000000000000001")
    expect(Amount.format("ETH", 10n ** 18n + 10n ** 17n)).toBe("1.1")
    expect(() => Amount.format("DOGE", 1n)).toThrow(RangeError)
    expect(() => Amount.format("toString", 1n)).toThrow(RangeError)
    expect(() => Amount.format("USDG", -1n)).toThrow(RangeError)
  })
})
