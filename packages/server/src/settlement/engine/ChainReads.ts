/**
 * What the engine reads from the chain to decide a submission's fate: the outcome of a call in
 * a mined receipt, whether a transfer's replay nonce is used, and the receipt of the transaction
 * that applied a transfer when it was not ours.
 *
 * Why apart: every step that concludes (the watcher, a broadcast told its nonce is spent, the
 * recovery after a restart) asks the same questions; the contract's replay nonce is what keeps
 * a call from being applied twice, so these reads are the engine's ground truth.
 *
 * @since 0.5.0
 */
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { Effect, Option, Schema } from "effect"
import { getAbiItem, type Hex, hexToBigInt, numberToHex, parseTransaction, slice as sliceHex, toEventSelector, type TransactionReceipt } from "viem"
import { SettlementLimits, type SubmissionRequest } from "../domain.ts"
import { type EngineContext, type ItemOutcome, rpc } from "./EngineContext.ts"

const appliedTopics = [
  toEventSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "ConfidentialTransfer" })),
  toEventSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "PublicTransfer" }))
]
const skippedTopic = toEventSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "ConfidentialTransferSkipped" }))
/** `SkipReason.DeadlineExpired` in ConfidentialToken.sol. */
const skippedDeadlineExpired = 1n

/**
 * The outcome of `request` in a mined receipt. A confidential transfer is `applied` only when
 * its own ConfidentialTransfer event is in the receipt: a batch transaction succeeds whether or
 * not each of its items applied.
 *
 * @since 0.5.0
 * @category combinators
 */
export const outcomeIn = (
  request: SubmissionRequest,
  receipt: { readonly success: boolean; readonly logs: ReadonlyArray<{ readonly address: string; readonly topics: ReadonlyArray<Hex | null>; readonly data: Hex }> }
): ItemOutcome => {
  if (!receipt.success) return "reverted"
  if (request.kind !== "confidential_transfer" || request.replayKey === null) return "applied"
  const transferId = request.replayKey.transferId.toLowerCase()
  const target = request.target.toLowerCase()
  for (const log of receipt.logs) {
    if (log.address.toLowerCase() !== target) continue
    const [topic0, , topic2, topic3] = log.topics
    if (topic0 === appliedTopics[0] && topic3?.toLowerCase() === transferId) return "applied"
    // ConfidentialTransferSkipped(from, transferId, nonce, reason): the reason is the second data word.
    if (topic0 === skippedTopic && topic2?.toLowerCase() === transferId) {
      return hexToBigInt(sliceHex(log.data, 32, 64)) === skippedDeadlineExpired ? "expired" : "reverted"
    }
  }
  return "reverted"
}

/**
 * `txpool_inspect`'s queued part (by sender, then by nonce; the lines themselves unused), as geth and anvil answer it.
 *
 * @since 0.5.0
 * @category decoding
 */
export const decodePoolInspection = Schema.decodeUnknownOption(
  Schema.Struct({ queued: Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Unknown)) })
)

/**
 * The nonce a signed transaction carries (undefined for bytes that do not parse: never ours).
 *
 * @since 0.5.0
 * @category combinators
 */
export const nonceOf = (rawTx: Hex): number | undefined => {
  try {
    return parseTransaction(rawTx).nonce
  } catch {
    return undefined
  }
}

/**
 * For a transfer: whether its replay nonce is used (by it, or by another transfer).
 *
 * @since 0.5.0
 * @category reads
 */
export const replayNonceUsed = (context: EngineContext, request: SubmissionRequest) => {
  const replayKey = request.replayKey
  return replayKey === null
    ? Effect.succeed(false)
    : rpc(context, "reading a replay nonce", (client) =>
      client.readContract({
        address: request.target,
        abi: ConfidentialTokenArtifact.abi,
        functionName: "isNonceUsed",
        args: [replayKey.sender, replayKey.nonce]
      }))
}

/**
 * For a transfer: the receipt of the transaction that used its replay nonce, if one did.
 *
 * @since 0.5.0
 * @category reads
 */
export const appliedElsewhere = Effect.fnUntraced(function*(context: EngineContext, request: SubmissionRequest) {
  if (request.replayKey === null) return Option.none<TransactionReceipt>()
  const { transferId } = request.replayKey
  if (!(yield* replayNonceUsed(context, request))) return Option.none<TransactionReceipt>()
  // Both ConfidentialTransfer and PublicTransfer index the transfer id third; only those two
  // mean applied (a batch's ConfidentialTransferSkipped carries the id too, second). Searched
  // from the newest block back, a window at a time (providers refuse a range from block 0 on
  // a long chain, which left such a transfer unresolved for ever). The walk has no earlier
  // stop on purpose: "none" makes the caller sign the call anew or fail it, so it must mean
  // that no block holds the event. It is short in practice (the event is as old as the
  // outage that made us look); only a nonce taken by another transfer, which the server's
  // nonce allocation should never produce, would walk to block 0.
  const window = SettlementLimits.eventSearchWindowBlocks
  // Read after the nonce was seen used, so the block that used it is at or below this one.
  // Not viem's cached block number, which may predate it.
  let to = yield* rpc(context, "reading the block number", (client) => client.getBlockNumber({ cacheTime: 0 }))
  for (;;) {
    const from = to >= window ? to - window + 1n : 0n
    const logs = yield* rpc(context, "finding a transfer's event", (client) =>
      client.request({
        method: "eth_getLogs",
        params: [{
          address: request.target,
          fromBlock: numberToHex(from),
          toBlock: numberToHex(to),
          topics: [appliedTopics, null, null, transferId]
        }]
      }))
    const hash = logs.find((log) => log.transactionHash !== null && log.removed !== true)?.transactionHash
    if (hash !== undefined && hash !== null) {
      const receipt = yield* rpc(context, "reading a receipt", (client) => client.getTransactionReceipt({ hash }))
      return Option.some(receipt)
    }
    if (from === 0n) return Option.none<TransactionReceipt>()
    to = from - 1n
  }
})

/**
 * The chain's time at a block.
 *
 * @since 0.5.0
 * @category reads
 */
export const blockTimestamp = (context: EngineContext, blockNumber: bigint) =>
  rpc(context, "reading a block", (client) => client.getBlock({ blockNumber })).pipe(Effect.map((block) => block.timestamp))
