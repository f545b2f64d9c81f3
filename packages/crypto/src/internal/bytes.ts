/**
 * Byte-level helpers shared by the wire formats: fixed-width big-endian integers, a
 * length-prefixed writer (for transcripts and digests) and a bounds-checked reader (for
 * parsing untrusted input without throwing).
 *
 * @internal
 */
import { bytesToNumberBE, concatBytes, equalBytes, numberToBytesBE } from "@noble/curves/utils.js"

export { bytesToNumberBE, concatBytes, equalBytes }

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder("utf-8", { fatal: true })

/** Encodes a string as UTF-8. */
export const utf8 = (text: string): Uint8Array => textEncoder.encode(text)

/** Decodes UTF-8, or `undefined` when the bytes are not valid UTF-8. */
export const utf8Decode = (bytes: Uint8Array): string | undefined => {
  try {
    return textDecoder.decode(bytes)
  } catch {
    return undefined
  }
}

/** A big-endian unsigned integer of exactly `length` bytes; throws if it does not fit (programmer error). */
export const uintBE = (value: bigint, length: number): Uint8Array => {
  if (value < 0n || value >= 1n << BigInt(8 * length)) {
    throw new RangeError(`integer does not fit in ${length} bytes`)
  }
  return numberToBytesBE(value, length)
}

/** Parses a 0x-prefixed 20-byte address (any case) into its bytes; throws on malformed input (programmer error). */
export const addressBytes = (address: string): Uint8Array => {
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) {
    throw new TypeError("address must be 0x followed by 40 hex digits")
  }
  const out = new Uint8Array(20)
  for (let i = 0; i < 20; i++) out[i] = Number.parseInt(address.slice(2 + 2 * i, 4 + 2 * i), 16)
  return out
}

/**
 * Builds a transcript in which every element is preceded by its length as a 4-byte
 * big-endian integer, so that no two different element lists serialise to the same bytes.
 */
export class LengthPrefixedWriter {
  private readonly parts: Array<Uint8Array> = []

  append(element: Uint8Array): this {
    this.parts.push(uintBE(BigInt(element.length), 4), element)
    return this
  }

  toBytes(): Uint8Array {
    return concatBytes(...this.parts)
  }
}

/** Reads untrusted bytes front to back; every read returns `undefined` instead of running past the end. */
export class ByteReader {
  private readonly bytes: Uint8Array
  private offset = 0

  constructor(bytes: Uint8Array) {
    this.bytes = bytes
  }

  take(length: number): Uint8Array | undefined {
    if (length < 0 || this.offset + length > this.bytes.length) return undefined
    const out = this.bytes.subarray(this.offset, this.offset + length)
    this.offset += length
    return out
  }

  uint(length: number): bigint | undefined {
    const slice = this.take(length)
    return slice === undefined ? undefined : bytesToNumberBE(slice)
  }

  get remaining(): number {
    return this.bytes.length - this.offset
  }
}
