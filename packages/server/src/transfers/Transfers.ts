/**
 * Transfers: the product's core path (ARCHITECTURE.md, "A confidential transfer,
 * end to end").
 *
 * 1. Rules that need no amount: asset, memo size, recipient (404 / 422 / self),
 *    KYC (D11), the mode's chain (D9), the sender's own key.
 * 2. In the sender's actor (one at a time per account): a fresh replay nonce,
 *    the opening {amount, r}, the three sealed boxes (amount and memo to sender
 *    and recipient, amount and r to the guardian). The plaintext amount and
 *    memo are not kept beyond this step.
 * 3. Guardian `authorize`: it opens its box, computes the ciphertext, checks the
 *    balance, reserves, and signs the attestation — or answers insufficient
 *    balance (402).
 * 4. One SQL transaction: the transfer row (pending) and its
 *    `transfer.initiated` events.
 * 5. Settlement submits the attested call and waits up to
 *    `TRANSFER_CREATE_TIMEOUT_MS` (D14): `confirmed`, or `pending` and the rest
 *    happens in the background.
 * 6. The outcome: one SQL transaction for the status and its events, then the
 *    guardian's `settle` (commit or release the reservation). A restart picks
 *    up every transfer still pending or not yet settled with the guardian.
 *
 * No SQL transaction spans a guardian or chain call.
 *
 * @since 0.1.0
 */
