/**
 * D62: the public amount of a standard (`confidential: false`) transfer, as the chain shows it.
 *
 * A standard transfer pays its amount in clear (the token's `PublicTransfer` event and the
 * asset's ERC-20 `Transfer` both carry it), so it is no secret; but the service keeps no copy of
 * it (no row holds a plaintext amount). The sealed-copy read (D18) gives it to the transfer's
 * parties by reading it back from the transaction's receipt each time: one RPC call, made only
 * for a confirmed standard transfer. The client checks its sealed copy against it (a standard
 * transfer's recipient has no ciphertext handle to check against).
 *
 * @since 0.11.0
 */
import { Effect, Option } from "effect"
import { type Hex, parseEventLogs } from "viem"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { type Asset, formatAmount } from "@pps/api/Transfers"
import type { ChainContext } from "../settlement/Chains.ts"
import { DependencyUnavailable } from "../platform/Unavailable.ts"
import { transferIdBytes32 } from "./submission.ts"

/**
 * The decimal amount the transfer's `PublicTransfer` event paid (D4's shortest form); None when
 * the receipt holds no such event of this contract for this transfer (a broken invariant the
 * caller names). A failed read is the chain being unavailable (503).
 *
 * @since 0.11.0
 * @category reads
 */
export const publicAmountOnChain = (
  chain: ChainContext,
  transfer: { readonly transferId: string; readonly asset: Asset; readonly contract: string; readonly txHash: string }
): Effect.Effect<Option.Option<string>, DependencyUnavailable> =>
  Effect.tryPromise({
    try: () => chain.client.getTransactionReceipt({ hash: transfer.txHash as Hex }),
    catch: (cause) =>
      new DependencyUnavailable({
        dependency: "chain",
        operation: "Transfers.publicAmount",
        retryable: true,
        detail: cause instanceof Error ? cause.name : "unknown"
      })
  }).pipe(Effect.map((receipt) => {
    const binding = transferIdBytes32(transfer.transferId).toLowerCase()
    const paid = parseEventLogs({ abi: ConfidentialTokenArtifact.abi, logs: receipt.logs, eventName: "PublicTransfer" }).find((log) =>
      log.address.toLowerCase() === transfer.contract.toLowerCase() && log.args.transferId.toLowerCase() === binding
    )
    return Option.map(Option.fromNullishOr(paid), (log) => formatAmount(log.args.amount, transfer.asset))
  }))
