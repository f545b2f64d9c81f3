/**
 * The guardian's read-only view of the chain: the ConfidentialToken's encrypted
 * balances, its nonce bitmap and its key registry, through viem over JSON-RPC. The
 * guardian never sends a transaction; it reads the chain to check its books
 * (reconciliation), to learn whether an unsettled attestation was mined before it lets
 * a reservation expire, and to confirm an account's registered key.
 *
 * One JSON-RPC endpoint per chain id. A chain the guardian was given no endpoint for
 * is "unknown": reconciliation of it fails with `GuardianError { reason: "chain" }`,
 * and its reservations expire on time alone (see docs/guardian.md).
 *
 * @since 0.1.0
 */
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { Context, Effect, Layer } from "effect"
import { type Address, createPublicClient, getAddress, http, numberToBytes, type PublicClient } from "viem"
import { GuardianError } from "./Domain.ts"

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
 * @since 0.1.0
 * @category models
 */
export interface ChainReaderShape {
  /** Whether the guardian has an endpoint for this chain. */
  readonly knows: (chainId: bigint) => boolean
  readonly head: (chainId: bigint) => Effect.Effect<ChainHead, GuardianError>
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
      const clients = new Map<bigint, PublicClient>(
        endpoints.map((endpoint) => [
          endpoint.chainId,
          createPublicClient({ transport: http(endpoint.rpcUrl, { timeout: readTimeoutMs, retryCount: 1 }) })
        ])
      )
      const clientOf = (chainId: bigint): Effect.Effect<PublicClient, GuardianError> => {
        const client = clients.get(chainId)
        return client === undefined
          ? Effect.fail(new GuardianError({ reason: "chain", message: `no RPC endpoint for chain ${chainId}` }))
          : Effect.succeed(client)
      }
      const abi = ConfidentialTokenArtifact.abi
      return ChainReader.of({
        knows: (chainId) => clients.has(chainId),
        head: (chainId) =>
          Effect.flatMap(clientOf(chainId), (client) =>
            Effect.tryPromise({
              try: () => client.getBlock({ blockTag: "latest" }),
              catch: chainFailure("reading the latest block")
            })).pipe(Effect.map((block) => ({ blockNumber: block.number, timestampSeconds: block.timestamp }))),
        encryptedBalance: (chainId, contract, account, blockNumber) =>
          Effect.flatMap(clientOf(chainId), (client) =>
            Effect.tryPromise({
              try: () =>
                client.readContract({
                  address: getAddress(contract),
                  abi,
                  functionName: "encryptedBalanceOf",
                  args: [getAddress(account)],
                  blockNumber
                }),
              catch: chainFailure("encryptedBalanceOf")
            })).pipe(Effect.map((balance) => ({
              commitment: pointBytes(balance.commitment),
              ownerHandle: pointBytes(balance.ownerHandle),
              guardianHandle: pointBytes(balance.guardianHandle)
            }))),
        isNonceUsed: (chainId, contract, sender, nonce, blockNumber) =>
          Effect.flatMap(clientOf(chainId), (client) =>
            Effect.tryPromise({
              try: () =>
                client.readContract({
                  address: getAddress(contract),
                  abi,
                  functionName: "isNonceUsed",
                  args: [getAddress(sender), nonce],
                  blockNumber
                }),
              catch: chainFailure("isNonceUsed")
            })),
        encryptionKeyOf: (chainId, contract, account) =>
          Effect.flatMap(clientOf(chainId), (client) =>
            Effect.tryPromise({
              try: () =>
                client.readContract({
                  address: getAddress(contract),
                  abi,
                  functionName: "encryptionKeyOf",
                  args: [getAddress(account)]
                }),
              catch: chainFailure("encryptionKeyOf")
            })).pipe(Effect.map((key) => (key.x === 0n && key.y === 0n ? undefined : pointBytes(key))))
      })
    })
}