import { GuardianClient } from "@pps/guardian"
import { ElGamal, EncryptionKey, Note } from "@pps/crypto"
import { Clock, Context, DateTime, Duration, Effect, Layer, Option, Schedule, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { type Address, getAddress, type Hex } from "viem"
import { Accounts } from "../accounts/Accounts.ts"
import { type Account, displayHandle, isKycSufficient } from "../accounts/domain.ts"
import { EncryptionKeys } from "../accounts/EncryptionKeys.ts"
import type { Principal } from "../apikeys/domain.ts"
import type { Mode } from "../apikeys/domain.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { transferEvents, type TransferParty } from "../events/domain.ts"
import { Outbox } from "../events/Outbox.ts"
import {
  EncryptionKeyRequired,
  InsufficientBalance,
  InvalidRequest,
  KycRequired,
  LivemodeUnavailable,
  RecipientNotConfidentialReady,
  RecipientNotFound,
  ServiceUnavailable,
  TransferNotFound
} from "../http/errors.ts"
import { makeId } from "../platform/Ids.ts"
import { KeyedSerializer } from "../platform/KeyedSerializer.ts"
import { confidentialTransferCall, publicTransferCall } from "../settlement/calls.ts"
import { type ChainContext, confidentialTokenOf } from "../settlement/Chains.ts"
import { gasLimits, type Resolution } from "../settlement/domain.ts"
import { GuardianIdentity } from "../settlement/GuardianIdentity.ts"
import { Settlement } from "../settlement/Settlement.ts"
import {
  type Asset,
  assets,
  type CreateTransferRequest,
  memoBytesMax,
  parseAmount,
  parseRecipient,
  type TransferRecord
} from "./domain.ts"
import { type StoredTransfer, TransferStore } from "./TransferStore.ts"

const hex = (bytes: Uint8Array): Hex => `0x${Buffer.from(bytes).toString("hex")}`
const bytes = (value: string): Uint8Array => new Uint8Array(Buffer.from(value.replace(/^0x/, ""), "hex"))

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

/**
 * The 32 bytes a transfer id stands for on chain and in the sealed boxes: its
 * ULID's 128 bits, left-padded.
 *
 * @since 0.1.0
 * @category constructors
 */
export const transferIdBytes32 = (transferId: string): Hex => {
  let value = 0n
  for (const char of transferId.slice(transferId.indexOf("_") + 1)) value = value * 32n + BigInt(crockford.indexOf(char))
  return `0x${value.toString(16).padStart(64, "0")}`
}

/** How often transfers whose outcome or guardian settlement is missing are looked at again. */
const recoveryEveryMs = 5_000

/**
 * The recipient as resolved: one of our accounts, or an outside address.
 */
interface Recipient {
  readonly account: Account | null
  readonly address: Address
  readonly display: string
  /** The key its balance is encrypted to (for an agent, its owner's), when registered. */
  readonly key: Option.Option<Uint8Array>
}

/**
 * @since 0.1.0
 * @category services
 */
export class Transfers extends Context.Service<Transfers, {
  readonly create: (
    principal: Principal,
    request: CreateTransferRequest
  ) => Effect.Effect<
    TransferRecord,
    | InvalidRequest
    | KycRequired
    | LivemodeUnavailable
    | RecipientNotFound
    | RecipientNotConfidentialReady
    | EncryptionKeyRequired
    | InsufficientBalance
    | ServiceUnavailable
  >
  readonly get: (principal: Principal, transferId: string) => Effect.Effect<TransferRecord, TransferNotFound>
  readonly record: (stored: StoredTransfer, viewerAccountId: string) => TransferRecord
}>()("server/transfers/Transfers") {
  static readonly layer = Layer.effect(
    Transfers,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const sql = yield* SqlClient.SqlClient
      const store = yield* TransferStore
      const accounts = yield* Accounts
      const keys = yield* EncryptionKeys
      const settlement = yield* Settlement
      const guardian = yield* GuardianClient.GuardianClient
      const guardianIdentity = yield* GuardianIdentity
      const outbox = yield* Outbox
      const actors = yield* KeyedSerializer

      const guardianKey = EncryptionKey.parsePublicKey(guardianIdentity.encryptionKey)
      if (!guardianKey.ok) return yield* Effect.die(new Error("the guardian's encryption key is not a valid point"))

      const party = (account: Account): TransferParty => ({
        accountId: account.accountId,
        handle: account.handle,
        ownerAccountId: account.ownerAccountId
      })

      /** The account whose KYC and key stand for this one (D11: agents inherit their owner's). */
      const principalOf = (account: Account) =>
        account.ownerAccountId === null
          ? Effect.succeed(account)
          : accounts.get(account.ownerAccountId).pipe(Effect.map(Option.getOrThrow))

      const record = (t: StoredTransfer, viewerAccountId: string): TransferRecord => ({
        transfer_id: t.transfer_id,
        status: t.status,
        from: displayHandle(t.sender_handle),
        to: t.recipient_display,
        confidential: t.confidential,
        asset: t.asset,
        direction: t.sender_account_id === viewerAccountId ? "sent" : "received",
        tx_hash: t.tx_hash,
        created_at: t.created_at,
        confirmed_at: t.confirmed_at
      })

      const resolveRecipient = (chain: ChainContext, sender: Account, to: string) =>
        Effect.gen(function*() {
          const ref = parseRecipient(to)
          if (ref === undefined) {
            return yield* Effect.fail(InvalidRequest.of("`to` must be an @handle or a 0x address.", { param: "to" }))
          }
          const account = ref._tag === "Handle"
            ? yield* accounts.findByHandle(ref.handle).pipe(Effect.orDie)
            : yield* accounts.findByWalletAddress(ref.address).pipe(Effect.orDie)
          if (ref._tag === "Handle" && Option.isNone(account)) return yield* Effect.fail(RecipientNotFound.of())
          if (Option.isSome(account)) {
            if (account.value.accountId === sender.accountId) {
              return yield* Effect.fail(InvalidRequest.of("A transfer to yourself is not allowed.", { param: "to" }))
            }
            const keyHolder = yield* principalOf(account.value).pipe(Effect.orDie)
            const key = yield* keys.keyOfAccount(keyHolder.accountId, chain.mode).pipe(Effect.orDie)
            return {
              account: account.value,
              address: getAddress(account.value.walletAddress),
              display: ref._tag === "Handle" ? displayHandle(account.value.handle) : getAddress(ref.address),
              key
            } satisfies Recipient
          }
          const address = getAddress((ref as { readonly address: Address }).address)
          const key = yield* keys.keyOfAddress(chain, address).pipe(Effect.orDie)
          return { account: null, address, display: address, key } satisfies Recipient
        })

      /** Writes the outcome once (status + events), then settles with the guardian. */
      const complete = (resolution: Resolution) =>
        Effect.gen(function*() {
          const stored = yield* store.findById(resolution.submissionId)
          if (Option.isNone(stored)) return
          const t = stored.value
          const status = resolution._tag === "Confirmed" ? "confirmed" as const : "failed" as const
          const confirmedAt = resolution._tag === "Confirmed"
            ? DateTime.formatIso(DateTime.makeUnsafe(Number(resolution.blockTimestampSeconds) * 1000))
            : null
          const txHash = resolution.txHash
          yield* sql.withTransaction(Effect.gen(function*() {
            const changed = yield* store.finish(t.transfer_id, { status, txHash, confirmedAt })
            if (!changed) return
            const sender = Option.getOrThrow(yield* accounts.get(t.sender_account_id))
            const recipient = t.recipient_account_id === null ? Option.none() : yield* accounts.get(t.recipient_account_id)
            yield* outbox.append(transferEvents({
              event: status === "confirmed" ? "transfer.confirmed" : "transfer.failed",
              mode: t.mode,
              transferId: t.transfer_id,
              sender: party(sender),
              recipient: Option.match(recipient, { onNone: () => null, onSome: party }),
              recipientDisplay: t.recipient_display,
              asset: t.asset,
              confidential: t.confidential,
              txHash
            }))
          }))
          yield* settleWithGuardian(t.transfer_id, status)
        })

      const settleWithGuardian = (transferId: string, outcome: "confirmed" | "failed") =>
        guardian.settle({ transferId: transferIdBytes32(transferId), outcome }).pipe(
          Effect.andThen(store.markGuardianSettled(transferId)),
          Effect.catch((error) =>
            // Retried by the recovery round; the reservation also expires on its own.
            Effect.logWarning("guardian settle failed; will retry").pipe(
              Effect.annotateLogs({ transfer_id: transferId, error: String(error) })
            )
          )
        )

      /** Transfers a crash or an outage left unfinished. */
      const recover = (mode: Mode) =>
        Effect.gen(function*() {
          const open = yield* store.unfinished(mode)
          for (const t of open) {
            if (t.status !== "pending") {
              yield* settleWithGuardian(t.transfer_id, t.status)
              continue
            }
            const outcome = yield* settlement.awaitResolution(t.transfer_id, 0)
            if (Option.isSome(outcome)) {
              yield* complete(outcome.value)
              continue
            }
            // Pending without a submission (the process died between commit and submit): submit now.
            const boxes = yield* store.boxes(t.transfer_id)
            if (Option.isNone(boxes)) continue
            yield* settlement.submit({
              submissionId: t.transfer_id,
              mode,
              kind: t.confidential ? "confidential_transfer" : "public_transfer",
              target: confidentialTokenOf(Option.getOrThrow(settlement.chain(mode)), t.asset),
              data: hex(boxes.value.callData),
              gasLimit: t.confidential ? gasLimits.confidential_transfer : gasLimits.public_transfer,
              deadlineSeconds: BigInt(t.deadline_seconds),
              replayKey: {
                sender: getAddress(Option.getOrThrow(yield* accounts.get(t.sender_account_id)).walletAddress),
                nonce: BigInt(t.replay_nonce),
                transferId: transferIdBytes32(t.transfer_id)
              }
            }).pipe(Effect.catch((error) => Effect.logWarning("resubmission failed; will retry", error)))
          }
        })

      // Outcomes as they happen, and a periodic look at anything left unfinished.
      yield* Effect.forkScoped(
        settlement.resolutions.pipe(
          Stream.filter((resolution) => resolution.submissionId.startsWith("tr_")),
          Stream.runForEach((resolution) =>
            complete(resolution).pipe(Effect.catch((error) => Effect.logError("completing a transfer failed", error)))
          )
        )
      )
      const modes = (["test", "live"] as const).filter((mode) => Option.isSome(settlement.chain(mode)))
      yield* Effect.forkScoped(
        Effect.forEach(modes, recover, { discard: true }).pipe(
          Effect.catch((error) => Effect.logError("transfer recovery round failed", error)),
          Effect.repeat(Schedule.spaced(Duration.millis(recoveryEveryMs)))
        )
      )

      const create = Effect.fn("Transfers.create")(function*(principal: Principal, body: CreateTransferRequest) {
        // 1. Amount-free rules.
        const assetName = body.asset ?? "USDG"
        if (!(assetName in assets)) {
          return yield* Effect.fail(InvalidRequest.of("`asset` must be USDG or ETH.", { param: "asset" }))
        }
        const asset = assetName as Asset
        const amount = parseAmount(body.amount, asset)
        if (amount === undefined) {
          return yield* Effect.fail(InvalidRequest.of(
            `\`amount\` must be a decimal string above 0 with at most ${assets[asset]} decimals and at most 1,000,000,000,000 units.`,
            { param: "amount" }
          ))
        }
        const memo = body.memo ?? ""
        if (Buffer.byteLength(memo, "utf8") > memoBytesMax) {
          return yield* Effect.fail(InvalidRequest.of("`memo` is at most 512 bytes of UTF-8.", { param: "memo" }))
        }
        const confidential = body.confidential ?? true
        const sender = Option.getOrThrow(yield* accounts.get(principal.accountId).pipe(Effect.orDie))
        const senderPrincipal = yield* principalOf(sender).pipe(Effect.orDie)
        if (!isKycSufficient(senderPrincipal.kycStatus)) return yield* Effect.fail(KycRequired.of())
        const chain = yield* Option.match(settlement.chain(principal.mode), {
          onNone: () => Effect.fail(LivemodeUnavailable.of()),
          onSome: Effect.succeed
        })
        const recipient = yield* resolveRecipient(chain, sender, body.to)
        if (confidential && Option.isNone(recipient.key)) return yield* Effect.fail(RecipientNotConfidentialReady.of())
        const senderKey = yield* keys.keyOfAccount(senderPrincipal.accountId, principal.mode).pipe(Effect.orDie)
        if (Option.isNone(senderKey)) return yield* Effect.fail(EncryptionKeyRequired.of())
        const contract = confidentialTokenOf(chain, asset)
        const senderAddress = getAddress(sender.walletAddress)

        // 2-4. In the sender's actor: nonce, seal, authorize, record.
        const created = yield* actors.withKey(sender.accountId, Effect.gen(function*() {
          const nowMs = yield* Clock.currentTimeMillis
          const transferId = makeId("tr", nowMs)
          const bindingId = transferIdBytes32(transferId)
          const nonce = yield* store.nextNonce(sender.accountId, principal.mode).pipe(Effect.orDie)
          const deadlineSeconds = BigInt(Math.floor(nowMs / 1000) + config.attestationLifetimeSeconds)
          const senderPublicKey = EncryptionKey.parsePublicKey(senderKey.value)
          // For a standard transfer to an address without a key, the recipient's copy is sealed to
          // the sender (the recipient sees the amount on chain anyway).
          const recipientPublicKey = EncryptionKey.parsePublicKey(Option.getOrElse(recipient.key, () => senderKey.value))
          if (!senderPublicKey.ok || !recipientPublicKey.ok) {
            return yield* Effect.die(new Error("a registered key did not parse"))
          }
          const opening = ElGamal.newOpening(amount)
          const boxes = Note.sealTransfer({
            context: { chainId: BigInt(chain.chainId), contract, transferId: bytes(bindingId) },
            note: { amount, memo },
            opening,
            senderKey: senderPublicKey.value,
            recipientKey: recipientPublicKey.value,
            guardianKey: guardianKey.value
          })
          const sealedDigest = Note.sealedDigest(boxes)
          const authorization = yield* guardian.authorize({
            transferId: bindingId,
            chainId: BigInt(chain.chainId),
            contract,
            kind: confidential ? "confidential" : "public",
            from: senderAddress,
            to: recipient.address,
            fromKey: hex(senderKey.value),
            ...(confidential ? { toKey: hex(Option.getOrThrow(recipient.key)), sealedDigest } : { amount }),
            nonce,
            deadline: deadlineSeconds,
            guardianNote: hex(boxes.guardian)
          }).pipe(Effect.catch((error) =>
            Effect.logError("guardian unavailable", error).pipe(Effect.andThen(Effect.fail(ServiceUnavailable.of())))
          ))
          if (authorization._tag === "InsufficientBalance") return yield* Effect.fail(InsufficientBalance.of())
          if (authorization._tag !== "Authorized") {
            // Agents' policy outcomes arrive with agents; any other refusal is our own fault.
            return yield* Effect.logError("guardian refused a transfer").pipe(
              Effect.annotateLogs({ transfer_id: transferId, outcome: authorization._tag }),
              Effect.andThen(Effect.die(new Error(`guardian refused: ${authorization._tag}`)))
            )
          }
          const ciphertext = authorization.ciphertext
          const callData = confidential
            ? confidentialTransferCall({
              from: senderAddress,
              to: recipient.address,
              transferId: bindingId,
              nonce,
              ciphertext: {
                commitment: bytes(ciphertext.commitment),
                fromHandle: bytes(ciphertext.fromHandle),
                toHandle: bytes(ciphertext.toHandle!),
                guardianHandle: bytes(ciphertext.guardianHandle)
              },
              sealedDigest,
              deadlineSeconds: authorization.deadline
            }, authorization.signature as Hex)
            : publicTransferCall({
              from: senderAddress,
              to: recipient.address,
              transferId: bindingId,
              nonce,
              amount,
              commitment: bytes(ciphertext.commitment),
              fromHandle: bytes(ciphertext.fromHandle),
              guardianHandle: bytes(ciphertext.guardianHandle),
              deadlineSeconds: authorization.deadline
            }, authorization.signature as Hex)
          const createdAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* store.insert({
              transferId,
              mode: principal.mode,
              senderAccountId: sender.accountId,
              recipientAccountId: recipient.account?.accountId ?? null,
              recipientAddress: recipient.address,
              recipientDisplay: recipient.display,
              asset,
              confidential,
              apiKeyId: principal.keyId,
              replayNonce: nonce,
              deadlineSeconds: authorization.deadline,
              senderBox: boxes.sender,
              recipientBox: boxes.recipient,
              sealedDigest,
              ciphertext: JSON.stringify(ciphertext),
              callData: bytes(callData),
              createdAt
            })
            yield* outbox.append(transferEvents({
              event: "transfer.initiated",
              mode: principal.mode,
              transferId,
              sender: party(sender),
              recipient: recipient.account === null ? null : party(recipient.account),
              recipientDisplay: recipient.display,
              asset,
              confidential,
              txHash: null
            }))
          })).pipe(Effect.orDie)
          return { transferId, bindingId, nonce, callData, deadline: authorization.deadline }
        }))

        // 5. Submit and wait (D14); the outcome is also completed in the background.
        yield* settlement.submit({
          submissionId: created.transferId,
          mode: principal.mode,
          kind: confidential ? "confidential_transfer" : "public_transfer",
          target: contract,
          data: created.callData,
          gasLimit: confidential ? gasLimits.confidential_transfer : gasLimits.public_transfer,
          deadlineSeconds: created.deadline,
          replayKey: { sender: senderAddress, nonce: created.nonce, transferId: created.bindingId }
        }).pipe(Effect.catch((error) =>
          // Recorded and attested: the recovery round submits it; the client sees `pending`.
          Effect.logWarning("submission failed; will retry").pipe(
            Effect.annotateLogs({ transfer_id: created.transferId, error: String(error) })
          )
        ))
        const outcome = yield* settlement.awaitResolution(created.transferId, config.transferCreateTimeoutMs).pipe(
          Effect.orDie
        )
        if (Option.isSome(outcome)) yield* complete(outcome.value).pipe(Effect.orDie)
        const stored = yield* store.findById(created.transferId).pipe(Effect.orDie)
        return record(Option.getOrThrow(stored), principal.accountId)
      })

      return Transfers.of({
        create: (principal, request) =>
          create(principal, request).pipe(Effect.annotateLogs({ account_id: principal.accountId })),
        get: (principal, transferId) =>
          store.findForAccount(transferId, principal.accountId, principal.mode).pipe(
            Effect.orDie,
            Effect.flatMap(Option.match({
              onNone: () => Effect.fail(TransferNotFound.of()),
              onSome: (t) => Effect.succeed(record(t, principal.accountId))
            }))
          ),
        record
      })
    })
  ).pipe(Layer.provideMerge(TransferStore.layer))
}

