/**
 * Amounts at rest: every amount the guardian stores (balances, reservations, daily
 * spend, credits) is sealed with XChaCha20-Poly1305 under a key derived from the
 * guardian secret, with the row's identity as associated data, so a value copied to
 * another row does not open and a dump of the database shows only ciphertext.
 *
 * Layout: version 0x01 ‖ nonce (24 random bytes) ‖ ciphertext of the amount as a u64
 * big-endian (8 bytes) ‖ Poly1305 tag (16). Every sealed amount is 49 bytes, whatever
 * its value. The 192-bit random nonce has no practical collision bound, unlike
 * AES-GCM's 96 bits, and the guardian rewrites a balance on every transfer.
 */
import { xchacha20poly1305 } from "@noble/ciphers/chacha.js"
import { randomBytes, utf8ToBytes } from "@noble/hashes/utils.js"
import { bytesToBigInt, numberToBytes } from "viem"

const version = 0x01
const nonceBytes = 24
const amountBytes = 8
const tagBytes = 16

/** Length of every sealed amount. */
export const sealedAmountBytes = 1 + nonceBytes + amountBytes + tagBytes

/** Amounts the guardian books are u64, the range of `ElGamal.matches`. */
const amountLimit = 1n << 64n

export interface AtRestBox {
  readonly seal: (amount: bigint, associatedData: string) => Uint8Array
  /** Undefined when the value does not open: wrong key, wrong row, or tampered. */
  readonly open: (sealed: Uint8Array, associatedData: string) => bigint | undefined
}

export const makeAtRestBox = (key: Uint8Array): AtRestBox => {
  if (key.length !== 32) throw new RangeError("the at-rest key must be 32 bytes")
  return {
    seal: (amount, associatedData) => {
      // A booked amount outside u64 is a broken invariant (sums are bounded by balances).
      if (amount < 0n || amount >= amountLimit) throw new RangeError("booked amount out of the u64 range")
      const nonce = randomBytes(nonceBytes)
      const body = xchacha20poly1305(key, nonce, utf8ToBytes(associatedData)).encrypt(
        numberToBytes(amount, { size: amountBytes })
      )
      const out = new Uint8Array(sealedAmountBytes)
      out[0] = version
      out.set(nonce, 1)
      out.set(body, 1 + nonceBytes)
      return out
    },
    open: (sealed, associatedData) => {
      if (sealed.length !== sealedAmountBytes || sealed[0] !== version) return undefined
      try {
        const plaintext = xchacha20poly1305(key, sealed.subarray(1, 1 + nonceBytes), utf8ToBytes(associatedData)).decrypt(
          sealed.subarray(1 + nonceBytes)
        )
        return bytesToBigInt(plaintext)
      } catch {
        return undefined
      }
    }
  }
}
