/**
 * A seeded byte stream for test vectors only: SHA-256(seed ‖ uint32_be(counter)) blocks.
 * Predictable by design, so it lives outside src/ and is never a default anywhere.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { concatBytes, numberToBytesBE } from "@noble/curves/utils.js"
import type { RandomSource } from "../src/Random.ts"

export const deterministicRandom = (seed: string): RandomSource => {
  const seedBytes = new TextEncoder().encode(seed)
  let counter = 0
  return (length) => {
    const blocks: Array<Uint8Array> = []
    let produced = 0
    while (produced < length) {
      const block = sha256(concatBytes(seedBytes, numberToBytesBE(BigInt(counter++), 4)))
      blocks.push(block)
      produced += block.length
    }
    return concatBytes(...blocks).subarray(0, length)
  }
}
