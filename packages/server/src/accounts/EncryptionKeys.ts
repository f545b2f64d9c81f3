/**
 * Encryption key registration (D12): an account becomes confidential-ready once
 * its BN254 encryption public key is registered in the key registry of every
 * asset's ConfidentialToken on its mode's chain.
 *
 * The client proves possession of the key once per contract (the proof binds
 * chain id, contract and the account's address, docs/crypto.md); the server
 * checks the proofs, then submits `registerFor` through a relayer, authorised by
 * the account's own EIP-712 `KeyRegistration` signature made with its custodial
 * wallet, and waits until it is mined. The chain is the truth: a raw address is
 * confidential-ready when the registry has a key for it.
 *
 * @since 0.1.0
 */
import { ConfidentialTokenArtifact, TypedData } from "@pps/contracts"
import { EncryptionKey, Point } from "@pps/crypto"
import { Clock, Context, DateTime, Effect, Layer, Option } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { type Address, bytesToHex, encodeFunctionData, getAddress, type LocalAccount } from "viem"
import type { Mode } from "@pps/api/ApiKeys"
import {
  EncryptionKeyAlreadyRegistered,
  EncryptionKeyInvalid,
  InternalError,
  LivemodeUnavailable,
  ServiceUnavailable
} from "@pps/api/Errors"
import { fromEvmPoint, toEvmPoint } from "../settlement/calls.ts"
import { type ChainContext, ChainError, confidentialTokenOf } from "../settlement/Chains.ts"
import { gasLimits } from "../settlement/domain.ts"
import { type ChainUnavailable, Settlement } from "../settlement/Settlement.ts"
import { type Asset, assets } from "@pps/api/Transfers"
import { Accounts } from "./Accounts.ts"
import * as RegisteredKeyCache from "./RegisteredKeyCache.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { DependencyUnavailable } from "../platform/Unavailable.ts"

/** A registration is mined within a few blocks; past this the request answers 503 and a retry continues it. */
const registrationWaitMs = 30_000

/**
 * @since 0.1.0
 * @category services
 */
export class EncryptionKeys extends Context.Service<EncryptionKeys, {
  /** Registers the key (idempotent for the same key); the registered key (64-byte EVM encoding). */
  readonly register: (input: {
    readonly accountId: string
    readonly mode: Mode
    readonly publicKey: Uint8Array
    readonly proofs: Readonly<Record<Asset, Uint8Array>>
  }) => Effect.Effect<
    Uint8Array,
    | EncryptionKeyInvalid
    | EncryptionKeyAlreadyRegistered
    | LivemodeUnavailable
    | ServiceUnavailable
    | InternalError
    | DependencyUnavailable
  >
  /** The registered key of one of our accounts. */
  readonly keyOfAccount: (accountId: string, mode: Mode) => Effect.Effect<Option.Option<Uint8Array>, SqlError.SqlError>
  /**
   * D55: the account's key was replaced on chain: the row holds the new key, and this node and
   * every other live node forget the one they remembered (RegisteredKeyCache.ts).
   */
  readonly replaced: (accountId: string, mode: Mode, publicKey: Uint8Array) => Effect.Effect<void, SqlError.SqlError>
  /** The key the chain's registry holds for any address (USDG's registry). */
  readonly keyOfAddress: (chain: ChainContext, address: Address) => Effect.Effect<Option.Option<Uint8Array>, ChainError>
  /** The same in one contract's registry. */
  readonly keyOfAddressIn: (chain: ChainContext, contract: Address, address: Address) => Effect.Effect<Option.Option<Uint8Array>, ChainError>
}>()("server/accounts/EncryptionKeys") {
  static readonly layer = Layer.effect(
    EncryptionKeys,
    Effect.gen(function*() {
      const context: EncryptionKeysContext = {
        sql: yield* SqlClient.SqlClient,
        accounts: yield* Accounts,
        settlement: yield* Settlement,
        registered: yield* RegisteredKeyCache.make
      }
      return EncryptionKeys.of({
        register: (input) => register(context, input),
        keyOfAccount: (accountId, mode) => keyOfAccount(context, accountId, mode),
        replaced: (accountId, mode, publicKey) =>
          Effect.gen(function*() {
            const now = DateTime.formatIso(DateTime.makeUnsafe(yield* Clock.currentTimeMillis))
            yield* context.sql`
              UPDATE encryption_keys SET public_key = ${publicKey}, registered_at = ${now}::timestamptz
              WHERE account_id = ${accountId} AND mode = ${mode}`
            yield* context.registered.forgetEverywhere(`${mode}:${accountId}`)
          }),
        keyOfAddress,
        keyOfAddressIn
      })
    })
  )
}

