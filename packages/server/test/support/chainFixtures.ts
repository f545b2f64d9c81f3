/**
 * Chain fixtures for settlement tests: a stand-in guardian (its attestation key
 * and BN254 encryption key, from a seed) and signed ConfidentialToken transfer
 * requests built with the crypto package, exactly as the real guardian signs them.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Attestation, ElGamal, EncryptionKey, Point } from "@pps/crypto"
import { Effect, Layer, Option, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { type Address, type Hex, numberToHex } from "viem"
import { privateKeyToAddress } from "viem/accounts"
import { type AppConfigShape, AppConfig } from "../../src/config/AppConfig.ts"
import { MigrationsLive, SqlLive } from "../../src/platform/Database.ts"
import { DataDir } from "../../src/platform/DataDir.ts"
import { NodeLiveness } from "../../src/platform/NodeLiveness.ts"
import { SecretBox } from "../../src/platform/SecretBox.ts"
import { Secrets } from "../../src/platform/Secrets.ts"
import { Chains } from "../../src/settlement/Chains.ts"
import type { ChainContext } from "../../src/settlement/Chains.ts"
import { DevChain } from "../../src/settlement/DevChain.ts"
import { confidentialTransferCall } from "../../src/settlement/calls.ts"
import { gasLimits, type SubmissionRequest } from "../../src/settlement/domain.ts"
import { GuardianIdentity } from "../../src/settlement/GuardianIdentity.ts"
import { Settlement } from "../../src/settlement/Settlement.ts"
import { testConfig } from "./TestServer.ts"

/** 32 bytes from a label, reduced below the group order: a valid secret scalar. */
export const scalarFrom = (label: string): Uint8Array => {
  const value = BigInt(`0x${createHash("sha256").update(label).digest("hex")}`) % (Point.order - 1n) + 1n
  return new Uint8Array(Buffer.from(value.toString(16).padStart(64, "0"), "hex"))
}

export const keyPairFrom = (label: string): EncryptionKey.KeyPair => {
  const result = EncryptionKey.fromSecretKey(scalarFrom(label))
  if (!result.ok) throw new Error("fixture key invalid")
  return result.value
}

export interface TestGuardian {
  readonly signingKey: Uint8Array
  readonly signerAddress: Address
  readonly encryption: EncryptionKey.KeyPair
  readonly layer: Layer.Layer<GuardianIdentity>
}

export const makeTestGuardian = (seed: string): TestGuardian => {
  const signingKey = scalarFrom(`${seed}/guardian/signing`)
  const encryption = keyPairFrom(`${seed}/guardian/encryption`)
  const signerAddress = Attestation.signerAddress(signingKey)
  return {
    signingKey,
    signerAddress,
    encryption,
    layer: Layer.succeed(GuardianIdentity, { signerAddress, encryptionKey: encryption.publicKey })
  }
}

/** A transfer id as the server makes it: 16 bytes left-padded to 32. */
export const transferIdFrom = (label: string): Hex =>
  numberToHex(BigInt(`0x${createHash("sha256").update(label).digest("hex").slice(0, 32)}`), { size: 32 })

/** A confidential transfer signed by the guardian and by its sender (D51), deterministic in its label. */
export const signedConfidentialTransfer = (options: {
  readonly label: string
  readonly guardian: TestGuardian
  readonly chainId: number
  readonly contract: Address
  readonly from: Address
  readonly to: Address
  readonly fromKey: EncryptionKey.KeyPair
  /** The sender wallet's secp256k1 key: its co-signature (D51) goes beside the guardian's. */
  readonly fromSigningKey: Uint8Array
  readonly toKey: EncryptionKey.KeyPair
  readonly amount: bigint
  readonly nonce: bigint
  readonly deadlineSeconds: bigint
}): SubmissionRequest => {
  const randomness = BigInt(`0x${Buffer.from(scalarFrom(`${options.label}/r`)).toString("hex")}`)
  const ciphertext = ElGamal.encryptWith({ amount: options.amount, randomness }, [
    options.fromKey.publicKey,
    options.toKey.publicKey,
    options.guardian.encryption.publicKey
  ])
  const [fromHandle, toHandle, guardianHandle] = ciphertext.handles
  const transferId = transferIdFrom(options.label)
  const sealedDigest = `0x${createHash("sha256").update(`${options.label}/sealed`).digest("hex")}` as Hex
  const typedData = Attestation.confidentialTransfer(
    Attestation.domain(BigInt(options.chainId), options.contract),
    {
      from: options.from,
      to: options.to,
      transferId,
      nonce: options.nonce,
      ciphertextDigest: ElGamal.digest(ciphertext),
      sealedDigest,
      deadline: options.deadlineSeconds
    }
  )
  const signatures = {
    guardian: Attestation.sign(options.guardian.signingKey, typedData),
    account: Attestation.sign(options.fromSigningKey, typedData)
  }
  return {
    submissionId: `tr_${options.label}`,
    mode: "test",
    kind: "confidential_transfer",
    target: options.contract,
    data: confidentialTransferCall({
      from: options.from,
      to: options.to,
      transferId,
      nonce: options.nonce,
      ciphertext: { commitment: ciphertext.commitment, fromHandle: fromHandle!, toHandle: toHandle!, guardianHandle: guardianHandle! },
      sealedDigest,
      deadlineSeconds: options.deadlineSeconds
    }, signatures),
    gasLimit: gasLimits.confidential_transfer,
    deadlineSeconds: options.deadlineSeconds,
    replayKey: { sender: options.from, nonce: options.nonce, transferId }
  }
}

