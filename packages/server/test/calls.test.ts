/**
 * The batch calldata is assembled from the single calls' bytes (calls.ts): it must be exactly
 * what viem's ABI encoder gives for the same requests and signatures, for any count, and a
 * call that is not a well-formed single confidential transfer must leave the batch undefined
 * (the call is then sent alone).
 */
import { randomBytes } from "node:crypto"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { assert, describe, it } from "@effect/vitest"
import { decodeFunctionData, encodeFunctionData, encodeFunctionResult, getAddress, type Hex } from "viem"
import {
  balanceRoots,
  batchItems,
  confidentialTransferBatchCall,
  confidentialTransferCall,
  encryptedBalancesOfCall,
  publicTransferCall
} from "../src/settlement/calls.ts"

const hex = (bytes: number): Hex => `0x${randomBytes(bytes).toString("hex")}`
const point = () => new Uint8Array(randomBytes(64))

const singleCall = (signatureBytes = 65, accountSignatureBytes = 65) =>
  confidentialTransferCall({
    from: getAddress(hex(20)),
    to: getAddress(hex(20)),
    transferId: hex(32),
    nonce: BigInt(hex(32)),
    ciphertext: { commitment: point(), fromHandle: point(), toHandle: point(), guardianHandle: point() },
    sealedDigest: hex(32),
    deadlineSeconds: BigInt(hex(8))
  }, { guardian: hex(signatureBytes), account: hex(accountSignatureBytes) })

/** The batch as viem encodes it from the decoded single calls (the way it was built before). */
const viemBatch = (calls: ReadonlyArray<Hex>, rootHints: ReadonlyArray<bigint> = []): Hex => {
  const decoded = calls.map((data) => decodeFunctionData({ abi: ConfidentialTokenArtifact.abi, data }))
  return encodeFunctionData({
    abi: ConfidentialTokenArtifact.abi,
    functionName: "confidentialTransferBatch",
    args: [decoded.map((call) => call.args[0]), decoded.map((call) => call.args[1]), decoded.map((call) => call.args[2]), rootHints] as never
  })
}

/** Random root hints for `count` items: six words each, some zero, some the largest word. */
const randomHints = (count: number) =>
  Array.from({ length: 6 * count }, (_, index) => (index % 5 === 0 ? 0n : index % 7 === 0 ? 2n ** 256n - 1n : BigInt(hex(32))))

describe("confidentialTransferBatchCall", () => {
  it("gives viem's bytes for batches of 1 to 64, signatures of any length included", () => {
    for (const count of [1, 2, 3, 8, 31, 32, 64]) {
      const calls = Array.from({ length: count }, (_, index) => singleCall(index % 7 === 3 ? 64 + index : 65, index % 5 === 2 ? 60 + index : 65))
      assert.strictEqual(confidentialTransferBatchCall(calls), viemBatch(calls), `a batch of ${count}`)
      const hints = randomHints(count)
      assert.strictEqual(confidentialTransferBatchCall(calls, hints), viemBatch(calls, hints), `a batch of ${count} with root hints`)
    }
    // Upper-case hex in the recorded calldata reads the same.
    const calls = [singleCall(), singleCall()]
    assert.strictEqual(
      confidentialTransferBatchCall(calls.map((data) => `0x${data.slice(2).toUpperCase()}` as Hex)),
      viemBatch(calls)
    )
  })

  it("reads each item's sender and recipient, the parties the root hints are for", () => {
    const calls = [singleCall(), singleCall(), singleCall()]
    const parties = batchItems(calls)?.parties.map((item) => ({ from: getAddress(item.from), to: getAddress(item.to) }))
    const expected = calls.map((data) => {
      const [request] = decodeFunctionData({ abi: ConfidentialTokenArtifact.abi, data }).args as unknown as [{ from: Hex; to: Hex }]
      return { from: request.from, to: request.to }
    })
    assert.deepStrictEqual(parties, expected)
  })

  it("is undefined when a call is not a well-formed single confidential transfer", () => {
    const good = singleCall()
    const publicCall = publicTransferCall({
      from: getAddress(hex(20)),
      to: getAddress(hex(20)),
      transferId: hex(32),
      nonce: 1n,
      amount: 5n,
      commitment: point(),
      fromHandle: point(),
      guardianHandle: point(),
      deadlineSeconds: 9n
    }, { guardian: hex(65), account: hex(65) })
    const malformed: ReadonlyArray<Hex> = [
      publicCall,
      good.slice(0, -64) as Hex, // its tail cut short
      `${good}00` as Hex, // a byte too many
      `${good.slice(0, 10 + 14 * 64)}${"00".repeat(31)}ff${good.slice(10 + 15 * 64)}` as Hex, // the guardian signature's offset moved
      `${good.slice(0, 10 + 15 * 64)}${"00".repeat(31)}ff${good.slice(10 + 16 * 64)}` as Hex, // the account signature's offset moved
      `${good.slice(0, 10 + 16 * 64)}${"ff".repeat(32)}${good.slice(10 + 17 * 64)}` as Hex, // a guardian signature length beyond the data
      `${good.slice(0, 10 + 16 * 64)}${"00".repeat(31)}80${good.slice(10 + 17 * 64)}` as Hex, // the guardian signature longer, over the account's offset
      `${good.slice(0, 20)}zz${good.slice(22)}` as Hex, // not hex
      `${good}0` as Hex, // an odd digit at the end
      `${good}zz` as Hex // a non-hex tail
    ]
    for (const [index, data] of malformed.entries()) {
      assert.isUndefined(confidentialTransferBatchCall([good, data]), `malformed call ${index}`)
    }
  })
})

describe("encryptedBalancesOf, the read of root hints (D70)", () => {
  const abi = ConfidentialTokenArtifact.abi
  const evmPoint = () => ({ x: BigInt(hex(32)), y: BigInt(hex(32)) })

  it("calls and reads as viem does", () => {
    for (const count of [0, 1, 2, 64]) {
      const accounts = Array.from({ length: count }, () => getAddress(hex(20)))
      assert.strictEqual(encryptedBalancesOfCall(accounts), encodeFunctionData({ abi, functionName: "encryptedBalancesOf", args: [accounts] }))
      const balances = Array.from({ length: count }, () => ({ commitment: evmPoint(), ownerHandle: evmPoint(), guardianHandle: evmPoint() }))
      const result = encodeFunctionResult({ abi, functionName: "encryptedBalancesOf", result: balances })
      assert.deepStrictEqual(
        balanceRoots(result, count),
        balances.map((balance) => ({ commitment: { y: balance.commitment.y }, ownerHandle: { y: balance.ownerHandle.y }, guardianHandle: { y: balance.guardianHandle.y } }))
      )
    }
  })

  it("reads no roots from a result that is not that many balances", () => {
    const balance = { commitment: evmPoint(), ownerHandle: evmPoint(), guardianHandle: evmPoint() }
    const result = encodeFunctionResult({ abi, functionName: "encryptedBalancesOf", result: [balance, balance] })
    assert.isUndefined(balanceRoots(result, 3))
    assert.isUndefined(balanceRoots(`${result}00` as Hex, 2))
    assert.isUndefined(balanceRoots(`0x${"00".repeat(31)}40${result.slice(66)}` as Hex, 2), "another offset")
    assert.isUndefined(balanceRoots("0x", 0))
  })
})