/**
 * What the steps share. `registered`: the registered keys read so far, by account and mode. A
 * registered key changes only by a rotation (D55, `replaced`), which forgets it on every node
 * (RegisteredKeyCache.ts); a second registration of another key is refused and no row is deleted.
 * Only registered keys are kept.
 */
interface EncryptionKeysContext {
  readonly sql: SqlClient.SqlClient
  readonly accounts: Accounts["Service"]
  readonly settlement: Settlement["Service"]
  readonly registered: RegisteredKeyCache.RegisteredKeyCache
}

const keyOfAddress = (chain: ChainContext, address: Address) => keyOfAddressIn(chain, chain.contracts.confidentialUsdg, address)

const keyOfAddressIn = (chain: ChainContext, contract: Address, address: Address) =>
  Effect.tryPromise({
    try: () =>
      chain.client.readContract({
        address: contract,
        abi: ConfidentialTokenArtifact.abi,
        functionName: "encryptionKeyOf",
        args: [address]
      }),
    catch: (cause) => new ChainError({ message: "reading the key registry failed", cause })
  }).pipe(Effect.map((point) => {
    const encoded = fromEvmPoint(point)
    return Point.isIdentity(encoded as Point.Point) ? Option.none<Uint8Array>() : Option.some(encoded)
  }))

const keyOfAccount = ({ registered, sql }: EncryptionKeysContext, accountId: string, mode: Mode) =>
  registered.readThrough(
    `${mode}:${accountId}`,
    sql<{ public_key: Uint8Array }>`
      SELECT public_key FROM encryption_keys
      WHERE account_id = ${accountId} AND mode = ${mode} AND registered_at IS NOT NULL`.pipe(
      Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => new Uint8Array(row.public_key)))
    )
  )

const isRegisteredOn = (chain: ChainContext, contract: Address, account: Address) =>
  Effect.tryPromise({
    try: () =>
      chain.client.readContract({
        address: contract,
        abi: ConfidentialTokenArtifact.abi,
        functionName: "isRegistered",
        args: [account]
      }),
    catch: (cause) => new ChainError({ message: "reading the key registry failed", cause })
  })

/** The chain did not answer a step of the registration: 503, and a retry continues it. */
const chainUnavailable = (cause: ChainError | ChainUnavailable) =>
  Effect.logError("key registration failed on chain", cause).pipe(
    Effect.andThen(Effect.fail(
      new DependencyUnavailable({ dependency: "chain", operation: "EncryptionKeys.register", retryable: true, detail: cause._tag })
    ))
  )

/**
 * @since 0.12.0
 * @category models
 */
export interface Registration {
  readonly accountId: string
  readonly mode: Mode
  readonly publicKey: Uint8Array
  readonly proofs: Readonly<Record<Asset, Uint8Array>>
}

/**
 * The key parses and the client proved it holds it, for every asset's contract (registration
 * and D55's rotation alike).
 *
 * @since 0.12.0
 * @category steps
 */
export const verifiedKey = (chain: ChainContext, input: Registration, wallet: Address) =>
  Effect.gen(function*() {
    const parsed = EncryptionKey.parsePublicKey(input.publicKey)
    if (!parsed.ok) return yield* Effect.fail(EncryptionKeyInvalid.of("public_key", parsed.reason))
    for (const asset of Object.keys(assets) as Array<Asset>) {
      const verified = EncryptionKey.verifyOwnership(parsed.value, input.proofs[asset], {
        chainId: BigInt(chain.chainId),
        contract: confidentialTokenOf(chain, asset),
        account: wallet
      })
      if (!verified.ok) return yield* Effect.fail(EncryptionKeyInvalid.of(`proofs.${asset}`, verified.reason))
    }
    return parsed.value
  })

