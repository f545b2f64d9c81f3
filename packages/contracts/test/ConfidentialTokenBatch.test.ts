/**
 * confidentialTransferBatch against a real anvil: batches of 1, 8 and 32 apply each item once;
 * an item already applied, expired or wrongly signed is skipped with its reason while the others
 * apply; an item without its sender's own signature (D51) is skipped as well; the same batch
 * sent again applies nothing; and the on-chain balances equal the
 * off-chain sums and decrypt to balances that still add up to everything shielded.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Address, encodeAbiParameters, encodeFunctionData, type Hex, hexToBigInt, keccak256, type LocalAccount, numberToHex, parseEventLogs, type TransactionReceipt } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import * as TestUSDG from "../src/artifacts/TestUSDG.ts"
import * as Faucet from "../src/faucet.ts"
import { type Chain, startChain } from "./helpers/chain.ts"
import { decryptToPoint, fromEvm, G, type KeyPair, makeKeyPair, mul, P, proveKeyPossession, toEvm } from "./helpers/elgamal.ts"
import { type ConfidentialTransferRequest, confidentialRequest, Ledger, signConfidential } from "./helpers/transfers.ts"
import { hintedAccounts, rootHints } from "../src/rootHints.ts"

const abi = ConfidentialToken.abi
const initialBalance = 1_000_000n
const partyCount = 10

let chain: Chain
let token: Address
let relayer: LocalAccount
let faucet: Faucet.Faucet
const ledger = new Ledger()

interface Party {
  readonly account: LocalAccount
  readonly key: KeyPair
  nextNonce: bigint
  /** The plaintext balance this test expects, to check decryption and conservation. */
  balance: bigint
}
const parties: Array<Party> = []

interface Item {
  readonly request: ConfidentialTransferRequest
  readonly signature: Hex
  /** The sender's own signature over the same typed data. */
  readonly accountSignature: Hex
  readonly amount: bigint
}

beforeAll(async () => {
  chain = await startChain()
  token = chain.addresses.confidentialUsdg
  relayer = await chain.newAccount()
  const minter = await chain.newAccount()
  await chain.send(chain.owner, chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "setMinter", args: [minter.address, true] }))
  faucet = Faucet.make({ client: chain.client, minter, usdg: chain.addresses.usdg, confidentialUsdg: token, receiptPollingMs: 20 })
  for (let i = 0; i < partyCount; i++) {
    const account = await chain.newAccount()
    const key = makeKeyPair()
    const proof = proveKeyPossession(key, { chainId: chain.chainId, contract: token, account: account.address })
    await chain.send(account, token, encodeFunctionData({ abi, functionName: "register", args: [key.evm, proof] }))
    await faucet.shieldUsdg(account.address, initialBalance)
    ledger.shield(account.address, initialBalance)
    parties.push({ account, key, nextNonce: 0n, balance: initialBalance })
  }
}, 120_000)

afterAll(async () => {
  await chain?.stop()
})

const domain = () => ({ chainId: chain.chainId, contract: token })

const newItem = async (from: Party, to: Party, amount: bigint, deadline?: bigint): Promise<Item> => {
  const request = confidentialRequest({
    from: from.account.address,
    to: to.account.address,
    amount,
    fromKey: from.key,
    toKey: to.key,
    guardianKey: chain.guardianKey,
    nonce: from.nextNonce++,
    deadline: deadline ?? (await chain.latestTimestamp()) + 3600n
  })
  return {
    request,
    signature: await signConfidential(chain.guardian, domain(), request),
    accountSignature: await signConfidential(from.account, domain(), request),
    amount
  }
}

/** `count` items over the parties, sender i → recipient i+1 (parties repeat past ten). */
const newItems = async (count: number, offset = 0): Promise<Array<Item>> => {
  const items: Array<Item> = []
  for (let i = 0; i < count; i++) {
    items.push(await newItem(parties[(i + offset) % partyCount]!, parties[(i + offset + 1) % partyCount]!, BigInt(100 + i)))
  }
  return items
}

const batchData = (items: ReadonlyArray<Item>, hints: ReadonlyArray<bigint> = []) =>
  encodeFunctionData({
    abi,
    functionName: "confidentialTransferBatch",
    args: [items.map((item) => item.request), items.map((item) => item.signature), items.map((item) => item.accountSignature), hints]
  })

/** Sends `items` as one batch, without root hints unless given. */
const sendBatch = (items: ReadonlyArray<Item>, hints: ReadonlyArray<bigint> = []) => chain.send(relayer, token, batchData(items, hints), 14_000_000n)

