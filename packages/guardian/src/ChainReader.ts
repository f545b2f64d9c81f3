/**
 * The guardian's read-only view of the chain: the ConfidentialToken's encrypted
 * balances, its nonce bitmap, its key registry and its events, through viem over
 * JSON-RPC. The guardian never sends a transaction; it reads the chain to book every
 * credit the contract records (D39: `Shielded`, and the recipient side of
 * `ConfidentialTransfer`), to find the ConfidentialTokens that name it as their guardian
 * (`GuardianRotated` with its signer as `newSigner`), to check its books
 * (reconciliation), to learn whether an unsettled attestation was mined before it lets
 * a reservation expire, and to confirm the keys it encrypts to.
 *
 * One JSON-RPC endpoint per chain id. A chain the guardian was given no endpoint for
 * is "unknown": reconciliation of it fails with `GuardianError { reason: "chain" }`,
 * and its reservations expire on time alone (see docs/guardian.md).
 *
 * @since 0.1.0
 */
import { ConfidentialTokenArtifact, RpcTransport } from "@pps/contracts"
import { Context, Effect, Layer } from "effect"
import {
  type Address,
  createPublicClient,
  getAbiItem,
  getAddress,
  type Hash,
  type Hex,
  numberToBytes,
  type PublicClient
} from "viem"
import { GuardianError } from "./Domain.ts"
import { InvariantViolation } from "./internal/Invariant.ts"

/**
 * An encrypted balance as the contract stores it: three 64-byte EVM encodings.
 *
 * @since 0.1.0
 * @category models
 */
export interface EncryptedBalance {
  readonly commitment: Uint8Array
  readonly ownerHandle: Uint8Array
  readonly guardianHandle: Uint8Array
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ChainHead {
  readonly blockNumber: bigint
  readonly timestampSeconds: bigint
}

/**
 * Where a log sits on its chain: its identity for exactly-once booking is
 * (chain, transaction hash, log index); logs are applied in (block, log index) order.
 *
 * @since 0.2.0
 * @category models
 */
export interface LogPosition {
  readonly blockNumber: bigint
  readonly logIndex: number
  readonly txHash: Hash
}

/**
 * A ConfidentialToken event that credits an account (D39). A shield's amount is public
 * in the event; a confidential transfer's is not (the guardian knows it from its
 * reservation of `transferId`).
 *
 * @since 0.2.0
 * @category models
 */
export type CreditLog =
  & LogPosition
  & (
    | { readonly _tag: "Shielded"; readonly contract: Address; readonly from: Address; readonly to: Address; readonly amount: bigint }
    | {
      readonly _tag: "ConfidentialTransfer"
      readonly contract: Address
      readonly from: Address
      readonly to: Address
      readonly transferId: Hex
      readonly nonce: bigint
    }
  )

/**
 * A `GuardianRotated` log that names the guardian's signer as the new signer: the
 * contract (the log's address) now takes this guardian's attestations.
 *
 * @since 0.2.0
 * @category models
 */
export interface Appointment extends LogPosition {
  readonly contract: Address
}

/**
 * A `GuardianRotationProposed` log whose `currentSigner` is the guardian's signer: the
 * contract's owner proposes to replace this guardian by `newSigner`.
 *
 * @since 0.3.0
 * @category models
 */
export interface RotationProposal extends LogPosition {
  readonly contract: Address
  readonly proposalId: bigint
  readonly newSigner: Address
  /** Unix seconds from which anyone may execute it. */
  readonly executableAt: bigint
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ChainReaderShape {
  /** The chains the guardian has an endpoint for. */
  readonly chainIds: ReadonlyArray<bigint>
  /** Whether the guardian has an endpoint for this chain. */
  readonly knows: (chainId: bigint) => boolean
  readonly head: (chainId: bigint) => Effect.Effect<ChainHead, GuardianError>
  /** The block `depth` blocks below the latest (the latest itself at depth 0; block 0 at most). */
  readonly headAtDepth: (chainId: bigint, depth: number) => Effect.Effect<ChainHead, GuardianError>
  readonly encryptedBalance: (
    chainId: bigint,
    contract: Address,
    account: Address,
    blockNumber: bigint
  ) => Effect.Effect<EncryptedBalance, GuardianError>
  readonly isNonceUsed: (
    chainId: bigint,
    contract: Address,
    sender: Address,
    nonce: bigint,
    blockNumber: bigint
  ) => Effect.Effect<boolean, GuardianError>
  /** The registered key, or undefined when the account has none. */
  readonly encryptionKeyOf: (
    chainId: bigint,
    contract: Address,
    account: Address
  ) => Effect.Effect<Uint8Array | undefined, GuardianError>
  /** `GuardianRotated` logs naming `signer` as the new signer, any contract, in [fromBlock, toBlock]. */
  readonly appointments: (
    chainId: bigint,
    signer: Address,
    fromBlock: bigint,
    toBlock: bigint
  ) => Effect.Effect<ReadonlyArray<Appointment>, GuardianError>
  /** The contract's `GuardianRotationProposed` logs replacing `signer`, in [fromBlock, toBlock], in chain order. */
  readonly rotationProposals: (
    chainId: bigint,
    contract: Address,
    signer: Address,
    fromBlock: bigint,
    toBlock: bigint
  ) => Effect.Effect<ReadonlyArray<RotationProposal>, GuardianError>
  /**
   * The contract's credit events in [fromBlock, toBlock], in chain order; with `to`, only
   * those crediting that account.
   */
  readonly creditLogs: (
    chainId: bigint,
    contract: Address,
    fromBlock: bigint,
    toBlock: bigint,
    to?: Address
  ) => Effect.Effect<ReadonlyArray<CreditLog>, GuardianError>
  /** The block a transaction was mined in, or undefined when it is not (yet) mined. */
  readonly blockOfTransaction: (chainId: bigint, txHash: Hash) => Effect.Effect<bigint | undefined, GuardianError>
}

const shieldedEvent = getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "Shielded" })
const confidentialTransferEvent = getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "ConfidentialTransfer" })
const guardianRotatedEvent = getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "GuardianRotated" })
const rotationProposedEvent = getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "GuardianRotationProposed" })

