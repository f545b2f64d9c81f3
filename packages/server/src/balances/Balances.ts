/**
 * Balances (D19, D20): what the server can say about an account's balances
 * without being able to read them.
 *
 * - Without a proof: per asset, whether the balance is non-zero — a predicate
 *   the guardian answers; no amount crosses.
 * - With a decryption proof (client-made, docs/crypto.md): the server checks it
 *   against the on-chain ciphertext (ΣC, ΣD_owner) it was made from, the latest or
 *   (D63) a recent block's (RecentCiphertexts.ts), and the account's registered
 *   key, and returns the amounts the client proved, each with the block it is as
 *   of. The server learns the amounts the client chose to reveal, for this
 *   response only.
 * - The sealed statement (ext): the guardian's statement of the balance sealed to
 *   the account's key, with the on-chain ciphertext and its version, from which a
 *   client decrypts and builds its proof.
 *
 * The ciphertext version is the first 8 bytes of keccak256(ΣC ‖ ΣD_owner) read as
 * a u64: the contract keeps no counter, and a version derived from the ciphertext
 * changes exactly when the ciphertext does, so server and client agree on it
 * without shared state.
 *
 * @since 0.1.0
 */
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { DecryptionProof, type Point } from "@pps/crypto"
import { GuardianClient } from "@pps/guardian"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { BaseError, bytesToHex, ContractFunctionZeroDataError, getAddress, keccak256 } from "viem"
import { Accounts } from "../accounts/Accounts.ts"
import { type Account, isKycSufficient } from "@pps/api/Accounts"
import { EncryptionKeys } from "../accounts/EncryptionKeys.ts"
import type { Principal } from "@pps/api/ApiKeys"
import {
  DecryptionProofInvalid,
  EncryptionKeyRequired,
  KycRequired,
  LivemodeUnavailable,
  ServiceUnavailable
} from "@pps/api/Errors"
import { fromEvmPoint } from "../settlement/calls.ts"
import { type ChainContext, confidentialTokenOf } from "../settlement/Chains.ts"
import { Settlement } from "../settlement/Settlement.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable } from "../platform/Unavailable.ts"
import { type Asset, assets, formatAmount } from "@pps/api/Transfers"
import { type AtBlock, locate } from "./RecentCiphertexts.ts"

/** D20: a proof older than 5 minutes is refused; so is one that claims to live longer. */
const proofLifetimeMaxSeconds = 300n


/**
 * An account's on-chain balance ciphertext for one asset.
 *
 * @since 0.1.0
 * @category models
 */