/** The root hints a relayer reads for `items` (D70): one `encryptedBalancesOf` of their parties. */
const readHints = async (items: ReadonlyArray<Item>) => {
  const requests = items.map((item) => item.request)
  return rootHints(requests, await chain.client.readContract({ address: token, abi, functionName: "encryptedBalancesOf", args: [hintedAccounts(requests)] }))
}

/** What the contract did to each item, by transfer id. */
const outcomes = (receipt: TransactionReceipt) => {
  const applied = parseEventLogs({ abi, logs: receipt.logs, eventName: "ConfidentialTransfer" }).map((log) => log.args.transferId)
  const skipped = new Map(
    parseEventLogs({ abi, logs: receipt.logs, eventName: "ConfidentialTransferSkipped" }).map((log) => [log.args.transferId, log.args.reason])
  )
  return { applied, skipped }
}

/** Mirrors applied items in the off-chain ledger and the expected plaintext balances. */
const mirror = (items: ReadonlyArray<Item>) => {
  for (const item of items) {
    ledger.confidential(item.request)
    const from = parties.find((party) => party.account.address === item.request.from)!
    const to = parties.find((party) => party.account.address === item.request.to)!
    from.balance -= item.amount
    to.balance += item.amount
  }
}

/** Every party's on-chain triple equals the off-chain sum and decrypts (both keys) to its balance; the balances sum to all shielded. */
const expectBalancesConserved = async () => {
  let total = 0n
  for (const party of parties) {
    const onChain = await chain.client.readContract({ address: token, abi, functionName: "encryptedBalanceOf", args: [party.account.address] })
    expect(onChain).toEqual(ledger.evm(party.account.address))
    const expected = party.balance === 0n ? toEvm(mul(G, 0n)) : toEvm(G.multiply(party.balance))
    expect(toEvm(decryptToPoint(fromEvm(onChain.commitment), fromEvm(onChain.ownerHandle), party.key.secret))).toEqual(expected)
    expect(toEvm(decryptToPoint(fromEvm(onChain.commitment), fromEvm(onChain.guardianHandle), chain.guardianKey.secret))).toEqual(expected)
    total += party.balance
  }
  expect(total).toBe(initialBalance * BigInt(partyCount))
}

const nonceUsed = (item: Item) =>
  chain.client.readContract({ address: token, abi, functionName: "isNonceUsed", args: [item.request.from, item.request.nonce] })

