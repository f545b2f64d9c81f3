/**
 * Step 2, seal: what the request says about the money, and the boxes it travels in. The plain
 * form's three sealed boxes (amount and memo to sender and recipient, amount and r to the
 * guardian) are sealed here with a fresh opening {amount, r} and the transfer's id
 * (`TransferSealer`); the plaintext amount and memo are not kept beyond this step. The sealed form
 * brings boxes the client sealed to a prepared transfer, whose token is checked here.
 *
 * @since 0.1.0
 */
import { Note } from "@pps/crypto"
import { Clock, Effect, Option } from "effect"
import { type Hex, hexToBytes } from "viem"
import type { Principal } from "@pps/api/ApiKeys"
import { InvalidRequest } from "@pps/api/Errors"
import { type Asset, assets, type CreateTransferRequest, memoBytesMax, parseAmount } from "@pps/api/Transfers"
import { makeId } from "../platform/Ids.ts"
import type { TransfersContext } from "./context.ts"
import { checkToken } from "./preparation.ts"
import { type Parties, preparationFactsOf } from "./resolve.ts"
import { transferIdBytes32 } from "./submission.ts"

/**
 * What a create request says about the money.
 *
 * @since 0.1.0
 * @category models
 */
export type Money = Effect.Success<ReturnType<typeof moneyOf>>

/**
 * The plain form (SPEC: `amount` and `memo`, seen by this process for the length of the
 * request) or the sealed form (ext: boxes the client sealed to a prepared transfer). Both, or
 * neither, is a malformed body.
 *
 * @since 0.1.0
 */
export const moneyOf = Effect.fnUntraced(function*(body: CreateTransferRequest, asset: Asset) {
  if (body.sealed !== undefined) return yield* sealedMoneyOf(body, body.sealed)
  const amount = body.amount === undefined ? undefined : parseAmount(body.amount, asset)
  if (amount === undefined) {
    return yield* Effect.fail(InvalidRequest.of(
      `\`amount\` must be a decimal string above 0 with at most ${assets[asset]} decimals and at most 1,000,000,000,000 units (and below 2^64 base units).`,
      { param: "amount" }
    ))
  }
  const memo = body.memo ?? ""
  if (Buffer.byteLength(memo, "utf8") > memoBytesMax) {
    return yield* Effect.fail(InvalidRequest.of("`memo` is at most 512 bytes of UTF-8.", { param: "memo" }))
  }
  return { _tag: "Plain", amount, memo } as const
})

const sealedMoneyOf = Effect.fnUntraced(function*(
  body: CreateTransferRequest,
  sealed: NonNullable<CreateTransferRequest["sealed"]>
) {
  if (body.amount !== undefined || body.memo !== undefined) {
    return yield* Effect.fail(InvalidRequest.of("Send either `amount` (and `memo`) or `sealed`, not both.", { param: "sealed" }))
  }
  if (body.confidential === false) {
    return yield* Effect.fail(InvalidRequest.of(
      "A standard transfer pays its amount in clear on chain: send it with `amount`, not `sealed`.",
      { param: "confidential" }
    ))
  }
  if (!/^tr_[0-9A-HJKMNP-TV-Z]{26}$/.test(sealed.transfer_id)) {
    return yield* Effect.fail(InvalidRequest.of(
      "`sealed.transfer_id` must be the id of a prepared transfer.",
      { param: "sealed.transfer_id" }
    ))
  }
  const box = (name: "guardian" | "sender" | "recipient", length: number) =>
    new RegExp(`^0x[0-9a-fA-F]{${length * 2}}$`).test(sealed[name])
      ? Effect.succeed(hexToBytes(sealed[name] as Hex))
      : Effect.fail(InvalidRequest.of(
        `\`sealed.${name}\` must be a sealed box of exactly ${length} bytes, as 0x-prefixed hex.`,
        { param: `sealed.${name}` }
      ))
  const boxes: Note.TransferBoxes = {
    guardian: yield* box("guardian", Note.guardianBoxLength),
    sender: yield* box("sender", Note.transferBoxLength),
    recipient: yield* box("recipient", Note.transferBoxLength)
  }
  return { _tag: "Sealed", transferId: sealed.transfer_id, token: sealed.token, boxes } as const
})

/**
 * The sealed form's token against the parties resolved now: refused (400) when expired or when
 * the recipient, asset, keys or transfer id differ from what was prepared.
 *
 * @since 0.1.0
 */
export const checkPreparedToken = Effect.fnUntraced(function*(
  context: TransfersContext,
  principal: Principal,
  asset: Asset,
  parties: Parties,
  money: Money
) {
  if (money._tag !== "Sealed") return
  const problem = checkToken(
    context.preparationSecret,
    money.token,
    yield* preparationFactsOf(principal, asset, parties, money.transferId),
    yield* Clock.currentTimeMillis
  )
  if (problem !== undefined) {
    return yield* Effect.fail(InvalidRequest.of(
      problem === "expired"
        ? "This prepared transfer has expired: prepare it again and seal new boxes."
        : "`sealed.token` does not stand for this transfer: the recipient, asset, keys or transfer id differ from what was prepared.",
      { param: "sealed.token" }
    ))
  }
})

/**
 * The transfer's id and boxes: the client's (prepared), or sealed now for the plain form. Sealed
 * before the sender's turn: sealing needs no state, and off the event loop (TransferSealer) it
 * runs while other requests do. For a standard transfer to an address without a key, the
 * recipient's copy is sealed to the sender (the recipient sees the amount on chain anyway).
 *
 * @since 0.1.0
 */
export const sealBoxes = Effect.fnUntraced(function*(context: TransfersContext, parties: Parties, money: Money) {
  if (money._tag === "Sealed") return { _tag: "Prepared" as const, transferId: money.transferId, boxes: money.boxes }
  const transferId = makeId("tr", yield* Clock.currentTimeMillis)
  const boxes = yield* context.sealer.seal({
    context: {
      chainId: BigInt(parties.chain.chainId),
      contract: parties.contract,
      transferId: hexToBytes(transferIdBytes32(transferId))
    },
    note: { amount: money.amount, memo: money.memo },
    senderKey: parties.senderKey,
    recipientKey: Option.getOrElse(parties.recipient.key, () => parties.senderKey),
    guardianKey: context.guardianIdentity.encryptionKey
  })
  return { _tag: "Fresh" as const, transferId, boxes }
})