export interface OnChainBalance {
  readonly asset: Asset
  readonly contract: `0x${string}`
  readonly commitment: Uint8Array
  readonly ownerHandle: Uint8Array
  readonly ciphertextVersion: bigint
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const ciphertextVersionOf = (commitment: Uint8Array, handle: Uint8Array): bigint =>
  BigInt(keccak256(Buffer.concat([commitment, handle])).slice(0, 18))


/**
 * @since 0.1.0
 * @category services
 */
export class Balances extends Context.Service<Balances, {
  readonly nonZero: (principal: Principal) => Effect.Effect<
    ReadonlyArray<{ readonly asset: Asset; readonly non_zero: boolean }>,
    KycRequired | LivemodeUnavailable | ServiceUnavailable
  >
  readonly proven: (principal: Principal, proof: string) => Effect.Effect<
    ReadonlyArray<{ readonly asset: string; readonly amount: string; readonly as_of_block: number }>,
    KycRequired | LivemodeUnavailable | EncryptionKeyRequired | DecryptionProofInvalid | ServiceUnavailable
  >
  readonly sealed: (principal: Principal) => Effect.Effect<
    ReadonlyArray<{
      readonly asset: Asset
      readonly chain_id: number
      readonly contract: string
      readonly account: string
      readonly sealed_statement: string
      readonly statement_version: string
      readonly commitment: string
      readonly handle: string
      readonly ciphertext_version: string
    }>,
    KycRequired | LivemodeUnavailable | EncryptionKeyRequired | ServiceUnavailable
  >
  /**
   * D40: per API key of the account and asset, the guardian's total of confirmed debits
   * sealed to the account's key. Keys with nothing confirmed are absent (their total is 0).
   */
  readonly keyTotals: (principal: Principal) => Effect.Effect<
    ReadonlyArray<{
      readonly api_key_id: string
      readonly asset: Asset
      readonly chain_id: number
      readonly contract: string
      readonly account: string
      readonly sealed_total: string
    }>,
    KycRequired | LivemodeUnavailable | EncryptionKeyRequired | ServiceUnavailable
  >
}>()("server/balances/Balances") {
  static readonly layer = Layer.effect(
    Balances,
    Effect.gen(function*() {
      const context: BalancesContext = {
        accounts: yield* Accounts,
        keys: yield* EncryptionKeys,
        settlement: yield* Settlement,
        guardian: yield* GuardianClient.GuardianClient
      }
      return Balances.of({
        nonZero: (principal) => nonZero(context, principal),
        proven: (principal, proof) => proven(context, principal, proof),
        sealed: (principal) => sealed(context, principal),
        keyTotals: (principal) => keyTotals(context, principal)
      })
    })
  )
}

/** What the steps share: the account's records, its key, its chain and the guardian. */
interface BalancesContext {
  readonly accounts: Accounts["Service"]
  readonly keys: EncryptionKeys["Service"]
  readonly settlement: Settlement["Service"]
  readonly guardian: GuardianClient.GuardianClient["Service"]
}

const assetNames = Object.keys(assets) as Array<Asset>

const unavailable = (what: string) => (error: unknown) =>
  Effect.logError(`${what} failed`, error).pipe(Effect.andThen(Effect.fail(ServiceUnavailable.of())))

/** An account read by its own principal, or its owner's (an agent's owner exists while the agent does). */
const accountOf = ({ accounts }: BalancesContext, accountId: string) =>
  accounts.get(accountId).pipe(
    Unavailable.database("Balances.account"),
    answerServiceUnavailable,
    Effect.flatMap(Invariant.some("an authenticated principal's account, and an agent's owner, exist"))
  )

/** The account, its KYC (D11: an agent's is its owner's), and its mode's chain. */
const holderOf = (context: BalancesContext, principal: Principal) =>
  Effect.gen(function*() {
    const account = yield* accountOf(context, principal.accountId)
    const keyHolder: Account = account.ownerAccountId === null ? account : yield* accountOf(context, account.ownerAccountId)
    if (!isKycSufficient(keyHolder.kycStatus)) return yield* Effect.fail(KycRequired.of())
    const chain = yield* Option.match(context.settlement.chain(principal.mode), {
      onNone: () => Effect.fail(LivemodeUnavailable.of()),
      onSome: Effect.succeed
    })
    return { account, keyHolder, chain, wallet: getAddress(account.walletAddress) }
  })

const registeredKey = ({ keys }: BalancesContext, keyHolder: Account, principal: Principal) =>
  keys.keyOfAccount(keyHolder.accountId, principal.mode).pipe(
    Unavailable.database("Balances.registeredKey"),
    answerServiceUnavailable,
    Effect.flatMap(Option.match({ onNone: () => Effect.fail(EncryptionKeyRequired.of()), onSome: Effect.succeed }))
  )

/** Whether a read failed because the contract had no code at that block (viem's zero data). */
const contractAbsent = (error: unknown): boolean =>
  error instanceof BaseError && error.walk((cause) => cause instanceof ContractFunctionZeroDataError) !== null

/**
 * One asset's ciphertext, at `blockNumber` or else the latest block; None when the contract had
 * no code there (a block before its deployment, D63's walk). Other failures are the node's.
 */
const ciphertextAt = (chain: ChainContext, wallet: `0x${string}`, asset: Asset, blockNumber?: bigint) =>
  Effect.tryPromise({
    try: () =>
      chain.client.readContract({
        address: confidentialTokenOf(chain, asset),
        abi: ConfidentialTokenArtifact.abi,
        functionName: "encryptedBalanceOf",
        args: [wallet],
        ...(blockNumber === undefined ? {} : { blockNumber })
      }),
    catch: (error) => error
  }).pipe(
    Effect.map((balance) => {
      const commitment = fromEvmPoint(balance.commitment)
      const ownerHandle = fromEvmPoint(balance.ownerHandle)
      return Option.some<OnChainBalance>({
        asset,
        contract: confidentialTokenOf(chain, asset),
        commitment,
        ownerHandle,
        ciphertextVersion: ciphertextVersionOf(commitment, ownerHandle)
      })
    }),
    Effect.catch((error) => contractAbsent(error) ? Effect.succeed(Option.none<OnChainBalance>()) : Effect.fail(error))
  )

/** Every asset's ciphertext at `blockNumber` (else the latest); a deployed contract has code there. */
const allAt = (chain: ChainContext, wallet: `0x${string}`, blockNumber?: bigint) =>
  Effect.forEach(assetNames, (asset) =>
    ciphertextAt(chain, wallet, asset, blockNumber).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new Error(`no ${asset} contract code at the block read`)),
        onSome: Effect.succeed
      }))
    ), { concurrency: "unbounded" })

