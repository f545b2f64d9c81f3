/**
 * The node's chain keys sign transactions with libsecp256k1 (WebAssembly) for speed: the signed
 * bytes must be exactly viem's own (noble, RFC 6979, low-s), for every kind of transaction the
 * relayer and the faucet send.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Hex, parseTransaction, recoverTransactionAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { localAccount } from "../src/settlement/LocalAccounts.ts"

describe("LocalAccounts", () => {
  it("signs 100 EIP-1559 and legacy transactions byte for byte as viem does, recovering to the key's address", async () => {
    for (let round = 0; round < 100; round++) {
      const privateKey = generatePrivateKey()
      const fast = localAccount(privateKey)
      const reference = privateKeyToAccount(privateKey)
      assert.strictEqual(fast.address, reference.address)
      const to = privateKeyToAccount(generatePrivateKey()).address
      const data = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(68))).toString("hex")}` as Hex
      const transaction = round % 2 === 0
        ? { type: "eip1559" as const, chainId: 31_337, nonce: round, to, data, gas: 250_000n, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1n, value: 0n }
        : { type: "legacy" as const, chainId: 31_337, nonce: round, to, data, gas: 21_000n + BigInt(round), gasPrice: 1_000_000_000n, value: 5n }
      const signed = await fast.signTransaction(transaction)
      assert.strictEqual(signed, await reference.signTransaction(transaction))
      assert.strictEqual(await recoverTransactionAddress({ serializedTransaction: signed as never }), reference.address)
      assert.strictEqual(parseTransaction(signed).nonce, round)
    }
  })
})