describe("confidentialTransferBatch", () => {
  it.each([1, 8, 32])("applies each item of a batch of %i exactly once, with its own event", async (size) => {
    const items = await newItems(size, size)
    const receipt = await sendBatch(items)
    expect(receipt.status).toBe("success")
    const { applied, skipped } = outcomes(receipt)
    expect(applied).toEqual(items.map((item) => item.request.transferId))
    expect(skipped.size).toBe(0)
    for (const item of items) expect(await nonceUsed(item)).toBe(true)
    mirror(items)
    await expectBalancesConserved()
  })

  it("skips an item applied before (by a single transfer) and applies the others", async () => {
    const items = await newItems(8, 3)
    const early = items[4]!
    await chain.send(relayer, token, encodeFunctionData({ abi, functionName: "confidentialTransfer", args: [early.request, early.signature, early.accountSignature] }))
    mirror([early])
    const receipt = await sendBatch(items)
    const { applied, skipped } = outcomes(receipt)
    expect(applied).toEqual(items.filter((item) => item !== early).map((item) => item.request.transferId))
    expect([...skipped]).toEqual([[early.request.transferId, 0]])
    mirror(items.filter((item) => item !== early))
    await expectBalancesConserved()
  })

  it("applies nothing when the whole batch is sent again", async () => {
    const items = await newItems(8, 5)
    const first = await sendBatch(items)
    expect(outcomes(first).applied).toHaveLength(8)
    mirror(items)
    const again = await sendBatch(items)
    expect(again.status).toBe("success")
    const { applied, skipped } = outcomes(again)
    expect(applied).toEqual([])
    expect([...skipped.values()]).toEqual(Array(8).fill(0))
    await expectBalancesConserved()
  })

  it("skips an expired item and items not signed by the guardian (another signer, altered fields, truncated signature), and applies the rest", async () => {
    const [good1, expired, forged, altered, truncated, good2] = [
      await newItem(parties[0]!, parties[1]!, 7n),
      await newItem(parties[1]!, parties[2]!, 8n, (await chain.latestTimestamp()) - 10n),
      await newItem(parties[2]!, parties[3]!, 9n),
      await newItem(parties[3]!, parties[4]!, 10n),
      await newItem(parties[4]!, parties[5]!, 11n),
      await newItem(parties[5]!, parties[6]!, 12n)
    ]
    const stranger = privateKeyToAccount(generatePrivateKey())
    const items: Array<Item> = [
      good1!,
      expired!,
      { ...forged!, signature: await signConfidential(stranger, domain(), forged!.request) },
      { ...altered!, request: { ...altered!.request, to: parties[7]!.account.address } },
      { ...truncated!, signature: truncated!.signature.slice(0, 130) as Hex },
      good2!
    ]
    const receipt = await sendBatch(items)
    const { applied, skipped } = outcomes(receipt)
    expect(applied).toEqual([good1!.request.transferId, good2!.request.transferId])
    expect(skipped).toEqual(new Map([
      [expired!.request.transferId, 1],
      [forged!.request.transferId, 2],
      [altered!.request.transferId, 2],
      [truncated!.request.transferId, 2]
    ]))
    // Skipped items keep their nonces unused: a valid attestation may still apply them.
    for (const item of [expired!, forged!, altered!, truncated!]) expect(await nonceUsed(item)).toBe(false)
    mirror([good1!, good2!])
    await expectBalancesConserved()
    const retried = await sendBatch([forged!])
    expect(outcomes(retried).applied).toEqual([forged!.request.transferId])
    mirror([forged!])
    await expectBalancesConserved()
  })

  it("skips an item without its sender's signature (guardian alone, the account alone, a signature over another transfer), and applies the rest", async () => {
    const [good1, guardianOnly, accountOnly, otherTransfer, byRecipient, good2] = [
      await newItem(parties[0]!, parties[1]!, 13n),
      await newItem(parties[1]!, parties[2]!, 14n),
      await newItem(parties[2]!, parties[3]!, 15n),
      await newItem(parties[3]!, parties[4]!, 16n),
      await newItem(parties[4]!, parties[5]!, 17n),
      await newItem(parties[5]!, parties[6]!, 18n)
    ]
    const elsewhere = await newItem(parties[3]!, parties[4]!, 16n)
    const items: Array<Item> = [
      good1!,
      // The guardian signs both places: what an attacker holding only the guardian's secret can make.
      { ...guardianOnly!, accountSignature: guardianOnly!.signature },
      // The sender signs both places: what the account's wallet alone can make.
      { ...accountOnly!, signature: accountOnly!.accountSignature },
      // The sender's signature over another transfer of its own.
      { ...otherTransfer!, accountSignature: elsewhere.accountSignature },
      // Signed by the recipient instead of the sender.
      { ...byRecipient!, accountSignature: await signConfidential(parties[5]!.account, domain(), byRecipient!.request) },
      good2!
    ]
    const receipt = await sendBatch(items)
    const { applied, skipped } = outcomes(receipt)
    expect(applied).toEqual([good1!.request.transferId, good2!.request.transferId])
    expect(skipped).toEqual(new Map([
      [guardianOnly!.request.transferId, 3],
      [accountOnly!.request.transferId, 2],
      [otherTransfer!.request.transferId, 3],
      [byRecipient!.request.transferId, 3]
    ]))
    for (const item of [guardianOnly!, accountOnly!, otherTransfer!, byRecipient!]) expect(await nonceUsed(item)).toBe(false)
    mirror([good1!, good2!])
    await expectBalancesConserved()
    // With both signatures the skipped item applies, once: the same batch again is a replay.
    const retried = await sendBatch([guardianOnly!])
    expect(outcomes(retried).applied).toEqual([guardianOnly!.request.transferId])
    mirror([guardianOnly!])
    const replayed = await sendBatch([guardianOnly!])
    expect([...outcomes(replayed).skipped.values()]).toEqual([0])
    await expectBalancesConserved()
  })

  it("refuses arrays of different lengths", async () => {
    const [item] = await newItems(1)
    await chain.expectRevert(
      {
        account: relayer.address,
        to: token,
        data: encodeFunctionData({ abi, functionName: "confidentialTransferBatch", args: [[item!.request], [item!.signature, item!.signature], [item!.accountSignature], []] })
      },
      "BatchLengthMismatch",
      [1n, 2n]
    )
    await chain.expectRevert(
      {
        account: relayer.address,
        to: token,
        data: encodeFunctionData({ abi, functionName: "confidentialTransferBatch", args: [[item!.request], [item!.signature], [], []] })
      },
      "BatchLengthMismatch",
      [1n, 0n]
    )
    // Root hints: none, or six words per item.
    await chain.expectRevert(
      { account: relayer.address, to: token, data: batchData([item!], [1n, 2n, 3n, 4n, 5n]) },
      "BatchLengthMismatch",
      [1n, 5n]
    )
  })
})