const onChain = (chain: ChainContext, wallet: `0x${string}`) =>
  allAt(chain, wallet).pipe(Effect.catch(unavailable("reading balances on chain")))

/**
 * D63: per asset of the bundle, the ciphertext its proof names, read at the latest block or
 * found among the recent ones (RecentCiphertexts.ts); an asset with none found keeps the latest,
 * which then fails the proof as stale. All reads are at one block number, so the assets' answers
 * are of the same state.
 */
const ciphertextsFor = (
  chain: ChainContext,
  wallet: `0x${string}`,
  bundle: DecryptionProof.Bundle,
  nowSeconds: bigint
) =>
  Effect.gen(function*() {
    // cacheTime 0: viem otherwise answers a block number up to its polling interval old.
    const latestBlock = yield* Effect.tryPromise(() => chain.client.getBlockNumber({ cacheTime: 0 }))
    const latest = yield* allAt(chain, wallet, latestBlock)
    const found = new Map<string, AtBlock<OnChainBalance>>()
    for (const balance of latest) found.set(balance.asset, { ciphertext: balance, blockNumber: latestBlock })
    const wanted = bundle.entries.flatMap((entry) => {
      const atLatest = found.get(entry.asset)
      return atLatest === undefined ? [] : [{ version: entry.ciphertextVersion, atLatest }]
    })
    // A bundle naming an asset there is none of fails as such: no walk for it or the others.
    if (wanted.length !== bundle.entries.length) return found
    const located = yield* Effect.forEach(wanted, ({ atLatest, version }) =>
      locate({
        ciphertextAt: (blockNumber) => ciphertextAt(chain, wallet, atLatest.ciphertext.asset, blockNumber),
        timestampOf: (blockNumber) =>
          Effect.tryPromise(() => chain.client.getBlock({ blockNumber })).pipe(Effect.map((block) => block.timestamp))
      }, { version, latest: atLatest, currentSinceSeconds: nowSeconds - proofLifetimeMaxSeconds }), { concurrency: "unbounded" })
    for (const recent of located) {
      if (Option.isNone(recent)) continue
      found.set(recent.value.ciphertext.asset, recent.value)
      // How often proofs are overtaken, and by how much: a block count, never an amount.
      if (recent.value.blockNumber !== latestBlock) {
        yield* Effect.logDebug("decryption proof checked against a recent block").pipe(
          Effect.annotateLogs({ asset: recent.value.ciphertext.asset, blocksBehind: Number(latestBlock - recent.value.blockNumber) })
        )
      }
    }
    return found
  }).pipe(Effect.catch(unavailable("reading balances on chain")))

const nonZero = (context: BalancesContext, principal: Principal) =>
  Effect.gen(function*() {
    const { chain, wallet } = yield* holderOf(context, principal)
    const result = yield* context.guardian.nonZero({
      account: wallet,
      assets: assetNames.map((asset) => ({ chainId: BigInt(chain.chainId), contract: confidentialTokenOf(chain, asset) }))
    }).pipe(Effect.catch(unavailable("guardian nonZero")))
    return assetNames.map((asset, i) => ({ asset, non_zero: result[i]?.nonZero ?? false }))
  })

