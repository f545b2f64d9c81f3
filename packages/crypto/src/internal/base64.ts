/**
 * Base64 for the decryption-proof wire format. Encodes base64url without padding (safe in
 * a query parameter or header); decodes either alphabet, with or without padding, and
 * refuses anything else instead of skipping it.
 *
 * @internal
 */
const standard = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
const urlSafe = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

const decodeTable = (() => {
  const table = new Int16Array(128).fill(-1)
  for (let index = 0; index < 64; index++) {
    table[standard.charCodeAt(index)] = index
    table[urlSafe.charCodeAt(index)] = index
  }
  return table
})()

export const encodeBase64Url = (bytes: Uint8Array): string => {
  let out = ""
  for (let index = 0; index < bytes.length; index += 3) {
    const b0 = bytes[index] ?? 0
    const b1 = bytes[index + 1] ?? 0
    const b2 = bytes[index + 2] ?? 0
    const word = (b0 << 16) | (b1 << 8) | b2
    const remaining = bytes.length - index
    out += urlSafe[(word >> 18) & 63]
    out += urlSafe[(word >> 12) & 63]
    if (remaining > 1) out += urlSafe[(word >> 6) & 63]
    if (remaining > 2) out += urlSafe[word & 63]
  }
  return out
}

export const decodeBase64 = (text: string): Uint8Array | undefined => {
  const unpadded = text.replace(/={1,2}$/, "")
  if (unpadded.length % 4 === 1) return undefined
  const out = new Uint8Array(Math.floor((unpadded.length * 3) / 4))
  let bits = 0
  let bitCount = 0
  let position = 0
  for (let index = 0; index < unpadded.length; index++) {
    const code = unpadded.charCodeAt(index)
    const value = code < 128 ? (decodeTable[code] ?? -1) : -1
    if (value < 0) return undefined
    bits = ((bits << 6) | value) & 0xffffff
    bitCount += 6
    if (bitCount >= 8) {
      bitCount -= 8
      out[position++] = (bits >> bitCount) & 0xff
    }
  }
  // Left-over bits must be zero, so every byte string has exactly one encoding per alphabet.
  if ((bits & ((1 << bitCount) - 1)) !== 0) return undefined
  return out
}
