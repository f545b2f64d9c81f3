/**
 * Opaque, prefixed, time-sortable identifiers (D3): `<prefix>_<ULID>`.
 *
 * A ULID is 48 bits of milliseconds since the epoch and 80 random bits from the
 * platform's CSPRNG, in Crockford base32 (26 characters), so ids sort by creation
 * time and cannot be guessed.
 *
 * @since 0.1.0
 */
import { randomFillSync } from "node:crypto"
import type { IdPrefix } from "@pps/api/PathIds"

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

/**
 * Random bytes for ids, drawn from the CSPRNG 4 KiB at a time: one call per 409 ids instead of
 * one per id. A transfer mints several ids (the transfer, its events, its submission, the
 * request), and each call to the CSPRNG crosses into C++ and allocates; the throughput profile
 * put those calls at about 1 % of the server's CPU. Each byte is handed out once.
 * Only ids draw from here: keys, tokens and secrets call the CSPRNG themselves.
 */
const idRandomPool = Buffer.allocUnsafeSlow(4096)
let idRandomOffset = idRandomPool.length

const idRandomBytes = (count: number): Buffer => {
  if (idRandomOffset + count > idRandomPool.length) {
    randomFillSync(idRandomPool)
    idRandomOffset = 0
  }
  const bytes = idRandomPool.subarray(idRandomOffset, idRandomOffset + count)
  idRandomOffset += count
  return bytes
}

// The prefixes are part of the contract (path ids are checked against them).
export type { IdPrefix }

/**
 * A new ULID string for the given time.
 *
 * @since 0.1.0
 * @category constructors
 */
export const ulid = (timeMs: number = Date.now()): string => {
  let time = timeMs
  let timePart = ""
  for (let i = 0; i < 10; i++) {
    timePart = crockford[time % 32] + timePart
    time = Math.floor(time / 32)
  }
  // 80 random bits as 16 base32 characters: 10 bytes read 5 bits at a time.
  const random = idRandomBytes(10)
  let randomPart = ""
  let buffer = 0
  let bits = 0
  for (const byte of random) {
    buffer = (buffer << 8) | byte
    bits += 8
    while (bits >= 5) {
      randomPart += crockford[(buffer >> (bits - 5)) & 31]
      bits -= 5
    }
  }
  return timePart + randomPart
}

/**
 * A new prefixed id, e.g. `acct_01JD3...`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeId = (prefix: IdPrefix, timeMs?: number): string => `${prefix}_${ulid(timeMs)}`

/**
 * Whether a string is a well-formed id with the given prefix.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isId = (prefix: IdPrefix, value: string): boolean =>
  new RegExp(`^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`).test(value)
