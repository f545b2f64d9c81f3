/**
 * Decryption proofs for the balances endpoint (D20).
 *
 * The client claims its balance b of an asset and proves it without revealing its key:
 * with (C, D) the account's on-chain balance ciphertext and owner handle, it proves by a
 * Chaum–Pedersen DLEQ that X = C − b·G and H have the same discrete log s over D and PK
 * (s·D = X and s·PK = H). That holds exactly when C − s·D = b·G, i.e. when the ciphertext
 * encrypts b for this key.
 *
 * Prover: k random; A₁ = k·D, A₂ = k·PK; c = challenge(transcript); z = k + c·s mod n.
 * Verifier: A₁ = z·D − c·X, A₂ = z·PK − c·H, accept iff challenge(transcript) == c.
 *
 * The Fiat–Shamir challenge is SHA-512 of a length-prefixed transcript, reduced mod n. It
 * holds every element of the statement: domain tag, format version, chain id, contract,
 * account, asset, PK, C, D, ciphertext version, b, expiry, and both commitments. Leaving one
 * out would let a proof be moved to a statement that differs in it (the 2025 Solana
 * proof forgeries came from such omissions); a test changes each one.
 *
 * Wire format (then base64url, no padding):
 *   version (0x01) ‖ expiresAt (u64, unix seconds) ‖ count (u8, 1..16) ‖ count × entry
 *   entry = asset length (u8, 1..32) ‖ asset (ASCII) ‖ amount (u64) ‖ ciphertext version (u64)
 *           ‖ c (32) ‖ z (32)
 * All integers big-endian. Chain id, account, contract and PK are not in the wire form:
 * the verifier takes them from its own context, so a proof made for other values fails.
 *
 * @since 0.1.0
 */
import { sha512 } from "@noble/hashes/sha2.js"
import type { Address } from "viem"
import { addressBytes, ByteReader, concatBytes, LengthPrefixedWriter, uintBE, utf8 } from "./internal/bytes.ts"
import { current } from "./internal/backend.ts"
import { decodeBase64, encodeBase64Url } from "./internal/base64.ts"
import { secretScalar } from "./internal/keys.ts"
import { element, encode as encodePoint } from "./internal/points.ts"
import { groupOrder } from "./internal/curve.ts"
import { multiplyAdd, randomScalar, reduceDigest } from "./internal/scalars.ts"
import { assertAmount } from "./ElGamal.ts"
import type { KeyPair } from "./EncryptionKey.ts"
import * as EncryptionKey from "./EncryptionKey.ts"
import * as Point from "./Point.ts"
import { type RandomSource, secure } from "./Random.ts"
import { fail, type Result, succeed } from "./Result.ts"

/**
 * The on-chain state one asset's proof is about.
 *
 * @since 0.1.0
 * @category models
 */
export interface BalanceCiphertext {
  /** The asset's ConfidentialToken contract. */
  readonly contract: Address
  /** ΣC of the account. */
  readonly commitment: Point.Point
  /** ΣD_owner of the account. */
  readonly handle: Point.Point
  /** The contract's version counter of this balance; bumps on every change. */
  readonly ciphertextVersion: bigint
}

/**
 * One asset of a bundle, as the prover states it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Claim {
  readonly asset: string
  readonly amount: bigint
  readonly ciphertext: BalanceCiphertext
}

/**
 * One asset of a decoded bundle.
 *
 * @since 0.1.0
 * @category models
 */
export interface Entry {
  readonly asset: string
  readonly amount: bigint
  readonly ciphertextVersion: bigint
  readonly challenge: bigint
  readonly response: bigint
}

/**
 * A decoded bundle.
 *
 * @since 0.1.0
 * @category models
 */
export interface Bundle {
  readonly expiresAtSeconds: bigint
  readonly entries: ReadonlyArray<Entry>
}

/**
 * What the verifier knows from its own context, never from the proof.
 *
 * @since 0.1.0
 * @category models
 */
