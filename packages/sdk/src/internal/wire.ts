/**
 * The values inside the contract's answers that the contract types as plain strings and
 * the SDK computes with: hex bytes, addresses, curve points, decimal integers. The answers'
 * shapes are the contract's (`internal/typedClient.ts` decodes them); these read one
 * field's value. A value that does not parse is a `TransportError("malformed_response")`
 * naming the answer and the field, never the value (values here are ids and ciphertexts,
 * but an error message is no place for either).
 *
 * @since 0.1.0
 */
import { Point } from "@pps/crypto"
import { type Address, bytesToHex, getAddress, hexToBytes, isAddress } from "viem"
import { TransportError } from "../Errors.ts"

const malformed = (what: string, name: string, detail: string) =>
  new TransportError("malformed_response", `${what}: \`${name}\` is not ${detail}`)

/** 0x-prefixed hex of even length, as bytes; `length` when the field has a fixed size. */
export const hexBytes = (what: string, name: string, value: string, length?: number): Uint8Array => {
  if (!/^0x([0-9a-fA-F]{2})*$/.test(value)) throw malformed(what, name, "0x-prefixed hex bytes")
  // viem, not Buffer: this module runs in browsers too (the dashboard).
  const bytes = hexToBytes(value as `0x${string}`)
  if (length !== undefined && bytes.length !== length) throw malformed(what, name, `${length} bytes`)
  return bytes
}

/** A 20-byte address, checksummed (the form proofs and bindings are computed over). */
export const address = (what: string, name: string, value: string): Address => {
  if (!isAddress(value, { strict: false })) throw malformed(what, name, "an address")
  return getAddress(value)
}

/** A curve point in the 64-byte EVM encoding, validated; the identity is allowed (an empty balance). */
export const point = (what: string, name: string, value: string): Point.Point => {
  const parsed = Point.parse(hexBytes(what, name, value, 64), { allowIdentity: true })
  if (!parsed.ok) throw malformed(what, name, `a curve point (${parsed.reason})`)
  return parsed.value
}

/** A non-negative decimal integer sent as a string (ciphertext versions). */
export const decimal = (what: string, name: string, value: string): bigint => {
  if (!/^(0|[1-9][0-9]{0,77})$/.test(value)) throw malformed(what, name, "a non-negative integer")
  return BigInt(value)
}

export const hex = (bytes: Uint8Array): `0x${string}` => bytesToHex(bytes)