/**
 * D20, D63: the amounts a proof shows, each as of the block whose ciphertext it was checked
 * against. The cheap checks (encoding, expiry) come first, so a refused proof costs no chain read;
 * the proof is always checked against the key registered now (a key replaced inside the window,
 * D55, does not verify an old proof).
 */
const proven = (context: BalancesContext, principal: Principal, proof: string) =>
  Effect.gen(function*() {
    const { chain, keyHolder, wallet } = yield* holderOf(context, principal)
    const publicKey = yield* registeredKey(context, keyHolder, principal)
    const nowSeconds = BigInt(Math.floor((yield* Clock.currentTimeMillis) / 1000))
    const bundle = DecryptionProof.decode(proof)
    if (!bundle.ok) return yield* Effect.fail(DecryptionProofInvalid.of(bundle.reason))
    const expiry = DecryptionProof.checkExpiry(bundle.value, nowSeconds, proofLifetimeMaxSeconds)
    if (!expiry.ok) return yield* Effect.fail(DecryptionProofInvalid.of(expiry.reason))
    const ciphertexts = yield* ciphertextsFor(chain, wallet, bundle.value, nowSeconds)
    const verified = DecryptionProof.verify(proof, {
      chainId: BigInt(chain.chainId),
      account: wallet,
      publicKey,
      nowSeconds,
      lifetimeMaxSeconds: proofLifetimeMaxSeconds,
      balanceOf: (asset) => {
        const found = ciphertexts.get(asset)?.ciphertext
        return found === undefined ? undefined : {
          contract: found.contract,
          commitment: found.commitment as Point.Point,
          handle: found.ownerHandle as Point.Point,
          ciphertextVersion: found.ciphertextVersion
        }
      }
    })
    if (!verified.ok) return yield* Effect.fail(DecryptionProofInvalid.of(verified.reason))
    return yield* Effect.forEach(verified.value, ({ amount, asset }) =>
      Invariant.some("a verified entry's asset had its ciphertext read")(Option.fromNullishOr(ciphertexts.get(asset))).pipe(
        Effect.map((located) => ({
          asset,
          amount: formatAmount(amount, asset as Asset),
          as_of_block: Number(located.blockNumber)
        }))
      ))
  })

const sealed = (context: BalancesContext, principal: Principal) =>
  Effect.gen(function*() {
    const { chain, keyHolder, wallet } = yield* holderOf(context, principal)
    const publicKey = yield* registeredKey(context, keyHolder, principal)
    const balances = yield* onChain(chain, wallet)
    return yield* Effect.forEach(balances, (balance) =>
      context.guardian.sealedBalance({
        chainId: BigInt(chain.chainId),
        contract: balance.contract,
        account: wallet,
        publicKey: bytesToHex(publicKey)
      }).pipe(
        Effect.catch(unavailable("guardian sealedBalance")),
        Effect.map((statement) => ({
          asset: balance.asset,
          chain_id: chain.chainId,
          contract: balance.contract,
          account: wallet,
          sealed_statement: statement.sealedStatement,
          statement_version: statement.version.toString(),
          commitment: bytesToHex(balance.commitment),
          handle: bytesToHex(balance.ownerHandle),
          ciphertext_version: balance.ciphertextVersion.toString()
        }))
      ))
  })

const keyTotals = (context: BalancesContext, principal: Principal) =>
  Effect.gen(function*() {
    const { chain, keyHolder, wallet } = yield* holderOf(context, principal)
    const publicKey = yield* registeredKey(context, keyHolder, principal)
    const perAsset = yield* Effect.forEach(assetNames, (asset) => {
      const contract = confidentialTokenOf(chain, asset)
      return context.guardian.sealedKeyTotals({
        chainId: BigInt(chain.chainId),
        contract,
        account: wallet,
        publicKey: bytesToHex(publicKey)
      }).pipe(
        Effect.catch(unavailable("guardian sealedKeyTotals")),
        Effect.map((totals) =>
          totals.map((total) => ({
            api_key_id: total.apiKeyId,
            asset,
            chain_id: chain.chainId,
            contract,
            account: wallet,
            sealed_total: total.sealedTotal
          }))
        )
      )
    })
    return perAsset.flat()
  })