export interface VerifyContext {
  readonly chainId: bigint
  /** The authenticated account's address. */
  readonly account: Address
  /** The account's registered encryption key (64 bytes, EVM encoding). */
  readonly publicKey: Uint8Array
  readonly nowSeconds: bigint
  /** Longest accepted distance from now to the expiry; D20 sets 300 s. */
  readonly lifetimeMaxSeconds: bigint
  /**
   * The on-chain ciphertext of an asset to check the proof against, or `undefined` for an
   * unknown asset: the current one, or (D63) the recent one whose version the proof names.
   */
  readonly balanceOf: (asset: string) => BalanceCiphertext | undefined
}

/**
 * Why a proof was refused. Each maps to 422 `decryption_proof_invalid`; the reason is for
 * logs and for the error's `reason` field, and never contains an amount.
 *
 * @since 0.1.0
 * @category errors
 */
export type DecryptionProofError =
  | "proof_encoding_invalid"
  | "proof_version_unsupported"
  | "proof_malformed"
  | "proof_expired"
  | "proof_expiry_too_far"
  | "proof_asset_unknown"
  | "proof_asset_duplicate"
  | "proof_ciphertext_stale"
  | "proof_scalar_out_of_range"
  | "proof_point_invalid"
  | "proof_public_key_invalid"
  | "proof_mismatch"

/**
 * Domain tag, first element of every transcript.
 *
 * @since 0.1.0
 * @category constants
 */
export const transcriptTag = "PPS/v1/decryption-proof"

/**
 * Wire-format version.
 *
 * @since 0.1.0
 * @category constants
 */
export const formatVersion = 0x01

/**
 * Most assets in one bundle.
 *
 * @since 0.1.0
 * @category constants
 */
export const entriesMax = 16

/**
 * Longest asset name in bytes.
 *
 * @since 0.1.0
 * @category constants
 */
export const assetBytesMax = 32

/**
 * Everything the challenge is computed over, in order.
 *
 * @since 0.1.0
 * @category models
 */
export interface Statement {
  readonly chainId: bigint
  readonly account: Address
  readonly asset: string
  readonly publicKey: Uint8Array
  readonly ciphertext: BalanceCiphertext
  readonly amount: bigint
  readonly expiresAtSeconds: bigint
}

/**
 * The transcript bytes: each element preceded by its 4-byte big-endian length.
 *
 * @since 0.1.0
 * @category encoding
 */
export const transcript = (statement: Statement, commitmentD: Uint8Array, commitmentPublicKey: Uint8Array): Uint8Array =>
  new LengthPrefixedWriter()
    .append(utf8(transcriptTag))
    .append(Uint8Array.of(formatVersion))
    .append(uintBE(statement.chainId, 32))
    .append(addressBytes(statement.ciphertext.contract))
    .append(addressBytes(statement.account))
    .append(utf8(statement.asset))
    .append(statement.publicKey)
    .append(statement.ciphertext.commitment)
    .append(statement.ciphertext.handle)
    .append(uintBE(statement.ciphertext.ciphertextVersion, 8))
    .append(uintBE(statement.amount, 8))
    .append(uintBE(statement.expiresAtSeconds, 8))
    .append(commitmentD)
    .append(commitmentPublicKey)
    .toBytes()

const challengeOf = (statement: Statement, commitmentD: Uint8Array, commitmentPublicKey: Uint8Array): bigint =>
  reduceDigest(sha512(transcript(statement, commitmentD, commitmentPublicKey)))

const assertAsset = (asset: string): void => {
  const bytes = utf8(asset)
  if (bytes.length < 1 || bytes.length > assetBytesMax || !/^[\x21-\x7e]+$/.test(asset)) {
    throw new RangeError(`asset must be 1-${assetBytesMax} printable ASCII characters`)
  }
}

/**
 * Proves one asset's balance; returns (c, z).
 *
 * @since 0.1.0
 * @category constructors
 */
export const proveEntry = (
  keyPair: KeyPair,
  statement: Statement,
  random: RandomSource = secure
): { readonly challenge: bigint; readonly response: bigint } => {
  assertAmount(statement.amount)
  const backend = current()
  const secret = secretScalar(keyPair.secretKey)
  const nonce = randomScalar(random)
  const commitmentD = encodePoint(backend.multiplySecret(element(statement.ciphertext.handle), nonce))
  const commitmentPublicKey = encodePoint(backend.multiplySecret(element(keyPair.publicKey), nonce))
  const challenge = challengeOf(statement, commitmentD, commitmentPublicKey)
  return { challenge, response: multiplyAdd(nonce, challenge, secret) }
}

