/**
 * The two public assets: TestUSDG (6 decimals, owner-managed minters) and WrappedEther, with
 * the ERC-20 base they share and every error they define that a caller can reach.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { encodeFunctionData, maxUint256, parseEther, zeroAddress } from "viem"
import * as TestUSDG from "../src/artifacts/TestUSDG.ts"
import * as WrappedEther from "../src/artifacts/WrappedEther.ts"
import { type Chain, startChain } from "./helpers/chain.ts"

let chain: Chain
beforeAll(async () => {
  chain = await startChain()
})
afterAll(async () => {
  await chain?.stop()
})

describe("TestUSDG", () => {
  const usdg = () => chain.addresses.usdg
  const data = encodeFunctionData<typeof TestUSDG.abi>
  const balanceOf = (account: `0x${string}`) =>
    chain.client.readContract({ address: usdg(), abi: TestUSDG.abi, functionName: "balanceOf", args: [account] })

  it("lets only minters mint and only the owner appoint minters", async () => {
    const minter = await chain.newAccount()
    const outsider = await chain.newAccount()
    expect(await chain.client.readContract({ address: usdg(), abi: TestUSDG.abi, functionName: "isMinter", args: [chain.owner.address] })).toBe(true)
    await chain.expectRevert({ account: minter.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "mint", args: [minter.address, 1n] }) }, "NotMinter", [minter.address])
    await chain.expectRevert({ account: outsider.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "setMinter", args: [minter.address, true] }) }, "NotOwner", [outsider.address])
    await chain.expectRevert({ account: chain.owner.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "setMinter", args: [zeroAddress, true] }) }, "ZeroAddress")
    await chain.expectRevert({ account: minter.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "mint", args: [zeroAddress, 1n] }) }, "NotMinter")
    await chain.send(chain.owner, usdg(), data({ abi: TestUSDG.abi, functionName: "setMinter", args: [minter.address, true] }))
    await chain.expectRevert({ account: minter.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "mint", args: [zeroAddress, 1n] }) }, "InvalidReceiver", [zeroAddress])
    await chain.send(minter, usdg(), data({ abi: TestUSDG.abi, functionName: "mint", args: [outsider.address, 5_000_000n] }))
    expect(await balanceOf(outsider.address)).toBe(5_000_000n)
    await chain.send(chain.owner, usdg(), data({ abi: TestUSDG.abi, functionName: "setMinter", args: [minter.address, false] }))
    await chain.expectRevert({ account: minter.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "mint", args: [minter.address, 1n] }) }, "NotMinter")
  })

  it("transfers, approves and spends allowances, with their errors", async () => {
    const alice = await chain.newAccount()
    const bob = await chain.newAccount()
    await chain.send(chain.owner, usdg(), data({ abi: TestUSDG.abi, functionName: "mint", args: [alice.address, 100n] }))
    await chain.expectRevert({ account: alice.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "transfer", args: [bob.address, 101n] }) }, "InsufficientBalance", [alice.address, 100n, 101n])
    await chain.expectRevert({ account: alice.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "transfer", args: [zeroAddress, 1n] }) }, "InvalidReceiver", [zeroAddress])
    await chain.send(alice, usdg(), data({ abi: TestUSDG.abi, functionName: "transfer", args: [bob.address, 40n] }))
    expect(await balanceOf(bob.address)).toBe(40n)
    await chain.send(alice, usdg(), data({ abi: TestUSDG.abi, functionName: "approve", args: [bob.address, 30n] }))
    await chain.expectRevert({ account: bob.address, to: usdg(), data: data({ abi: TestUSDG.abi, functionName: "transferFrom", args: [alice.address, bob.address, 31n] }) }, "InsufficientAllowance", [bob.address, 30n, 31n])
    await chain.send(bob, usdg(), data({ abi: TestUSDG.abi, functionName: "transferFrom", args: [alice.address, bob.address, 30n] }))
    expect(await chain.client.readContract({ address: usdg(), abi: TestUSDG.abi, functionName: "allowance", args: [alice.address, bob.address] })).toBe(0n)
    // An unlimited allowance is never decremented.
    await chain.send(alice, usdg(), data({ abi: TestUSDG.abi, functionName: "approve", args: [bob.address, maxUint256] }))
    await chain.send(bob, usdg(), data({ abi: TestUSDG.abi, functionName: "transferFrom", args: [alice.address, bob.address, 30n] }))
    expect(await chain.client.readContract({ address: usdg(), abi: TestUSDG.abi, functionName: "allowance", args: [alice.address, bob.address] })).toBe(maxUint256)
    expect(await balanceOf(alice.address)).toBe(0n)
    expect(await balanceOf(bob.address)).toBe(100n)
  })

  it("hands ownership over only from the owner and never to zero", async () => {
    const successor = await chain.newAccount()
    const transfer = (to: `0x${string}`) => data({ abi: TestUSDG.abi, functionName: "transferOwnership", args: [to] })
    await chain.expectRevert({ account: successor.address, to: usdg(), data: transfer(successor.address) }, "NotOwner")
    await chain.expectRevert({ account: chain.owner.address, to: usdg(), data: transfer(zeroAddress) }, "ZeroAddress")
    await chain.send(chain.owner, usdg(), transfer(successor.address))
    expect(await chain.client.readContract({ address: usdg(), abi: TestUSDG.abi, functionName: "owner" })).toBe(successor.address)
    await chain.send(successor, usdg(), transfer(chain.owner.address))
  })
})

describe("WrappedEther", () => {
  const weth = () => chain.addresses.weth
  const balanceOf = (account: `0x${string}`) =>
    chain.client.readContract({ address: weth(), abi: WrappedEther.abi, functionName: "balanceOf", args: [account] })

  it("wraps through deposit and plain transfers, unwraps through withdraw", async () => {
    const holder = await chain.newAccount()
    const sendValue = (data: `0x${string}`, value: bigint) => chain.send(holder, weth(), data, 100_000n, value)
    await sendValue(encodeFunctionData({ abi: WrappedEther.abi, functionName: "deposit" }), parseEther("2"))
    await sendValue("0x", parseEther("1"))
    expect(await balanceOf(holder.address)).toBe(parseEther("3"))
    expect(await chain.client.readContract({ address: weth(), abi: WrappedEther.abi, functionName: "totalSupply" })).toBe(parseEther("3"))
    await chain.expectRevert(
      { account: holder.address, to: weth(), data: encodeFunctionData({ abi: WrappedEther.abi, functionName: "withdraw", args: [parseEther("4")] }) },
      "InsufficientBalance",
      [holder.address, parseEther("3"), parseEther("4")]
    )
    const etherBefore = await chain.client.getBalance({ address: holder.address })
    const receipt = await chain.send(holder, weth(), encodeFunctionData({ abi: WrappedEther.abi, functionName: "withdraw", args: [parseEther("1")] }), 100_000n)
    const fee = receipt.gasUsed * receipt.effectiveGasPrice
    expect(await chain.client.getBalance({ address: holder.address })).toBe(etherBefore + parseEther("1") - fee)
    expect(await balanceOf(holder.address)).toBe(parseEther("2"))
  })
})
