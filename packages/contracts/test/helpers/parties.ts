/**
 * A fresh chain with the USDG ConfidentialToken ready for transfer tests: a relayer, a faucet,
 * registered parties holding shielded USDG, and the reads and decryption check they share.
 */
import { type Address, encodeFunctionData, type LocalAccount } from "viem"
import { expect } from "vitest"
import * as ConfidentialToken from "../../src/artifacts/ConfidentialToken.ts"
import * as TestUSDG from "../../src/artifacts/TestUSDG.ts"
import * as Faucet from "../../src/faucet.ts"
import { type Chain, startChain } from "./chain.ts"
import { decryptToPoint, fromEvm, G, type KeyPair, makeKeyPair, proveKeyPossession, toEvm } from "./elgamal.ts"

const abi = ConfidentialToken.abi

export interface Party {
  readonly account: LocalAccount
  key: KeyPair
  nextNonce: bigint
}

export interface TokenChain {
  readonly chain: Chain
  readonly token: Address
  readonly relayer: LocalAccount
  readonly faucet: Faucet.Faucet
  /** A registered account holding `amount` shielded USDG. */
  readonly fundedParty: (amount: bigint) => Promise<Party>
  readonly balanceOf: (account: Address) => ReturnType<typeof readBalance>
  /** The stored balance decrypts to `amount` under `key` and under the guardian's key. */
  readonly expectDecryptsTo: (account: Address, key: KeyPair, amount: bigint) => Promise<void>
}

const readBalance = (chain: Chain, token: Address, account: Address) =>
  chain.client.readContract({ address: token, abi, functionName: "encryptedBalanceOf", args: [account] })

export const startTokenChain = async (): Promise<TokenChain> => {
  const chain = await startChain()
  const token = chain.addresses.confidentialUsdg
  const relayer = await chain.newAccount()
  const minter = await chain.newAccount()
  await chain.send(chain.owner, chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "setMinter", args: [minter.address, true] }))
  const faucet = Faucet.make({ client: chain.client, minter, usdg: chain.addresses.usdg, confidentialUsdg: token, receiptPollingMs: 20 })
  const fundedParty = async (amount: bigint): Promise<Party> => {
    const account = await chain.newAccount()
    const key = makeKeyPair()
    const proof = proveKeyPossession(key, { chainId: chain.chainId, contract: token, account: account.address })
    await chain.send(account, token, encodeFunctionData({ abi, functionName: "register", args: [key.evm, proof] }))
    if (amount > 0n) await faucet.shieldUsdg(account.address, amount)
    return { account, key, nextNonce: 0n }
  }
  const balanceOf = (account: Address) => readBalance(chain, token, account)
  const expectDecryptsTo = async (account: Address, key: KeyPair, amount: bigint) => {
    const onChain = await balanceOf(account)
    const expected = toEvm(G.multiply(amount))
    expect(toEvm(decryptToPoint(fromEvm(onChain.commitment), fromEvm(onChain.ownerHandle), key.secret))).toEqual(expected)
    expect(toEvm(decryptToPoint(fromEvm(onChain.commitment), fromEvm(onChain.guardianHandle), chain.guardianKey.secret))).toEqual(expected)
  }
  return { chain, token, relayer, faucet, fundedParty, balanceOf, expectDecryptsTo }
}