/**
 * Proves the balances of several assets and encodes the bundle (base64url). Throws on
 * programmer errors (bad amount, asset name, duplicate or too many assets).
 *
 * @since 0.1.0
 * @category constructors
 */
export const prove = (
  input: {
    readonly keyPair: KeyPair
    readonly chainId: bigint
    readonly account: Address
    readonly expiresAtSeconds: bigint
    readonly claims: ReadonlyArray<Claim>
  },
  random: RandomSource = secure
): string => {
  if (input.claims.length < 1 || input.claims.length > entriesMax) {
    throw new RangeError(`a bundle holds 1-${entriesMax} assets`)
  }
  if (new Set(input.claims.map((claim) => claim.asset)).size !== input.claims.length) {
    throw new RangeError("a bundle names each asset once")
  }
  const entries = input.claims.map((claim): Entry => {
    assertAsset(claim.asset)
    const { challenge, response } = proveEntry(
      input.keyPair,
      {
        chainId: input.chainId,
        account: input.account,
        asset: claim.asset,
        publicKey: input.keyPair.publicKey,
        ciphertext: claim.ciphertext,
        amount: claim.amount,
        expiresAtSeconds: input.expiresAtSeconds
      },
      random
    )
    return { asset: claim.asset, amount: claim.amount, ciphertextVersion: claim.ciphertext.ciphertextVersion, challenge, response }
  })
  return encode({ expiresAtSeconds: input.expiresAtSeconds, entries })
}

/**
 * Encodes a bundle to its wire form.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encode = (bundle: Bundle): string =>
  encodeBase64Url(
    concatBytes(
      Uint8Array.of(formatVersion),
      uintBE(bundle.expiresAtSeconds, 8),
      Uint8Array.of(bundle.entries.length),
      ...bundle.entries.map((entry) =>
        concatBytes(
          Uint8Array.of(utf8(entry.asset).length),
          utf8(entry.asset),
          uintBE(entry.amount, 8),
          uintBE(entry.ciphertextVersion, 8),
          uintBE(entry.challenge, 32),
          uintBE(entry.response, 32)
        )
      )
    )
  )

/**
 * Decodes the wire form, checking structure only (lengths, counts, asset names, no
 * trailing bytes, no duplicates); scalars are range-checked by `verify`.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decode = (text: string): Result<Bundle, DecryptionProofError> => {
  const bytes = decodeBase64(text)
  if (bytes === undefined) return fail("proof_encoding_invalid")
  const reader = new ByteReader(bytes)
  const version = reader.uint(1)
  if (version === undefined) return fail("proof_malformed")
  if (version !== BigInt(formatVersion)) return fail("proof_version_unsupported")
  const expiresAtSeconds = reader.uint(8)
  const count = reader.uint(1)
  if (expiresAtSeconds === undefined || count === undefined || count < 1n || count > BigInt(entriesMax)) {
    return fail("proof_malformed")
  }
  const entries: Array<Entry> = []
  for (let index = 0n; index < count; index++) {
    const assetLength = reader.uint(1)
    if (assetLength === undefined || assetLength < 1n || assetLength > BigInt(assetBytesMax)) return fail("proof_malformed")
    const assetBytes = reader.take(Number(assetLength))
    const amount = reader.uint(8)
    const ciphertextVersion = reader.uint(8)
    const challenge = reader.uint(32)
    const response = reader.uint(32)
    if (
      assetBytes === undefined ||
      amount === undefined ||
      ciphertextVersion === undefined ||
      challenge === undefined ||
      response === undefined ||
      !assetBytes.every((byte) => byte >= 0x21 && byte <= 0x7e)
    ) {
      return fail("proof_malformed")
    }
    const asset = String.fromCharCode(...assetBytes)
    if (entries.some((entry) => entry.asset === asset)) return fail("proof_asset_duplicate")
    entries.push({ asset, amount, ciphertextVersion, challenge, response })
  }
  if (reader.remaining !== 0) return fail("proof_malformed")
  return succeed({ expiresAtSeconds, entries })
}

/**
 * Verifies one entry against its statement.
 *
 * @since 0.1.0
 * @category validation
 */