describe("root hints (D70)", () => {
  // Every party debited and credited once, so each of its three points is stored (a shield
  // alone stores only the commitment) and gas compares steady state with steady state.
  beforeAll(async () => {
    const items = await newItems(partyCount)
    expect(outcomes(await sendBatch(items)).applied).toHaveLength(partyCount)
    mirror(items)
  })

  /** Three items over six parties, each party once: every stored point read is a first read. */
  const spreadItems = async (offset: number) => Promise.all([0, 2, 4].map((i) => newItem(parties[(i + offset) % partyCount]!, parties[(i + offset + 1) % partyCount]!, BigInt(20 + i))))

  /** Sends `items` with `hints`, checks every item applied and the balances, returns the gas used. */
  const applyWith = async (items: ReadonlyArray<Item>, hints: ReadonlyArray<bigint>) => {
    const receipt = await sendBatch(items, hints)
    expect(outcomes(receipt).applied).toEqual(items.map((item) => item.request.transferId))
    mirror(items)
    await expectBalancesConserved()
    return receipt.gasUsed
  }

  it("gives the same balances with the relayer's hints as without, for 18 modexps less", async () => {
    const unhinted = await applyWith(await spreadItems(0), [])
    const items = await spreadItems(0)
    const hints = await readHints(items)
    expect(hints).toHaveLength(18)
    expect(hints.every((hint) => hint > 0n && hint < P)).toBe(true)
    const hinted = await applyWith(items, hints)
    // A modexp is ~4.1k under Osaka pricing, a hint ~0.6k of calldata and checks.
    expect(unhinted - hinted).toBeGreaterThan(18n * 3_000n)
  })

  it("hints only a party's first item of the batch (later ones read the batch's own sums)", async () => {
    const items = await newItems(4, 2)
    const hints = await readHints(items)
    // 2→3, 3→4, 4→5, 5→6: parties 3, 4 and 5 were written by the item before.
    expect(hints.map((hint) => hint !== 0n)).toEqual([true, true, true, true, true, true, ...[false, false, false, true, true, true], ...[false, false, false, true, true, true], ...[false, false, false, true, true, true]])
    await applyWith(items, hints)
  })

  it("falls back to the modexp for a wrong, stale, mis-signed or out-of-range hint and still sums correctly", async () => {
    const items = await spreadItems(3)
    const correct = await readHints(items)
    const unhintedGas = await applyWith(await spreadItems(3), [])
    // What `correct` hinted is stale now: the batch above changed all six parties' balances.
    const stale = await applyWith(items, correct)
    const next = await spreadItems(3)
    const fresh = await readHints(next)
    const corrupt = fresh.map((y, index) => {
      switch (index % 3) {
        case 0: return y + 1n // not a root
        case 1: return P - y // the other root: wrong parity
        default: return 2n * P - y // ≥ p, but the right parity and square
      }
    })
    const corrupted = await applyWith(next, corrupt)
    // The same shape with correct hints: each hint taken spares one recovery (~4.1k), so a batch
    // whose 18 hints all fell back costs 18 recoveries more, the same calldata aside.
    const again = await spreadItems(3)
    const hinted = await applyWith(again, await readHints(again))
    expect(stale - hinted).toBeGreaterThan(18n * 3_000n)
    expect(corrupted - hinted).toBeGreaterThan(18n * 3_000n)
    expect(stale).toBeGreaterThan(unhintedGas)
  })
})

