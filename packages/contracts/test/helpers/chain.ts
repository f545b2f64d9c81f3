/**
 * A fresh chain per test file: anvil at ten blocks a second, the contracts deployed through
 * `Deploy.deploy`, and helpers to fund accounts, send transactions with explicit gas, move the
 * chain's clock forward, and assert that a call reverts with a named custom error.
 */
import {
  type Abi,
  type Address,
  BaseError,
  createPublicClient,
  createTestClient,
  decodeErrorResult,
  type Hex,
  http,
  type LocalAccount,
  parseEther,
  type PublicClient,
  type TransactionReceipt
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { expect } from "vitest"
import * as Anvil from "../../src/anvil.ts"
import * as ConfidentialToken from "../../src/artifacts/ConfidentialToken.ts"
import * as TestUSDG from "../../src/artifacts/TestUSDG.ts"
import * as WrappedEther from "../../src/artifacts/WrappedEther.ts"
import * as Deploy from "../../src/deploy.ts"
import { makeSender, type Sender } from "../../src/internal/transactions.ts"
import { type KeyPair, makeKeyPair } from "./elgamal.ts"

/** Every custom error any of our contracts can raise, so reverts decode whichever contract raised them. */
export const errorAbi = [...ConfidentialToken.abi, ...TestUSDG.abi, ...WrappedEther.abi].filter(
  (item) => item.type === "error"
)

/** Generous explicit gas for test transactions; gas figures come from receipts, never from this. */
const testGas = 1_000_000n
const pollingMs = 20

export interface Chain {
  readonly anvil: Anvil.Instance
  readonly client: PublicClient
  readonly chainId: number
  readonly owner: LocalAccount
  readonly guardian: LocalAccount
  /** The guardian signer's private key, for the test that hands it to an attacker's process. */
  readonly guardianSecret: Hex
  readonly guardianKey: KeyPair
  readonly addresses: Deploy.Addresses
  readonly newAccount: () => Promise<LocalAccount>
  readonly send: (account: LocalAccount, to: Address, data: Hex, gas?: bigint, value?: bigint) => Promise<TransactionReceipt>
  readonly expectRevert: (
    call: { readonly account: Address; readonly to: Address; readonly data: Hex },
    errorName: string,
    args?: ReadonlyArray<unknown>
  ) => Promise<void>
  readonly latestTimestamp: () => Promise<bigint>
  /** Moves the chain's clock `seconds` forward and mines a block at the new time. */
  readonly advanceTime: (seconds: bigint) => Promise<void>
  readonly stop: () => Promise<void>
}

export interface StartChainOptions {
  /** Default 46630, the testnet. */
  readonly chainId?: number
  /** Default `Deploy.deploy`'s for the chain id (60 s on test chains). */
  readonly guardianRotationDelaySeconds?: bigint
}

export const startChain = async (options: StartChainOptions = {}): Promise<Chain> => {
  const anvil = await Anvil.start({ blockTimeSeconds: 0.1, ...(options.chainId === undefined ? {} : { chainId: options.chainId }) })
  const transport = http(anvil.rpcUrl)
  const client = createPublicClient({ transport, pollingInterval: pollingMs })
  const testClient = createTestClient({ mode: "anvil", transport })

  const newAccount = async (): Promise<LocalAccount> => {
    const account = privateKeyToAccount(generatePrivateKey())
    await testClient.setBalance({ address: account.address, value: parseEther("1000") })
    return account
  }

  const owner = await newAccount()
  const guardianSecret = generatePrivateKey()
  const guardian = privateKeyToAccount(guardianSecret)
  const guardianKey = makeKeyPair()
  const addresses = await Deploy.deploy({
    client,
    deployer: owner,
    owner: owner.address,
    guardianSigner: guardian.address,
    guardianEncryptionKey: guardianKey.evm,
    guardianRotationDelaySeconds: options.guardianRotationDelaySeconds,
    receiptPollingMs: pollingMs
  })

  const senders = new Map<Address, Sender>()
  const send = (account: LocalAccount, to: Address, data: Hex, gas = testGas, value = 0n) => {
    let sender = senders.get(account.address)
    if (sender === undefined) {
      sender = makeSender(client, account, pollingMs)
      senders.set(account.address, sender)
    }
    return sender.send({ to, data, gas, value })
  }

  const expectRevert: Chain["expectRevert"] = async (call, errorName, args) => {
    let caught: unknown
    try {
      await client.call({ account: call.account, to: call.to, data: call.data })
    } catch (error) {
      caught = error
    }
    expect(caught, `expected ${errorName}, but the call succeeded`).toBeInstanceOf(BaseError)
    // eth_call's error carries the raw revert data; decode it against every error we define.
    const carrier = (caught as BaseError).walk((error) => typeof (error as { data?: unknown }).data === "string")
    const revertData = (carrier as { data?: Hex } | null)?.data
    expect(revertData, "no revert data").toBeTypeOf("string")
    const decoded = decodeErrorResult({ abi: errorAbi as Abi, data: revertData as Hex })
    expect(decoded.errorName).toBe(errorName)
    if (args !== undefined) expect(decoded.args).toEqual(args)
  }

  const latestTimestamp = async () => (await client.getBlock({ blockTag: "latest" })).timestamp

  const advanceTime = async (seconds: bigint) => {
    const target = (await latestTimestamp()) + seconds
    await testClient.setNextBlockTimestamp({ timestamp: target })
    await testClient.mine({ blocks: 1 })
    // Interval mining may have mined its own block in between, at the target or just after.
    expect(await latestTimestamp()).toBeGreaterThanOrEqual(target)
  }

  return {
    anvil,
    client,
    chainId: anvil.chainId,
    owner,
    guardian,
    guardianSecret,
    guardianKey,
    addresses,
    newAccount,
    send,
    expectRevert,
    latestTimestamp,
    advanceTime,
    stop: () => anvil.stop()
  }
}