export const verifyEntry = (
  statement: Statement,
  entry: { readonly challenge: bigint; readonly response: bigint }
): Result<void, DecryptionProofError> => {
  const { challenge, response } = entry
  if (challenge < 0n || challenge >= groupOrder || response < 0n || response >= groupOrder) {
    return fail("proof_scalar_out_of_range")
  }
  const publicKey = EncryptionKey.parsePublicKey(statement.publicKey)
  if (!publicKey.ok) return fail("proof_public_key_invalid")
  const commitment = Point.parse(statement.ciphertext.commitment, { allowIdentity: true })
  const handle = Point.parse(statement.ciphertext.handle, { allowIdentity: true })
  if (!commitment.ok || !handle.ok) return fail("proof_point_invalid")
  const backend = current()
  // X = C − b·G; b is public here (the client discloses it), so variable time is fine.
  const claimed = backend.subtract(element(commitment.value), backend.multiplyPublic(backend.generatorG, statement.amount))
  const commitmentD = backend.subtract(
    backend.multiplyPublic(element(handle.value), response),
    backend.multiplyPublic(claimed, challenge)
  )
  const commitmentPublicKey = backend.subtract(
    backend.multiplyPublic(element(publicKey.value), response),
    backend.multiplyPublic(backend.generatorH, challenge)
  )
  const expected = challengeOf(statement, encodePoint(commitmentD), encodePoint(commitmentPublicKey))
  return expected === challenge ? succeed(undefined) : fail("proof_mismatch")
}

/**
 * Checks a bundle's expiry: now ≤ expiry ≤ now + lifetimeMax. A verifier that must read
 * something costly before `verify` (D63: the server looks for the ciphertext a proof names
 * among recent blocks) runs this first, so an expired proof costs no read.
 *
 * @since 0.9.0
 * @category validation
 */
export const checkExpiry = (
  bundle: Bundle,
  nowSeconds: bigint,
  lifetimeMaxSeconds: bigint
): Result<void, DecryptionProofError> => {
  if (bundle.expiresAtSeconds < nowSeconds) return fail("proof_expired")
  if (bundle.expiresAtSeconds > nowSeconds + lifetimeMaxSeconds) return fail("proof_expiry_too_far")
  return succeed(undefined)
}

/**
 * Verifies a bundle: decodes it, checks now ≤ expiry ≤ now + lifetimeMax, checks every
 * asset is known and its ciphertext version is the one `balanceOf` gives, and verifies every
 * proof against that ciphertext, the context's chain, account and key. Returns
 * the proven (asset, amount) pairs, in bundle order.
 *
 * @since 0.1.0
 * @category validation
 */
export const verify = (
  text: string,
  context: VerifyContext
): Result<ReadonlyArray<{ readonly asset: string; readonly amount: bigint }>, DecryptionProofError> => {
  const decoded = decode(text)
  if (!decoded.ok) return decoded
  const bundle = decoded.value
  const expiry = checkExpiry(bundle, context.nowSeconds, context.lifetimeMaxSeconds)
  if (!expiry.ok) return expiry
  const proven: Array<{ readonly asset: string; readonly amount: bigint }> = []
  for (const entry of bundle.entries) {
    const ciphertext = context.balanceOf(entry.asset)
    if (ciphertext === undefined) return fail("proof_asset_unknown")
    if (ciphertext.ciphertextVersion !== entry.ciphertextVersion) return fail("proof_ciphertext_stale")
    const verified = verifyEntry(
      {
        chainId: context.chainId,
        account: context.account,
        asset: entry.asset,
        publicKey: context.publicKey,
        ciphertext,
        amount: entry.amount,
        expiresAtSeconds: bundle.expiresAtSeconds
      },
      entry
    )
    if (!verified.ok) return verified
    proven.push({ asset: entry.asset, amount: entry.amount })
  }
  return succeed(proven)
}

