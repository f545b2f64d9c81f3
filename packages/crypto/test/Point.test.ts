// Goal: points are parsed strictly (length, range, curve, identity), the generators are
// the documented ones, and the encodings round-trip on both backends.
import fc from "fast-check"
import { assert, expect, it } from "vitest"
import { ElGamal, Point } from "../src/index.ts"
import { describeEachBackend, hexToBytes, toHex } from "./backends.ts"

const p = Point.fieldModulus
const be32 = (value: bigint) => hexToBytes(value.toString(16).padStart(64, "0"))
const affine = (x: bigint, y: bigint) => new Uint8Array([...be32(x), ...be32(y)])

describeEachBackend("Point", ({ propertyRuns }) => {
  it("derives H by the documented try-and-increment rule", () => {
    const derived = Point.deriveGeneratorH()
    expect(derived.counter).toBe(2)
    expect(toHex(derived.point)).toBe(toHex(Point.H))
    // y is the even root.
    expect((Point.H[63] ?? 1) % 2).toBe(0)
  })

  it("has G = (1, 2) and the BN254 orders", () => {
    expect(toHex(Point.G)).toBe(toHex(affine(1n, 2n)))
    expect(Point.fieldModulus).toBe(21888242871839275222246405745257275088696311157297823662689037894645226208583n)
    expect(Point.order).toBe(21888242871839275222246405745257275088548364400416034343698204186575808495617n)
  })

  it("refuses wrong lengths, coordinates >= p, points off the curve and, by default, the identity", () => {
    expect(Point.parse(new Uint8Array(63))).toEqual({ ok: false, reason: "point_length_invalid" })
    expect(Point.parse(new Uint8Array(65))).toEqual({ ok: false, reason: "point_length_invalid" })
    expect(Point.parse(affine(p, 2n))).toEqual({ ok: false, reason: "point_coordinate_out_of_range" })
    // (1, 2 + p) is (1, 2) with y not reduced: the EVM refuses it, so do we.
    expect(Point.parse(affine(1n, 2n + p))).toEqual({ ok: false, reason: "point_coordinate_out_of_range" })
    expect(Point.parse(affine(1n, 3n))).toEqual({ ok: false, reason: "point_not_on_curve" })
    expect(Point.parse(affine(0n, 1n))).toEqual({ ok: false, reason: "point_not_on_curve" })
    expect(Point.parse(Point.identity)).toEqual({ ok: false, reason: "point_is_identity" })
    assert.isTrue(Point.parse(Point.identity, { allowIdentity: true }).ok)
    assert.isTrue(Point.parse(Point.G).ok)
  })

  it("refuses random 64-byte strings (almost none is on the curve)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 64, maxLength: 64 }), (bytes) => {
        const parsed = Point.parse(bytes, { allowIdentity: true })
        if (parsed.ok) {
          // If it parsed, it must re-encode to itself and survive compression.
          const decompressed = Point.decompress(Point.compress(parsed.value), { allowIdentity: true })
          assert.isTrue(decompressed.ok && toHex(decompressed.value) === toHex(bytes))
        }
      }),
      { numRuns: 200 }
    )
  })

  it("negates as (x, p − y) and keeps the identity at (0, 0)", () => {
    expect(toHex(Point.negate(Point.G))).toBe(toHex(affine(1n, p - 2n)))
    expect(toHex(Point.negate(Point.identity))).toBe(toHex(Point.identity))
    expect(toHex(Point.add(Point.G, Point.negate(Point.G)))).toBe(toHex(Point.identity))
  })

  it("compresses and decompresses any point", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: (1n << 64n) - 1n }), (amount) => {
        const point = ElGamal.fromPublicAmount(amount, 0).commitment
        const compressed = Point.compress(point)
        expect(compressed.length).toBe(33)
        const back = Point.decompress(compressed)
        assert.isTrue(back.ok)
        if (back.ok) expect(toHex(back.value)).toBe(toHex(point))
      }),
      { numRuns: propertyRuns }
    )
    expect(Point.decompress(new Uint8Array(33))).toEqual({ ok: false, reason: "point_is_identity" })
    assert.isTrue(Point.decompress(new Uint8Array(33), { allowIdentity: true }).ok)
  })

  it("refuses bad compressed encodings", () => {
    const compressed = Point.compress(Point.G)
    const badPrefix = Uint8Array.from(compressed)
    badPrefix[0] = 0x04
    expect(Point.decompress(badPrefix)).toEqual({ ok: false, reason: "point_encoding_invalid" })
    expect(Point.decompress(compressed.subarray(0, 32))).toEqual({ ok: false, reason: "point_length_invalid" })
    expect(Point.decompress(new Uint8Array([0x02, ...be32(p)]))).toEqual({ ok: false, reason: "point_coordinate_out_of_range" })
    // x = 0: 0³ + 3 = 3 is not a square mod p.
    expect(Point.decompress(new Uint8Array([0x02, ...be32(0n)]))).toEqual({ ok: false, reason: "point_not_on_curve" })
  })

  it("adds and subtracts consistently", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 62n) }), fc.bigInt({ min: 0n, max: (1n << 62n) }), (a, b) => {
        const left = ElGamal.fromPublicAmount(a, 0).commitment
        const right = ElGamal.fromPublicAmount(b, 0).commitment
        expect(toHex(Point.add(left, right))).toBe(toHex(ElGamal.fromPublicAmount(a + b, 0).commitment))
        expect(toHex(Point.subtract(Point.add(left, right), right))).toBe(toHex(left))
      }),
      { numRuns: propertyRuns }
    )
  })
})
