/**
 * Account creation and KYC changes: the orchestration over the store, the
 * custodial wallet and the secret box.
 *
 * Each account gets its own custodial wallet (a secp256k1 key from the CSPRNG);
 * its address is the account's `public_key`, its private key is sealed under the
 * KEK with the account id as associated data and never leaves the server.
 *
 * @since 0.1.0
 */
import { Attestation } from "@pps/crypto"
import { GuardianKeys } from "@pps/guardian"
import * as Invariant from "../platform/Invariant.ts"
import { Clock, Context, DateTime, Effect, Layer, Option } from "effect"
import type { SqlError } from "effect/sql"
import { bytesToHex, type Hex, hexToBytes, type LocalAccount } from "viem"
import { generatePrivateKey, privateKeyToAccount, privateKeyToAddress } from "viem/accounts"
import { makeId } from "../platform/Ids.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import { AccountStore, type HandleConflict, type SealedWallet } from "./AccountStore.ts"
import type { Account, AccountType, KycStatus } from "@pps/api/Accounts"

/**
 * The associated data that binds a sealed wallet key to its account.
 *
 * @since 0.1.0
 * @category constructors
 */
export const walletKeyBinding = (accountId: string) => `pps/wallet-key/v1/${accountId}`

/**
 * @since 0.1.0
 * @category services
 */
export class Accounts extends Context.Service<Accounts, {
  readonly create: (input: {
    readonly handle: string
    readonly type: AccountType
    readonly kycStatus: KycStatus
    readonly ownerAccountId?: string
  }) => Effect.Effect<Account, HandleConflict | SqlError.SqlError>
  readonly get: (accountId: string) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
  readonly setKycStatus: (accountId: string, status: KycStatus) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
  readonly findByHandle: (handle: string) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
  readonly findByWalletAddress: (address: string) => Effect.Effect<Option.Option<Account>, SqlError.SqlError>
  /** D60: whether the account, or the owner of the agent it is, is suspended. */
  readonly isSuspended: (accountId: string) => Effect.Effect<boolean, SqlError.SqlError>
  /** D60: sets (a time) or clears (null) the suspension; None for an unknown account. */
  readonly setSuspended: AccountStore["Service"]["setSuspended"]
  /** D60: the operator's directory. */
  readonly search: AccountStore["Service"]["search"]
  /** D60: one account as the operator sees it (with its status). */
  readonly operatorView: AccountStore["Service"]["operatorView"]
  /**
   * The account's custodial wallet, for signing on its behalf (key registration).
   * The key is opened for the call and never leaves the process.
   */
  readonly custodialSigner: (accountId: string) => Effect.Effect<LocalAccount, SqlError.SqlError>
  /** D54: every custodial wallet as sealed, never opened here (the operator's backup). */
  readonly sealedWallets: Effect.Effect<ReadonlyArray<SealedWallet>, SqlError.SqlError>
  /**
   * The account's own signature over a transfer's typed data, the co-signature every debit
   * needs beside the guardian's (D51), made with its custodial wallet key: deterministic
   * (RFC 6979), low-s, 65 bytes. The key is opened for the call and never leaves the process.
   */
  readonly signTransfer: (accountId: string, typedData: Attestation.TypedData) => Effect.Effect<Hex, SqlError.SqlError>
}>()("server/accounts/Accounts") {
  static readonly layer = Layer.effect(
    Accounts,
    Effect.gen(function*() {
      const store = yield* AccountStore
      const box = yield* SecretBox
      const openWalletKey = (accountId: string) =>
        Effect.gen(function*() {
          const sealed = yield* store.walletKeySealed(accountId)
          const invariant = "every account row has a sealed wallet key that opens under the KEK"
          return yield* Invariant.some(invariant)(sealed).pipe(
            Effect.flatMap((found) => box.open(found, walletKeyBinding(accountId)).pipe(Invariant.orDie(invariant)))
          )
        })
      return Accounts.of({
        create: Effect.fn("Accounts.create")(function*(input) {
          const nowMs = yield* Clock.currentTimeMillis
          const accountId = makeId("acct", nowMs)
          const privateKey = generatePrivateKey()
          const walletAddress = privateKeyToAddress(privateKey)
          const walletKeySealed = box.seal(hexToBytes(privateKey), walletKeyBinding(accountId))
          return yield* store.insert({
            accountId,
            handle: input.handle,
            type: input.type,
            ownerAccountId: input.ownerAccountId ?? null,
            walletAddress,
            walletKeySealed,
            kycStatus: input.kycStatus,
            createdAt: DateTime.formatIso(DateTime.makeUnsafe(nowMs))
          })
        }),
        get: store.findById,
        setKycStatus: store.setKycStatus,
        findByHandle: store.findByHandle,
        findByWalletAddress: store.findByWalletAddress,
        isSuspended: store.isSuspended,
        setSuspended: store.setSuspended,
        search: store.search,
        operatorView: store.operatorView,
        sealedWallets: store.sealedWallets,
        custodialSigner: (accountId) => Effect.map(openWalletKey(accountId), (key) => privateKeyToAccount(bytesToHex(key))),
        // libsecp256k1 (WebAssembly), as the guardian's attestations and the relayers' transactions:
        // the same bytes as noble's `Attestation.sign` (RFC 6979, low-s) at about a third of its
        // CPU, and this runs on the event loop for every transfer (0.5 ms of noble in the profile
        // of docs/benchmarks/notes/2026-11-29-cpu-profile.md).
        signTransfer: (accountId, typedData) =>
          Effect.map(openWalletKey(accountId), (key) => Attestation.signWith(GuardianKeys.libsecp256k1Signer(key), typedData))
      })
    })
  ).pipe(Layer.provide(AccountStore.layer))
}