/** Stores the key once; whether it is already registered on chain (another key stored: refused). */
const storedKey = ({ sql }: EncryptionKeysContext, input: Registration, publicKey: Uint8Array, now: string) =>
  Effect.gen(function*() {
    yield* sql`
      INSERT INTO encryption_keys (account_id, mode, public_key, created_at)
      VALUES (${input.accountId}, ${input.mode}, ${publicKey}, ${now}::timestamptz)
      ON CONFLICT (account_id, mode) DO NOTHING`
    const rows = yield* sql<{ public_key: Uint8Array; registered_at: string | null }>`
      SELECT public_key, iso_utc(registered_at) AS registered_at FROM encryption_keys
      WHERE account_id = ${input.accountId} AND mode = ${input.mode}`
    const stored = rows[0]
    if (stored === undefined || !Buffer.from(stored.public_key).equals(Buffer.from(publicKey))) {
      return yield* Effect.fail(EncryptionKeyAlreadyRegistered.of())
    }
    return { registered: stored.registered_at !== null }
  }).pipe(Unavailable.database("EncryptionKeys.register"))

/** Registers the key in one asset's contract through the relayer, and waits until it is mined. */
const registerOnChain = Effect.fn("EncryptionKeys.registerOnChain")(function*(
  { settlement }: EncryptionKeysContext,
  chain: ChainContext,
  input: Registration,
  signer: LocalAccount,
  wallet: Address,
  asset: Asset
) {
  const contract = confidentialTokenOf(chain, asset)
  if (yield* isRegisteredOn(chain, contract, wallet).pipe(Effect.catch(chainUnavailable))) return
  const key = toEvmPoint(input.publicKey)
  const accountSignature = yield* Effect.promise(() =>
    signer.signTypedData({
      domain: TypedData.domain(chain.chainId, contract),
      types: TypedData.keyRegistrationTypes,
      primaryType: "KeyRegistration",
      message: { account: wallet, keyX: key.x, keyY: key.y }
    })
  )
  const submissionId = `reg_${input.accountId}_${input.mode}_${asset}`
  yield* settlement.submit({
    submissionId,
    mode: input.mode,
    kind: "register_key",
    target: contract,
    data: encodeFunctionData({
      abi: ConfidentialTokenArtifact.abi,
      functionName: "registerFor",
      args: [wallet, key, bytesToHex(input.proofs[asset]), accountSignature]
    }),
    gasLimit: gasLimits.register_key,
    deadlineSeconds: null,
    replayKey: null
  }).pipe(
    Effect.catchTags({ ChainError: chainUnavailable, ChainUnavailable: chainUnavailable })
  )
  const outcome = yield* settlement.awaitResolution(submissionId, registrationWaitMs)
  if (Option.isNone(outcome)) {
    return yield* Effect.fail(ServiceUnavailable.of("The key registration is still being mined; retry the same request."))
  }
  if (outcome.value._tag === "Failed") {
    return yield* Effect.logError("key registration reverted").pipe(
      Effect.annotateLogs({ submission_id: submissionId }),
      Effect.andThen(Effect.fail(InternalError.of()))
    )
  }
})

const register = Effect.fn("EncryptionKeys.register")(function*(context: EncryptionKeysContext, input: Registration) {
  const chain = yield* Option.match(context.settlement.chain(input.mode), {
    onNone: () => Effect.fail(LivemodeUnavailable.of()),
    onSome: Effect.succeed
  })
  const account = yield* context.accounts.get(input.accountId).pipe(
    Unavailable.database("EncryptionKeys.register"),
    Effect.flatMap(Invariant.some("an authenticated principal's account exists"))
  )
  const wallet = getAddress(account.walletAddress)
  const publicKey = yield* verifiedKey(chain, input, wallet)
  const now = DateTime.formatIso(DateTime.makeUnsafe(yield* Clock.currentTimeMillis))
  const stored = yield* storedKey(context, input, publicKey, now)
  if (stored.registered) return publicKey
  const signer = yield* context.accounts.custodialSigner(input.accountId).pipe(Unavailable.database("EncryptionKeys.register"))
  for (const asset of Object.keys(assets) as Array<Asset>) {
    yield* registerOnChain(context, chain, { ...input, publicKey }, signer, wallet, asset).pipe(
      Unavailable.database("EncryptionKeys.registerOnChain")
    )
  }
  yield* context.sql`
    UPDATE encryption_keys SET registered_at = ${now}::timestamptz
    WHERE account_id = ${input.accountId} AND mode = ${input.mode}`.pipe(Unavailable.database("EncryptionKeys.register"))
  return publicKey
})