const byChainOrder = (a: LogPosition, b: LogPosition) =>
  a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1

/** A log the node returned without its position is a pending log: never asked for, a defect. */
const positionOf = (log: {
  readonly blockNumber: bigint | null
  readonly logIndex: number | null
  readonly transactionHash: Hash | null
}): LogPosition => {
  if (log.blockNumber === null || log.logIndex === null || log.transactionHash === null) {
    throw new InvariantViolation({ invariant: "a log read by block range is mined: it has its block, index and transaction" })
  }
  return { blockNumber: log.blockNumber, logIndex: log.logIndex, txHash: log.transactionHash }
}

/**
 * One JSON-RPC endpoint per chain.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChainEndpoint {
  readonly chainId: bigint
  readonly rpcUrl: string
}

/** A read that takes longer than this is a failed read; the caller retries later. */
const readTimeoutMs = 10_000

const pointBytes = (point: { readonly x: bigint; readonly y: bigint }): Uint8Array => {
  const out = new Uint8Array(64)
  out.set(numberToBytes(point.x, { size: 32 }), 0)
  out.set(numberToBytes(point.y, { size: 32 }), 32)
  return out
}

const chainFailure = (what: string) => (cause: unknown) =>
  new GuardianError({
    reason: "chain",
    message: `${what} failed: ${cause instanceof Error ? cause.message.split("\n")[0] : String(cause)}`
  })

const abi = ConfidentialTokenArtifact.abi

/** The reader's context: one viem client per chain the guardian has an endpoint for, built once by the layer. */
interface ChainReaderContext {
  readonly clients: ReadonlyMap<bigint, PublicClient>
}

