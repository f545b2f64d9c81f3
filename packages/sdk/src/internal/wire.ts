/**
 * Reading the API's JSON answers field by field. A field that is missing or of
 * the wrong type is a `TransportError("malformed_response")` naming the answer
 * and the field, never the value (values here are ids and ciphertexts, but an
 * error message is no place for either).
 *
 * @since 0.1.0
 */
import { Point } from "@pps/crypto"
import { type Address, bytesToHex, getAddress, hexToBytes, isAddress } from "viem"
import { TransportError } from "../Client.ts"

/** A JSON object being read, with the name of the answer it came from. */
export interface Fields {
  readonly what: string
  readonly record: Readonly<Record<string, unknown>>
}

const malformed = (what: string, detail: string) => new TransportError("malformed_response", `${what}: ${detail}`)

export const fieldsOf = (value: unknown, what: string): Fields => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw malformed(what, "expected a JSON object")
  return { what, record: value as Readonly<Record<string, unknown>> }
}

export const string = (fields: Fields, name: string): string => {
  const value = fields.record[name]
  if (typeof value !== "string") throw malformed(fields.what, `\`${name}\` is not a string`)
  return value
}

export const nullableString = (fields: Fields, name: string): string | null => {
  const value = fields.record[name]
  if (value === null) return null
  if (typeof value !== "string") throw malformed(fields.what, `\`${name}\` is neither a string nor null`)
  return value
}

export const boolean = (fields: Fields, name: string): boolean => {
  const value = fields.record[name]
  if (typeof value !== "boolean") throw malformed(fields.what, `\`${name}\` is not a boolean`)
  return value
}

export const integer = (fields: Fields, name: string): bigint => {
  const value = fields.record[name]
  // Chain ids arrive as JSON numbers, ciphertext versions as decimal strings.
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value)
  if (typeof value === "string" && /^(0|[1-9][0-9]{0,77})$/.test(value)) return BigInt(value)
  throw malformed(fields.what, `\`${name}\` is not a non-negative integer`)
}

export const array = (fields: Fields, name: string): ReadonlyArray<unknown> => {
  const value = fields.record[name]
  if (!Array.isArray(value)) throw malformed(fields.what, `\`${name}\` is not an array`)
  return value
}

export const object = (fields: Fields, name: string): Fields => fieldsOf(fields.record[name], `${fields.what}.${name}`)

/** 0x-prefixed hex of even length, as bytes; `length` when the field has a fixed size. */
export const hexBytes = (fields: Fields, name: string, length?: number): Uint8Array => {
  const value = string(fields, name)
  if (!/^0x([0-9a-fA-F]{2})*$/.test(value)) throw malformed(fields.what, `\`${name}\` is not 0x-prefixed hex bytes`)
  // viem, not Buffer: this module runs in browsers too (the dashboard).
  const bytes = hexToBytes(value as `0x${string}`)
  if (length !== undefined && bytes.length !== length) throw malformed(fields.what, `\`${name}\` is not ${length} bytes`)
  return bytes
}

/** A 20-byte address, checksummed (the form proofs and bindings are computed over). */
export const address = (fields: Fields, name: string): Address => {
  const value = string(fields, name)
  if (!isAddress(value, { strict: false })) throw malformed(fields.what, `\`${name}\` is not an address`)
  return getAddress(value)
}

/** A curve point in the 64-byte EVM encoding, validated; the identity is allowed (an empty balance). */
export const point = (fields: Fields, name: string): Point.Point => {
  const parsed = Point.parse(hexBytes(fields, name, 64), { allowIdentity: true })
  if (!parsed.ok) throw malformed(fields.what, `\`${name}\` is not a curve point (${parsed.reason})`)
  return parsed.value
}

export const hex = (bytes: Uint8Array): `0x${string}` => bytesToHex(bytes)
