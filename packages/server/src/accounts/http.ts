/**
 * Handlers of the `accounts` group: the account record, encryption key
 * registration (D12) and balances (D19, D20).
 *
 * @since 0.1.0
 */
import { Effect, Option, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { bytesToHex, type Hex, hexToBytes } from "viem"
import { ApiKeys } from "../apikeys/ApiKeys.ts"
import { Balances } from "../balances/Balances.ts"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { InvalidRequest, LivemodeUnavailable, NotAgentOwner } from "@pps/api/Errors"
import { Settlement } from "../settlement/Settlement.ts"
import { Accounts } from "./Accounts.ts"
import { toAccountRecord } from "@pps/api/Accounts"
import { EncryptionKeys } from "./EncryptionKeys.ts"


const ProofBody = Schema.Struct({ decryption_proof: Schema.optionalKey(Schema.String) })

/**
 * D20: the proof travels in the JSON body (as SPEC.md says), or, for clients
 * that cannot send a body on GET, in the `decryption_proof` query parameter or
 * the `X-Decryption-Proof` header. Sending it in more than one place is refused,
 * so a client never wonders which one counted.
 */
const proofOf = (query: string | undefined) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const header = request.headers["x-decryption-proof"]
    const text = yield* Effect.orDie(request.text)
    const body = text === ""
      ? undefined
      : yield* Effect.try({ try: () => JSON.parse(text) as unknown, catch: () => InvalidRequest.of("The request body is not valid JSON.") }).pipe(
        Effect.flatMap((json) =>
          Schema.decodeUnknownEffect(ProofBody)(json).pipe(
            Effect.mapError(() => InvalidRequest.of("`decryption_proof` must be a string.", { param: "decryption_proof" }))
          )
        ),
        Effect.map((decoded) => decoded.decryption_proof)
      )
    const given = [body, query, header].filter((value): value is string => value !== undefined)
    if (given.length > 1) {
      return yield* Effect.fail(InvalidRequest.of(
        "Send the decryption proof in one place: the body, the query or the X-Decryption-Proof header.",
        { param: "decryption_proof" }
      ))
    }
    return Option.fromNullishOr(given[0])
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const AccountsHttpLive = HttpApiBuilder.group(PublicApi, "accounts", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    const keys = yield* EncryptionKeys
    const balances = yield* Balances
    const apiKeys = yield* ApiKeys
    const settlement = yield* Settlement
    return handlers
      .handle("me", () =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const account = yield* accounts.get(principal.accountId).pipe(Effect.orDie)
          // A verified key whose account is gone breaks a foreign key: a defect.
          return toAccountRecord(Option.getOrThrow(account))
        }))
      .handle("encryptionKey", () =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const chain = yield* Option.match(settlement.chain(principal.mode), {
            onNone: () => Effect.fail(LivemodeUnavailable.of()),
            onSome: Effect.succeed
          })
          const account = Option.getOrThrow(yield* accounts.get(principal.accountId).pipe(Effect.orDie))
          const key = yield* keys.keyOfAccount(principal.accountId, principal.mode).pipe(Effect.orDie)
          return {
            account_address: account.walletAddress,
            chain_id: chain.chainId,
            contracts: { USDG: chain.contracts.confidentialUsdg, ETH: chain.contracts.confidentialEth },
            public_key: Option.match(key, { onNone: () => null, onSome: bytesToHex }),
            confidential_ready: Option.isSome(key)
          }
        }))
      .handle("registerEncryptionKey", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const registered = yield* keys.register({
            accountId: principal.accountId,
            mode: principal.mode,
            // The request schema checked each is 0x-prefixed hex.
            publicKey: hexToBytes(payload.public_key as Hex),
            proofs: { USDG: hexToBytes(payload.proofs.USDG as Hex), ETH: hexToBytes(payload.proofs.ETH as Hex) }
          }).pipe(Effect.catchTag("SqlError", Effect.die))
          return { public_key: bytesToHex(registered), confidential_ready: true as const }
        }))
      .handle("balances", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const proof = yield* proofOf(query.decryption_proof)
          return Option.isNone(proof)
            ? { balances: yield* balances.nonZero(principal) }
            : { balances: yield* balances.proven(principal, proof.value) }
        }))
      .handle("apiKeys", () =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          // An agent's figures are sealed to its owner's key, which its wallet is not registered with.
          if (principal.ownerAccountId !== null) {
            return yield* Effect.fail(NotAgentOwner.of("API keys and their totals are the account holder's to see."))
          }
          // This node's counted usage first, so the figures include the requests it has served.
          yield* apiKeys.flushUsage
          const listed = yield* apiKeys.list(principal.accountId).pipe(Effect.orDie)
          const totals = yield* balances.keyTotals(principal).pipe(
            // Without a registered key there is nothing to seal totals to: the keys are still listed.
            Effect.catchTag("EncryptionKeyRequired", () => Effect.succeed([]))
          )
          return {
            data: listed.filter((key) => key.mode === principal.mode).map((key) => ({
              ...key,
              totals: totals.filter((total) => total.api_key_id === key.key_id).map(({ api_key_id: _, ...total }) => total)
            }))
          }
        }))
      .handle("sealedBalances", () =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          // An agent's balance is encrypted to its owner's key, and the guardian seals
          // only to the key registered on chain for the wallet, which an agent's wallet
          // has none of: a defined refusal, like every owner-only read (D21), rather
          // than the guardian's refusal surfacing as 503.
          if (principal.ownerAccountId !== null) {
            return yield* Effect.fail(NotAgentOwner.of(
              "An agent's balance is sealed to its owner's key; agent keys cannot read the sealed statement. " +
                "Use GET /v1/accounts/me/balances (non-zero flags, or amounts with the owner's decryption proof)."
            ))
          }
          return { balances: yield* balances.sealed(principal) }
        }))
  }))