/** Settlement and everything under it, on embedded anvil and PGlite in `dataDir`. */
export const settlementLayer = (dataDir: string, guardian: TestGuardian, overrides: Partial<AppConfigShape> = {}) =>
  Settlement.layer.pipe(Layer.provideMerge(settlementDependencies(dataDir, guardian, overrides)))

/** What the settlement layer runs on (chains, database, configuration), for a test that builds it its own way. */
export const settlementDependencies = (dataDir: string, guardian: TestGuardian, overrides: Partial<AppConfigShape> = {}) =>
  Chains.layer.pipe(
    Layer.provideMerge(NodeLiveness.layer),
    Layer.provideMerge(DevChain.layer),
    Layer.provideMerge(guardian.layer),
    Layer.provideMerge(SecretBox.layer),
    Layer.provideMerge(MigrationsLive),
    Layer.provideMerge(SqlLive),
    Layer.provideMerge(Secrets.layer),
    Layer.provideMerge(DataDir.layer),
    Layer.provideMerge(Layer.succeed(AppConfig, testConfig(dataDir, overrides)))
  )

/**
 * `onEmbeddedChain` with the settlement engine on a TestClock the test moves (`advanceEngineClock`,
 * `TestClock.adjust`), while the node, the database and their start-up run on the live clock.
 */
export const onEmbeddedChainOnTestClock = <A, E>(
  guardian: TestGuardian,
  overrides: Partial<AppConfigShape>,
  body: (chain: ChainContext) => Effect.Effect<A, E, Settlement | SqlClient.SqlClient | Scope.Scope>
) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-settlement-clock-"))
  const layer = Settlement.layer.pipe(
    Layer.provideMerge(TestClock.layer()),
    Layer.provideMerge(settlementDependencies(dataDir, guardian, overrides))
  )
  return Effect.gen(function*() {
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
    return yield* body(Option.getOrThrow((yield* Settlement).chain("test")))
  }).pipe(Effect.provide(layer))
}

/** Virtual time per step while a test on TestClock waits: below the watcher's poll, so every round runs. */
export const engineClockStepMs = 100
/** One step of the engine's clock. */
export const engineClockTick = TestClock.adjust(engineClockStepMs)
/** A real pause (not the engine's clock), for the node's and the database's answers. */
export const realPause = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

/** Moves the engine's clock by `ms`, a step at a time, with a real pause after each so every watcher round runs. */
export const advanceEngineClock = (ms: number) =>
  Effect.gen(function*() {
    for (let moved = 0; moved < ms; moved += engineClockStepMs) {
      yield* engineClockTick
      yield* realPause(10)
    }
  })

/** `body` with the settlement engine on embedded anvil and PGlite in a fresh directory, removed afterwards. */
export const onEmbeddedChain = <A, E>(
  guardian: TestGuardian,
  overrides: Partial<AppConfigShape>,
  body: (chain: ChainContext) => Effect.Effect<A, E, Settlement | Scope.Scope>
) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-settlement-"))
  return Effect.gen(function*() {
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
    return yield* body(Option.getOrThrow((yield* Settlement).chain("test")))
  }).pipe(Effect.provide(settlementLayer(dataDir, guardian, overrides)))
}

/** A transfer of 100 between two parties named after `label` (`<label>-sender`, `<label>-recipient`), attested by `guardian`. */
export const transferBetweenParties = (guardian: TestGuardian, chain: ChainContext, label: string, deadlineSeconds: bigint) => {
  const address = (party: string) => privateKeyToAddress(`0x${Buffer.from(scalarFrom(party)).toString("hex")}`)
  return signedConfidentialTransfer({
    label: `${label}-0`,
    guardian,
    chainId: chain.chainId,
    contract: chain.contracts.confidentialUsdg,
    from: address(`${label}-sender`),
    to: address(`${label}-recipient`),
    fromKey: keyPairFrom(`${label}-sender`),
    fromSigningKey: scalarFrom(`${label}-sender`),
    toKey: keyPairFrom(`${label}-recipient`),
    amount: 100n,
    nonce: 0n,
    deadlineSeconds
  })
}
