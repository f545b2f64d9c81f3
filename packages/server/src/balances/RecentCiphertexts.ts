/**
 * D63: finding the balance ciphertext a decryption proof was made from, among the account's
 * recent ones.
 *
 * A client builds its proof from the ciphertext it read (`GET /v1/accounts/me/balances/sealed`);
 * a confirmation mined between that read and the server's check replaces the ciphertext, and the
 * proof then names a version the latest block no longer holds. Instead of refusing it, the server
 * looks back from the latest block, one block at a time and only for an asset whose version
 * does not match, for the block whose ciphertext has the version the proof names, and stops at
 * the first it finds. The answer then says which block the amount is as of.
 *
 * Two bounds, whichever ends the walk first:
 * - `lookbackBlocksMax` blocks: it bounds the reads one request can cost (one per block and
 *   asset, and only for a proof naming an old version), and it stays well inside the state a
 *   full node without archive keeps (geth serves the last 128 blocks), so the walk never asks a
 *   node for state it may have pruned.
 * - the proof's lifetime: the ciphertext found must have been current at some moment within
 *   the last `lifetimeMaxSeconds` (D20's longest proof life). A live proof honestly made was made
 *   within that time from a ciphertext current when it was read, so an older one is no client's
 *   recent read. It is checked on the block found (one timestamp read), not on the way: a
 *   version that no block holds still costs the walk its 32 reads per asset (a bound left to
 *   tighten: stop on the replacing block's timestamp while walking).
 *
 * The module reads the chain only through a `ChainView`, so the walk's reads can be counted in a
 * unit test (balances-recent.test.ts) and driven on a real chain (balances-recent.pglite.test.ts).
 *
 * @since 0.9.0
 */
import { Effect, Option } from "effect"

/**
 * How many blocks before the latest a proof's ciphertext is looked for (see the header).
 *
 * @since 0.9.0
 * @category constants
 */
export const lookbackBlocksMax = 32n

/**
 * How many recent blocks' state a node without an archive keeps (geth's default); the look-back
 * stays inside it (pinned by balances-recent.test.ts).
 *
 * @since 0.9.0
 * @category constants
 */
export const prunedNodeStateBlocks = 128n

/**
 * A ciphertext and the block it was read at: the amount a proof of it shows is as of that block.
 *
 * @since 0.9.0
 * @category models
 */
export interface AtBlock<C> {
  readonly ciphertext: C
  readonly blockNumber: bigint
}

/**
 * What the walk reads of the chain, for one account and asset.
 *
 * @since 0.9.0
 * @category models
 */
export interface ChainView<C, E> {
  /** The ciphertext at `blockNumber`, or None when the asset's contract had no code there yet. */
  readonly ciphertextAt: (blockNumber: bigint) => Effect.Effect<Option.Option<C>, E>
  /** The block's timestamp, unix seconds. */
  readonly timestampOf: (blockNumber: bigint) => Effect.Effect<bigint, E>
}

/**
 * What is looked for: the version a proof names, the ciphertext read at the latest block, and
 * the earliest moment the ciphertext found may have stopped being current.
 *
 * @since 0.9.0
 * @category models
 */
export interface Wanted<C> {
  readonly version: bigint
  readonly latest: AtBlock<C>
  readonly currentSinceSeconds: bigint
}

/**
 * The ciphertext whose version the proof names: the latest one without any read, else the
 * newest of the `lookbackBlocksMax` blocks before it that holds it, provided it was still
 * current at `currentSinceSeconds` or later; None when there is none.
 *
 * @since 0.9.0
 * @category finders
 */
export const locate = <C extends { readonly ciphertextVersion: bigint }, E>(
  view: ChainView<C, E>,
  wanted: Wanted<C>
): Effect.Effect<Option.Option<AtBlock<C>>, E> =>
  Effect.gen(function*() {
    if (wanted.latest.ciphertext.ciphertextVersion === wanted.version) return Option.some(wanted.latest)
    const oldest = wanted.latest.blockNumber > lookbackBlocksMax ? wanted.latest.blockNumber - lookbackBlocksMax : 0n
    for (let blockNumber = wanted.latest.blockNumber - 1n; blockNumber >= oldest; blockNumber--) {
      const found = yield* view.ciphertextAt(blockNumber)
      // The contract did not exist yet (deployed, or migrated to, D51, since): nothing older is its.
      if (Option.isNone(found)) return Option.none()
      if (found.value.ciphertextVersion !== wanted.version) continue
      // Every block after this one held another ciphertext: the next block replaced this one.
      const replacedAtSeconds = yield* view.timestampOf(blockNumber + 1n)
      return replacedAtSeconds >= wanted.currentSinceSeconds
        ? Option.some({ ciphertext: found.value, blockNumber })
        : Option.none()
    }
    return Option.none()
  })
