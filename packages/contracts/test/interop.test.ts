/**
 * The crypto package (@pps/crypto) and the contract agree on the cross-package interface:
 * a proof of possession made by @pps/crypto registers on chain, its H is the contract's H,
 * and its attestation types are the ones the contract hashes.
 */
import { EncryptionKey, Point, Attestation } from "@pps/crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bytesToHex, encodeFunctionData, hexToBigInt, slice } from "viem"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import * as TypedData from "../src/typedData.ts"
import { type Chain, startChain } from "./helpers/chain.ts"

let chain: Chain
beforeAll(async () => {
  chain = await startChain()
})
afterAll(async () => {
  await chain?.stop()
})

const toEvm = (point: Uint8Array) => {
  const hex = bytesToHex(point)
  return { x: hexToBigInt(slice(hex, 0, 32)), y: hexToBigInt(slice(hex, 32, 64)) }
}

describe("@pps/crypto interop", () => {
  it("a proof of possession from @pps/crypto registers on chain", async () => {
    const account = await chain.newAccount()
    const token = chain.addresses.confidentialUsdg
    const keyPair = EncryptionKey.generate()
    const proof = EncryptionKey.proveOwnership(keyPair, { chainId: BigInt(chain.chainId), contract: token, account: account.address })
    const key = toEvm(keyPair.publicKey)
    await chain.send(account, token, encodeFunctionData({ abi: ConfidentialToken.abi, functionName: "register", args: [key, bytesToHex(proof)] }))
    expect(
      await chain.client.readContract({ address: token, abi: ConfidentialToken.abi, functionName: "encryptionKeyOf", args: [account.address] })
    ).toEqual(key)
  })

  it("H and the attestation types are the same on both sides", async () => {
    const onChain = await chain.client.readContract({ address: chain.addresses.confidentialUsdg, abi: ConfidentialToken.abi, functionName: "generatorH" })
    expect(toEvm(Point.H)).toEqual(onChain)
    expect(Attestation.domainName).toBe(TypedData.domainName)
    expect(Attestation.domainVersion).toBe(TypedData.domainVersion)
    expect(Attestation.types.ConfidentialTransfer).toEqual(TypedData.confidentialTransferTypes.ConfidentialTransfer)
    expect(Attestation.types.PublicTransfer).toEqual(TypedData.publicTransferTypes.PublicTransfer)
  })
})
