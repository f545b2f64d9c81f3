/**
 * Deployment is idempotent over a record of earlier addresses (a ConfidentialToken from before
 * the guardian-rotation timelock is replaced, never reused), it fixes the rotation delay it is
 * given, and the faucet mints and shields USDG, concurrent grants included.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Address, encodeDeployData, encodeFunctionData, getAddress, zeroAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import * as TestUSDG from "../src/artifacts/TestUSDG.ts"
import * as WrappedEther from "../src/artifacts/WrappedEther.ts"
import * as Deploy from "../src/deploy.ts"
import * as Faucet from "../src/faucet.ts"
import { makeSender } from "../src/internal/transactions.ts"
import * as BeforeTimelock from "./fixtures/ConfidentialTokenBeforeTimelock.ts"
import * as V1 from "./fixtures/ConfidentialTokenV1.ts"
import { type Chain, startChain } from "./helpers/chain.ts"
import { G, toEvm } from "./helpers/elgamal.ts"

let chain: Chain
beforeAll(async () => {
  chain = await startChain()
})
afterAll(async () => {
  await chain?.stop()
})

const deployAgain = (previous: Partial<Deploy.Addresses>, guardianRotationDelaySeconds?: bigint) =>
  Deploy.deploy({
    client: chain.client,
    deployer: chain.owner,
    owner: chain.owner.address,
    guardianSigner: chain.guardian.address,
    guardianEncryptionKey: chain.guardianKey.evm,
    guardianRotationDelaySeconds,
    previous,
    receiptPollingMs: 20
  })
const rotationDelayOf = (token: Address) =>
  chain.client.readContract({ address: token, abi: ConfidentialToken.abi, functionName: "rotationDelaySeconds" })
const deployerNonce = () => chain.client.getTransactionCount({ address: chain.owner.address, blockTag: "pending" })

describe("Deploy", () => {
  it("deploys the four contracts wired to each other", async () => {
    const { usdg, weth, confidentialUsdg, confidentialEth } = chain.addresses
    expect(new Set([usdg, weth, confidentialUsdg, confidentialEth]).size).toBe(4)
    const read = chain.client.readContract
    expect(await read({ address: usdg, abi: TestUSDG.abi, functionName: "decimals" })).toBe(6)
    expect(await read({ address: usdg, abi: TestUSDG.abi, functionName: "symbol" })).toBe("USDG")
    expect(await read({ address: weth, abi: WrappedEther.abi, functionName: "decimals" })).toBe(18)
    expect(await read({ address: confidentialUsdg, abi: ConfidentialToken.abi, functionName: "asset" })).toBe(usdg)
    expect(await read({ address: confidentialEth, abi: ConfidentialToken.abi, functionName: "asset" })).toBe(weth)
  })

  it("reuses every recorded contract that is still on chain, sending nothing", async () => {
    const before = await deployerNonce()
    expect(await deployAgain(chain.addresses)).toEqual(chain.addresses)
    expect(await deployerNonce()).toBe(before)
  })

  it("deploys only a recorded contract whose code is gone", async () => {
    const before = await deployerNonce()
    const vanished = getAddress("0x000000000000000000000000000000000000dEaD")
    const addresses = await deployAgain({ ...chain.addresses, confidentialEth: vanished })
    expect({ ...addresses, confidentialEth: vanished }).toEqual({ ...chain.addresses, confidentialEth: vanished })
    expect(addresses.confidentialEth).not.toBe(chain.addresses.confidentialEth)
    expect(await chain.client.readContract({ address: addresses.confidentialEth, abi: ConfidentialToken.abi, functionName: "asset" })).toBe(
      chain.addresses.weth
    )
    expect(await deployerNonce()).toBe(before + 1)
  })

  it("redeploys a recorded ConfidentialToken that wraps another asset", async () => {
    const before = await deployerNonce()
    // Code exists at the recorded address, but it is the ETH wrapper, not the USDG one.
    const addresses = await deployAgain({ ...chain.addresses, confidentialUsdg: chain.addresses.confidentialEth })
    expect(addresses.confidentialUsdg).not.toBe(chain.addresses.confidentialUsdg)
    expect(addresses.confidentialUsdg).not.toBe(chain.addresses.confidentialEth)
    expect(await chain.client.readContract({ address: addresses.confidentialUsdg, abi: ConfidentialToken.abi, functionName: "asset" })).toBe(
      chain.addresses.usdg
    )
    expect(await deployerNonce()).toBe(before + 1)
  })

  it("replaces a recorded ConfidentialToken from before the rotation timelock, whose owner could rotate at once", async () => {
    const other = await chain.newAccount()
    const receipt = await makeSender(chain.client, other, 20).send({
      to: null,
      data: encodeDeployData({
        abi: BeforeTimelock.constructorAbi,
        bytecode: BeforeTimelock.bytecode,
        args: [chain.addresses.usdg, chain.owner.address, chain.guardian.address, chain.guardianKey.evm]
      }),
      gas: 3_000_000n
    })
    const legacy = getAddress(receipt.contractAddress as Address)
    // It wraps the right asset, so only the missing timelock can make deploy replace it.
    expect(await chain.client.readContract({ address: legacy, abi: ConfidentialToken.abi, functionName: "asset" })).toBe(chain.addresses.usdg)
    const before = await deployerNonce()
    const addresses = await deployAgain({ ...chain.addresses, confidentialUsdg: legacy })
    expect(addresses.confidentialUsdg).not.toBe(legacy)
    expect(addresses.confidentialEth).toBe(chain.addresses.confidentialEth)
    expect(await rotationDelayOf(addresses.confidentialUsdg)).toBe(Deploy.testChainGuardianRotationDelaySeconds)
    expect(await deployerNonce()).toBe(before + 1)
  })

  it("refuses a recorded ConfidentialToken of version 1 (no co-signature) unless migrating, then replaces it (D53)", async () => {
    const other = await chain.newAccount()
    const receipt = await makeSender(chain.client, other, 20).send({
      to: null,
      data: encodeDeployData({
        abi: V1.abi,
        bytecode: V1.bytecode,
        args: [chain.addresses.usdg, chain.owner.address, chain.guardian.address, chain.guardianKey.evm, 60n]
      }),
      gas: 4_000_000n
    })
    const v1 = getAddress(receipt.contractAddress as Address)
    expect(await Deploy.versionOf(chain.client, v1)).toBe("1")
    const before = await deployerNonce()
    const refusal = await deployAgain({ ...chain.addresses, confidentialUsdg: v1 }).catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(Deploy.OlderConfidentialTokenError)
    expect(refusal).toMatchObject({ token: v1, version: "1" })
    expect(await deployerNonce()).toBe(before)
    const migrated = await Deploy.deploy({
      client: chain.client,
      deployer: chain.owner,
      owner: chain.owner.address,
      guardianSigner: chain.guardian.address,
      guardianEncryptionKey: chain.guardianKey.evm,
      previous: { ...chain.addresses, confidentialUsdg: v1 },
      replaceOlderVersions: true,
      receiptPollingMs: 20
    })
    expect(migrated.confidentialUsdg).not.toBe(v1)
    expect({ ...migrated, confidentialUsdg: v1 }).toEqual({ ...chain.addresses, confidentialUsdg: v1 })
    expect(await Deploy.versionOf(chain.client, migrated.confidentialUsdg)).toBe(Deploy.confidentialTokenVersion)
    expect(await deployerNonce()).toBe(before + 1)
  })

  it("fixes the rotation delay it is given, 60 s on a test chain by default, 48 h on mainnet", async () => {
    expect(await rotationDelayOf(chain.addresses.confidentialUsdg)).toBe(60n)
    expect(Deploy.guardianRotationDelaySecondsFor(46630)).toBe(60n)
    expect(Deploy.guardianRotationDelaySecondsFor(4663)).toBe(172_800n)
    const fresh = await deployAgain({ usdg: chain.addresses.usdg, weth: chain.addresses.weth }, 5n)
    expect(await rotationDelayOf(fresh.confidentialUsdg)).toBe(5n)
    expect(await rotationDelayOf(fresh.confidentialEth)).toBe(5n)
    // A recorded contract with the timelock is reused whatever delay is asked for now: a new
    // one would strand what the old one holds.
    expect(await deployAgain(fresh, 120n)).toEqual(fresh)
  })

  it("deploys everything on an empty record", async () => {
    const before = await deployerNonce()
    const fresh = await deployAgain({})
    expect(await deployerNonce()).toBe(before + 4)
    expect(fresh.usdg).not.toBe(chain.addresses.usdg)
  })
})

describe("Faucet", () => {
  const balanceOf = (account: Address) =>
    chain.client.readContract({ address: chain.addresses.usdg, abi: TestUSDG.abi, functionName: "balanceOf", args: [account] })

  it("mints USDG and shields it, several grants at once", async () => {
    const minter = await chain.newAccount()
    await chain.send(
      chain.owner,
      chain.addresses.usdg,
      encodeFunctionData({ abi: TestUSDG.abi, functionName: "setMinter", args: [minter.address, true] })
    )
    const faucet = Faucet.make({
      client: chain.client,
      minter,
      usdg: chain.addresses.usdg,
      confidentialUsdg: chain.addresses.confidentialUsdg,
      receiptPollingMs: 20
    })
    expect(faucet.address).toBe(minter.address)
    const holder = privateKeyToAccount(generatePrivateKey()).address
    await faucet.mintUsdg(holder, 42_000_000n)
    expect(await balanceOf(holder)).toBe(42_000_000n)

    const recipients = [1n, 2n, 3n].map((amount) => ({ address: privateKeyToAccount(generatePrivateKey()).address, amount: amount * 1_000_000n }))
    await Promise.all(recipients.map(({ address, amount }) => faucet.shieldUsdg(address, amount)))
    for (const { address, amount } of recipients) {
      const balance = await chain.client.readContract({
        address: chain.addresses.confidentialUsdg,
        abi: ConfidentialToken.abi,
        functionName: "encryptedBalanceOf",
        args: [address]
      })
      expect(balance.commitment).toEqual(toEvm(G.multiply(amount)))
      expect(await balanceOf(address)).toBe(0n)
    }
    expect(await balanceOf(chain.addresses.confidentialUsdg)).toBe(6_000_000n)
    expect(await balanceOf(minter.address)).toBe(0n)
    // A later grant reuses the standing approval.
    await faucet.shieldUsdg(holder, 1n)
  })

  it("fails a grant from a wallet that is not a minter", async () => {
    const outsider = await chain.newAccount()
    const faucet = Faucet.make({
      client: chain.client,
      minter: outsider,
      usdg: chain.addresses.usdg,
      confidentialUsdg: chain.addresses.confidentialUsdg,
      receiptPollingMs: 20
    })
    await expect(faucet.mintUsdg(zeroAddress.replace(/0$/, "1") as Address, 1n)).rejects.toThrow(/reverted/)
    await expect(faucet.shieldUsdg(outsider.address, 1n)).rejects.toThrow(/reverted/)
  })
})