const clientOf = ({ clients }: ChainReaderContext, chainId: bigint): Effect.Effect<PublicClient, GuardianError> => {
  const client = clients.get(chainId)
  return client === undefined
    ? Effect.fail(new GuardianError({ reason: "chain", message: `no RPC endpoint for chain ${chainId}` }))
    : Effect.succeed(client)
}

/** Runs `read` on the chain's client; a rejection is a `GuardianError { reason: "chain" }` naming `what`. */
const readChain = <A>(context: ChainReaderContext, chainId: bigint, what: string, read: (client: PublicClient) => Promise<A>) =>
  Effect.flatMap(clientOf(context, chainId), (client) => Effect.tryPromise({ try: () => read(client), catch: chainFailure(what) }))

const headAt = (context: ChainReaderContext, chainId: bigint, depth: number): Effect.Effect<ChainHead, GuardianError> =>
  readChain(context, chainId, "reading the latest block", async (client) => {
    const latest = await client.getBlock({ blockTag: "latest" })
    if (depth <= 0) return latest
    const deep = latest.number - BigInt(depth)
    return client.getBlock({ blockNumber: deep > 0n ? deep : 0n })
  }).pipe(Effect.map((block) => ({ blockNumber: block.number, timestampSeconds: block.timestamp })))

const encryptedBalance = (context: ChainReaderContext, chainId: bigint, contract: Address, account: Address, blockNumber: bigint) =>
  readChain(context, chainId, "encryptedBalanceOf", (client) =>
    client.readContract({
      address: getAddress(contract),
      abi,
      functionName: "encryptedBalanceOf",
      args: [getAddress(account)],
      blockNumber
    })).pipe(Effect.map((balance): EncryptedBalance => ({
      commitment: pointBytes(balance.commitment),
      ownerHandle: pointBytes(balance.ownerHandle),
      guardianHandle: pointBytes(balance.guardianHandle)
    })))

const isNonceUsed = (context: ChainReaderContext, chainId: bigint, contract: Address, sender: Address, nonce: bigint, blockNumber: bigint) =>
  readChain(context, chainId, "isNonceUsed", (client) =>
    client.readContract({
      address: getAddress(contract),
      abi,
      functionName: "isNonceUsed",
      args: [getAddress(sender), nonce],
      blockNumber
    }))

const encryptionKeyOf = (context: ChainReaderContext, chainId: bigint, contract: Address, account: Address) =>
  readChain(context, chainId, "encryptionKeyOf", (client) =>
    client.readContract({
      address: getAddress(contract),
      abi,
      functionName: "encryptionKeyOf",
      args: [getAddress(account)]
    })).pipe(Effect.map((key) => (key.x === 0n && key.y === 0n ? undefined : pointBytes(key))))

const appointments = (context: ChainReaderContext, chainId: bigint, signer: Address, fromBlock: bigint, toBlock: bigint) =>
  readChain(context, chainId, "reading GuardianRotated logs", (client) =>
    client.getLogs({ event: guardianRotatedEvent, args: { newSigner: getAddress(signer) }, fromBlock, toBlock, strict: true })).pipe(
      Effect.map((logs) => logs.map((log): Appointment => ({ ...positionOf(log), contract: getAddress(log.address) })).sort(byChainOrder))
    )

const rotationProposals = (
  context: ChainReaderContext,
  chainId: bigint,
  contract: Address,
  signer: Address,
  fromBlock: bigint,
  toBlock: bigint
) =>
  readChain(context, chainId, "reading GuardianRotationProposed logs", (client) =>
    client.getLogs({
      address: getAddress(contract),
      event: rotationProposedEvent,
      args: { currentSigner: getAddress(signer) },
      fromBlock,
      toBlock,
      strict: true
    })).pipe(Effect.map((logs) =>
      logs.map((log): RotationProposal => ({
        ...positionOf(log),
        contract: getAddress(log.address),
        proposalId: log.args.proposalId,
        newSigner: getAddress(log.args.newSigner),
        executableAt: BigInt(log.args.executableAt)
      })).sort(byChainOrder)
    ))

