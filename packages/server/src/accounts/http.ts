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
import { InvalidRequest, LivemodeUnavailable, NotAgentOwner, PayloadTooLarge } from "@pps/api/Errors"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable } from "../platform/Unavailable.ts"
import { Settlement } from "../settlement/Settlement.ts"
import { Accounts } from "./Accounts.ts"
import { toAccountRecord } from "@pps/api/Accounts"
import { EncryptionKeys } from "./EncryptionKeys.ts"
import { KeyRotations } from "./KeyRotations.ts"
import { requireStepUp } from "../dashboard/DashboardAuth.ts"


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
    const text = yield* request.text.pipe(Effect.mapError((error) =>
      error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
        ? PayloadTooLarge.of()
        : InvalidRequest.of("The request body could not be read.")
    ))
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

/** What the handlers share. */
interface HandlersContext {
  readonly accounts: Accounts["Service"]
  readonly keys: EncryptionKeys["Service"]
  readonly rotations: KeyRotations["Service"]
  readonly balances: Balances["Service"]
  readonly apiKeys: ApiKeys["Service"]
  readonly settlement: Settlement["Service"]
}

/** A verified key whose account is gone breaks a foreign key. */
const ownAccount = ({ accounts }: HandlersContext, accountId: string) =>
  accounts.get(accountId).pipe(
    Unavailable.database("Accounts.get"),
    Effect.flatMap(Invariant.some("an authenticated principal's account exists"))
  )

const me = (context: HandlersContext) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    return toAccountRecord(yield* ownAccount(context, principal.accountId))
  }).pipe(answerServiceUnavailable)

const encryptionKey = (context: HandlersContext) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    const chain = yield* Option.match(context.settlement.chain(principal.mode), {
      onNone: () => Effect.fail(LivemodeUnavailable.of()),
      onSome: Effect.succeed
    })
    const account = yield* ownAccount(context, principal.accountId)
    const key = yield* context.keys.keyOfAccount(principal.accountId, principal.mode).pipe(Unavailable.database("EncryptionKeys.keyOfAccount"))
    return {
      account_address: account.walletAddress,
      chain_id: chain.chainId,
      contracts: { USDG: chain.contracts.confidentialUsdg, ETH: chain.contracts.confidentialEth },
      public_key: Option.match(key, { onNone: () => null, onSome: bytesToHex }),
      confidential_ready: Option.isSome(key)
    }
  }).pipe(answerServiceUnavailable)

/** A key and its proofs as bytes (the request schema checked each is 0x-prefixed hex). */
const keyInputOf = (payload: KeyPayload) => ({
  publicKey: hexToBytes(payload.public_key as Hex),
  proofs: { USDG: hexToBytes(payload.proofs.USDG as Hex), ETH: hexToBytes(payload.proofs.ETH as Hex) }
})

type KeyPayload = { readonly public_key: string; readonly proofs: { readonly USDG: string; readonly ETH: string } }

const registerEncryptionKey = (context: HandlersContext, payload: KeyPayload) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    const registered = yield* context.keys.register({ accountId: principal.accountId, mode: principal.mode, ...keyInputOf(payload) })
    return { public_key: bytesToHex(registered), confidential_ready: true as const }
  }).pipe(answerServiceUnavailable)

/** D55: the key replaced, the balance kept; a dashboard session confirms with its passkey first. */
const rotateEncryptionKey = (context: HandlersContext, payload: KeyPayload) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    yield* requireStepUp
    const rotated = yield* context.rotations.rotate(principal, keyInputOf(payload))
    return { public_key: bytesToHex(rotated), confidential_ready: true as const }
  })

const listApiKeys = (context: HandlersContext) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    // An agent's figures are sealed to its owner's key, which its wallet is not registered with.
    if (principal.ownerAccountId !== null) {
      return yield* Effect.fail(NotAgentOwner.of("API keys and their totals are the account holder's to see."))
    }
    // This node's counted usage first, so the figures include the requests it has served.
    yield* context.apiKeys.flushUsage
    const listed = yield* context.apiKeys.list(principal.accountId).pipe(Unavailable.database("ApiKeys.list"))
    const totals = yield* context.balances.keyTotals(principal).pipe(
      // Without a registered key there is nothing to seal totals to: the keys are still listed.
      Effect.catchTag("EncryptionKeyRequired", () => Effect.succeed([]))
    )
    return {
      data: listed.filter((key) => key.mode === principal.mode).map((key) => ({
        ...key,
        totals: totals.filter((total) => total.api_key_id === key.key_id).map(({ api_key_id: _, ...total }) => total)
      }))
    }
  }).pipe(answerServiceUnavailable)

const sealedBalances = (context: HandlersContext) =>
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
    return { balances: yield* context.balances.sealed(principal) }
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const AccountsHttpLive = HttpApiBuilder.group(PublicApi, "accounts", (handlers) =>
  Effect.gen(function*() {
    const context: HandlersContext = {
      accounts: yield* Accounts,
      keys: yield* EncryptionKeys,
      rotations: yield* KeyRotations,
      balances: yield* Balances,
      apiKeys: yield* ApiKeys,
      settlement: yield* Settlement
    }
    return handlers
      .handle("me", () => me(context))
      .handle("encryptionKey", () => encryptionKey(context))
      .handle("registerEncryptionKey", ({ payload }) => registerEncryptionKey(context, payload))
      .handle("rotateEncryptionKey", ({ payload }) => rotateEncryptionKey(context, payload))
      .handle("balances", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const proof = yield* proofOf(query.decryption_proof)
          return Option.isNone(proof)
            ? { balances: yield* context.balances.nonZero(principal) }
            : { balances: yield* context.balances.proven(principal, proof.value) }
        }))
      .handle("apiKeys", () => listApiKeys(context))
      .handle("sealedBalances", () => sealedBalances(context))
  }))