describe("storage and gas of balances (D66)", () => {
  /** The first of `account`'s three balance slots: `balances` is the mapping at slot 5. */
  const balanceSlot = (account: Address): bigint => hexToBigInt(keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [account, 5n])))
  const compressed = (point: { readonly x: bigint; readonly y: bigint }): bigint => point.x | ((point.y & 1n) << 255n)
  const stored = async (slot: bigint): Promise<bigint> => hexToBigInt((await chain.client.getStorageAt({ address: token, slot: numberToHex(slot, { size: 32 }) })) ?? "0x0")

  /** A registered party with `initialBalance` shielded, not in `parties` (conservation above counts those only). */
  const newParty = async (account: LocalAccount): Promise<Party> => {
    const key = makeKeyPair()
    const proof = proveKeyPossession(key, { chainId: chain.chainId, contract: token, account: account.address })
    await chain.send(account, token, encodeFunctionData({ abi, functionName: "register", args: [key.evm, proof] }))
    await faucet.shieldUsdg(account.address, initialBalance)
    ledger.shield(account.address, initialBalance)
    return { account, key, nextNonce: 0n, balance: initialBalance }
  }

  it("stores each balance in three words, each point's x with the parity of its y in bit 255", async () => {
    const party = parties[0]!
    const onChain = await chain.client.readContract({ address: token, abi, functionName: "encryptedBalanceOf", args: [party.account.address] })
    const slot = balanceSlot(party.account.address)
    expect(await stored(slot)).toBe(compressed(onChain.commitment))
    expect(await stored(slot + 1n)).toBe(compressed(onChain.ownerHandle))
    expect(await stored(slot + 2n)).toBe(compressed(onChain.guardianHandle))
    expect(onChain.ownerHandle.x).not.toBe(0n)
    // An address never credited reads as the identity three times over.
    const stranger = await chain.newAccount()
    const empty = await chain.client.readContract({ address: token, abi, functionName: "encryptedBalanceOf", args: [stranger.address] })
    expect(empty).toEqual({ commitment: { x: 0n, y: 0n }, ownerHandle: { x: 0n, y: 0n }, guardianHandle: { x: 0n, y: 0n } })
  })

  it("sums correctly when two parties' slots share entries of the batch's table of roots (a stale y is never used)", async () => {
    // A batch of two items has a table of 32 entries, indexed by slot mod 32: find two accounts
    // whose slots meet there, so each reads an entry the other wrote.
    const candidates: Array<LocalAccount> = []
    let pair: readonly [LocalAccount, LocalAccount] | undefined
    while (pair === undefined) {
      const account = await chain.newAccount()
      const meets = (other: LocalAccount) => {
        const distance = (balanceSlot(account.address) - balanceSlot(other.address)) & 31n
        return distance <= 2n || distance >= 30n
      }
      const partner = candidates.find(meets)
      if (partner !== undefined) pair = [partner, account]
      candidates.push(account)
    }
    const [a, b] = [await newParty(pair[0]), await newParty(pair[1])]
    for (const items of [[await newItem(a, b, 7n), await newItem(b, a, 5n)], [await newItem(b, a, 3n), await newItem(a, b, 11n)]]) {
      const receipt = await sendBatch(items)
      expect(outcomes(receipt).applied).toHaveLength(2)
      for (const item of items) ledger.confidential(item.request)
    }
    for (const [party, balance] of [[a, initialBalance - 7n + 5n + 3n - 11n], [b, initialBalance + 7n - 5n - 3n + 11n]] as const) {
      const onChain = await chain.client.readContract({ address: token, abi, functionName: "encryptedBalanceOf", args: [party.account.address] })
      expect(onChain).toEqual(ledger.evm(party.account.address))
      expect(toEvm(decryptToPoint(fromEvm(onChain.commitment), fromEvm(onChain.ownerHandle), party.key.secret))).toEqual(toEvm(G.multiply(balance)))
    }
  })

  it("costs at most 70k gas per transfer in a batch of 32 with distinct parties and root hints (issue 49), at most 91k without hints", async () => {
    const crowd = await Promise.all(Array.from({ length: 64 }, async () => newParty(await chain.newAccount())))
    const pairs = (reversed: boolean): Array<readonly [Party, Party]> =>
      Array.from({ length: 32 }, (_, i) => (reversed ? [crowd[32 + i]!, crowd[i]!] : [crowd[i]!, crowd[32 + i]!]))
    const batchOf = async (reversed: boolean, hinted = false) => {
      const items = await Promise.all(pairs(reversed).map(([from, to]) => newItem(from, to, 1n)))
      const receipt = await sendBatch(items, hinted ? await readHints(items) : [])
      expect(outcomes(receipt).applied).toHaveLength(32)
      for (const item of items) ledger.confidential(item.request)
      return receipt.gasUsed / 32n
    }
    // Warm-up: each party's first debit and credit turn its handle words from zero to non-zero.
    await batchOf(false)
    await batchOf(true)
    // Without hints (89.9k measured): every stored point's y recovered by modexp.
    const perTransfer = await batchOf(false)
    expect(perTransfer).toBeGreaterThan(80_000n)
    expect(perTransfer).toBeLessThanOrEqual(91_000n)
    // With the hints a relayer reads (67.1k measured, D70).
    const hinted = await batchOf(true, true)
    expect(hinted).toBeGreaterThan(60_000n)
    expect(hinted).toBeLessThanOrEqual(70_000n)
    expect(await chain.client.readContract({ address: token, abi, functionName: "encryptedBalanceOf", args: [crowd[0]!.account.address] })).toEqual(
      ledger.evm(crowd[0]!.account.address)
    )
  }, 120_000)
})
