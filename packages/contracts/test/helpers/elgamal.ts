/**
 * Test-side BN254 twisted ElGamal and key proof of possession, written with @noble/curves
 * directly to the cross-package interface (the crypto package is built alongside; these
 * helpers follow the same rules so the contract is tested against the interface, not against
 * one implementation of it).
 */
import { bn254 } from "@noble/curves/bn254.js"
import { mod } from "@noble/curves/abstract/modular.js"
import { bytesToNumberBE, randomBytes } from "@noble/curves/utils.js"
import { type Address, concatHex, encodePacked, type Hex, keccak256, numberToHex } from "viem"
import { keyProofTag } from "../../src/typedData.ts"

type G1Point = InstanceType<typeof bn254.G1.Point>

export interface EvmPoint {
  readonly x: bigint
  readonly y: bigint
}

export const P = bn254.fields.Fp.ORDER
export const N = bn254.fields.Fr.ORDER
const Fp = bn254.fields.Fp

export const G: G1Point = bn254.G1.Point.BASE

/** H by the interface's try-and-increment rule, recomputed from scratch. */
export const deriveH = (): { readonly point: G1Point; readonly counter: number } => {
  for (let counter = 0; ; counter++) {
    const x = mod(BigInt(keccak256(encodePacked(["string", "uint32"], ["PPS/v1/generator/H", counter]))), P)
    const rhs = Fp.add(Fp.pow(x, 3n), 3n)
    if (!Fp.eql(Fp.pow(rhs, (P - 1n) / 2n), Fp.ONE)) continue
    const root = Fp.sqrt(rhs)
    const y = root % 2n === 0n ? root : Fp.neg(root)
    return { point: bn254.G1.Point.fromAffine({ x, y }), counter }
  }
}

export const H: G1Point = deriveH().point

/** A uniform scalar in [1, n): 48 random bytes reduced mod n−1, plus one (bias below 2^-128). */
export const randomScalar = (): bigint => mod(bytesToNumberBE(randomBytes(48)), N - 1n) + 1n

export const toEvm = (point: G1Point): EvmPoint => {
  if (point.is0()) return { x: 0n, y: 0n }
  const { x, y } = point.toAffine()
  return { x, y }
}

export const fromEvm = (point: EvmPoint): G1Point =>
  point.x === 0n && point.y === 0n ? bn254.G1.Point.ZERO : bn254.G1.Point.fromAffine(point)

export const mul = (point: G1Point, scalar: bigint): G1Point => {
  const reduced = mod(scalar, N)
  return reduced === 0n ? bn254.G1.Point.ZERO : point.multiply(reduced)
}

export interface KeyPair {
  readonly secret: bigint
  readonly publicKey: G1Point
  readonly evm: EvmPoint
}

/** s in [1, n), PK = s⁻¹·H, so that s·PK = H; a fresh s unless one is given. */
export const makeKeyPair = (secret = randomScalar()): KeyPair => {
  const publicKey = mul(H, bn254.fields.Fr.inv(secret))
  return { secret, publicKey, evm: toEvm(publicKey) }
}

export interface Ciphertext {
  readonly commitment: G1Point
  readonly handles: ReadonlyArray<G1Point>
}

/** C = a·G + r·H, D_k = r·PK_k. */
export const encrypt = (amount: bigint, publicKeys: ReadonlyArray<G1Point>, randomness = randomScalar()): Ciphertext => ({
  commitment: mul(G, amount).add(mul(H, randomness)),
  handles: publicKeys.map((publicKey) => mul(publicKey, randomness))
})

/** C − s·D, which is a·G for the key's own handle. */
export const decryptToPoint = (commitment: G1Point, handle: G1Point, secret: bigint): G1Point =>
  commitment.subtract(mul(handle, secret))

const evmBytes = (point: EvmPoint): Hex => concatHex([numberToHex(point.x, { size: 32 }), numberToHex(point.y, { size: 32 })])

/** keccak256 of the EVM encodings (x || y) of the points, in order. */
export const digestPoints = (points: ReadonlyArray<EvmPoint>): Hex => keccak256(concatHex(points.map(evmBytes)))

/** The 96-byte proof of possession R || z of the interface, bound to chain, contract and account. */
export const proveKeyPossession = (
  key: KeyPair,
  binding: { readonly chainId: number; readonly contract: Address; readonly account: Address },
  nonce = randomScalar()
): Hex => {
  const commitment = toEvm(mul(key.publicKey, nonce))
  const challenge = mod(
    BigInt(
      keccak256(
        encodePacked(
          ["string", "uint256", "address", "address", "uint256", "uint256", "uint256", "uint256"],
          [keyProofTag, BigInt(binding.chainId), binding.contract, binding.account, key.evm.x, key.evm.y, commitment.x, commitment.y]
        )
      )
    ),
    N
  )
  const response = mod(nonce + challenge * key.secret, N)
  return concatHex([evmBytes(commitment), numberToHex(response, { size: 32 })])
}
