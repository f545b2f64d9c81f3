/**
 * Amounts as people read them. Decrypted amounts are integers in the asset's
 * base units (USDG has 6 decimals, ETH 18); the API writes decimal strings in
 * their shortest exact form ("12.5", "0", "1000", D4), and so does
 * this module, with integer arithmetic only, so no amount is ever rounded.
 *
 * @since 0.1.0
 */

/**
 * The supported assets and their decimals (D4).
 *
 * @since 0.1.0
 * @category constants
 */
export const assetDecimals: Readonly<Record<string, number>> = { USDG: 6, ETH: 18 }

/**
 * The decimals of an asset; throws a RangeError for an asset this SDK does not know.
 *
 * @since 0.1.0
 * @category getters
 */
export const decimalsOf = (asset: string): number => {
  const decimals = Object.hasOwn(assetDecimals, asset) ? assetDecimals[asset] : undefined
  if (decimals === undefined) throw new RangeError(`unknown asset ${JSON.stringify(asset)}`)
  return decimals
}

/**
 * An amount in base units as the shortest exact decimal string in the asset's
 * units: `format("USDG", 12_500_000n)` is `"12.5"`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const format = (asset: string, amountBaseUnits: bigint): string => {
  if (amountBaseUnits < 0n) throw new RangeError("an amount is never negative")
  const decimals = decimalsOf(asset)
  const scale = 10n ** BigInt(decimals)
  const whole = (amountBaseUnits / scale).toString()
  const fraction = (amountBaseUnits % scale).toString().padStart(decimals, "0").replace(/0+$/, "")
  return fraction === "" ? whole : `${whole}.${fraction}`
}