/** The `Shielded` and `ConfidentialTransfer` logs, both read at once; with `to`, only those crediting it. */
const creditLogs = (context: ChainReaderContext, chainId: bigint, contract: Address, fromBlock: bigint, toBlock: bigint, to?: Address) =>
  readChain(context, chainId, "reading credit logs", (client) => {
    const filter = { address: getAddress(contract), ...(to === undefined ? {} : { args: { to: getAddress(to) } }), fromBlock, toBlock, strict: true } as const
    return Promise.all([
      client.getLogs({ ...filter, event: shieldedEvent }),
      client.getLogs({ ...filter, event: confidentialTransferEvent })
    ])
  }).pipe(Effect.map(([shields, transfers]): ReadonlyArray<CreditLog> =>
    [
      ...shields.map((log): CreditLog => ({
        ...positionOf(log),
        _tag: "Shielded",
        contract: getAddress(log.address),
        from: getAddress(log.args.from),
        to: getAddress(log.args.to),
        amount: log.args.amount
      })),
      ...transfers.map((log): CreditLog => ({
        ...positionOf(log),
        _tag: "ConfidentialTransfer",
        contract: getAddress(log.address),
        from: getAddress(log.args.from),
        to: getAddress(log.args.to),
        transferId: log.args.transferId,
        nonce: log.args.nonce
      }))
    ].sort(byChainOrder)
  ))

/** A receipt the node does not have is a transaction not (yet) mined: undefined, not a failure. */
const blockOfTransaction = (context: ChainReaderContext, chainId: bigint, txHash: Hash) =>
  Effect.flatMap(clientOf(context, chainId), (client) =>
    Effect.tryPromise({
      try: () => client.getTransactionReceipt({ hash: txHash }).then((receipt) => receipt.blockNumber),
      catch: (cause) => cause
    })).pipe(
      Effect.catch((cause) =>
        cause instanceof Error && cause.name === "TransactionReceiptNotFoundError"
          ? Effect.succeed(undefined)
          : Effect.fail(chainFailure("reading a transaction receipt")(cause))
      )
    )

/**
 * @since 0.1.0
 * @category services
 */
export class ChainReader extends Context.Service<ChainReader, ChainReaderShape>()("guardian/ChainReader") {
  /**
   * A reader over the given endpoints (none: every chain is unknown).
   *
   * @since 0.1.0
   */
  static readonly layer = (endpoints: ReadonlyArray<ChainEndpoint>) =>
    Layer.sync(ChainReader, () => {
      const context: ChainReaderContext = {
        clients: new Map<bigint, PublicClient>(
          endpoints.map((endpoint) => [
            endpoint.chainId,
            createPublicClient({ transport: RpcTransport.keepAliveHttp(endpoint.rpcUrl, { timeoutMs: readTimeoutMs, retryCount: 1 }) })
          ])
        )
      }
      return ChainReader.of({
        chainIds: [...context.clients.keys()],
        knows: (chainId) => context.clients.has(chainId),
        head: (chainId) => headAt(context, chainId, 0),
        headAtDepth: (chainId, depth) => headAt(context, chainId, depth),
        encryptedBalance: (chainId, contract, account, blockNumber) => encryptedBalance(context, chainId, contract, account, blockNumber),
        isNonceUsed: (chainId, contract, sender, nonce, blockNumber) => isNonceUsed(context, chainId, contract, sender, nonce, blockNumber),
        encryptionKeyOf: (chainId, contract, account) => encryptionKeyOf(context, chainId, contract, account),
        appointments: (chainId, signer, fromBlock, toBlock) => appointments(context, chainId, signer, fromBlock, toBlock),
        rotationProposals: (chainId, contract, signer, fromBlock, toBlock) =>
          rotationProposals(context, chainId, contract, signer, fromBlock, toBlock),
        creditLogs: (chainId, contract, fromBlock, toBlock, to) => creditLogs(context, chainId, contract, fromBlock, toBlock, to),
        blockOfTransaction: (chainId, txHash) => blockOfTransaction(context, chainId, txHash)
      })
    })
}
