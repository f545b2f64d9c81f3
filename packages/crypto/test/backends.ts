/**
 * Runs a suite once per backend. Both must give the same answers; noble is slower, so
 * property tests take fewer runs on it.
 */
import { beforeAll, describe } from "vitest"
import { Backend } from "../src/index.ts"

export const backends = [
  { name: "noble", propertyRuns: 8 },
  { name: "mcl", propertyRuns: 60 }
] as const

export const describeEachBackend = (
  title: string,
  body: (backend: (typeof backends)[number]) => void
): void => {
  for (const backend of backends) {
    describe(`${title} [${backend.name}]`, () => {
      beforeAll(async () => {
        await Backend.init({ backend: backend.name })
      })
      body(backend)
    })
  }
}

export const hexToBytes = (hex: string): Uint8Array => Uint8Array.from(Buffer.from(hex.replace(/^0x/, ""), "hex"))

export const toHex = (bytes: Uint8Array): string => `0x${Buffer.from(bytes).toString("hex")}`

/** A copy of `bytes` with one bit flipped. */
export const flipBit = (bytes: Uint8Array, bitIndex: number): Uint8Array => {
  const copy = Uint8Array.from(bytes)
  const byteIndex = Math.floor(bitIndex / 8) % copy.length
  copy[byteIndex] = (copy[byteIndex] ?? 0) ^ (1 << (bitIndex % 8))
  return copy
}
