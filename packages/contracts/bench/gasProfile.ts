/**
 * Where the gas of a `confidentialTransferBatch` goes: sends batches of 1, 8 and 32 transfers
 * (distinct parties, and 16 accounts where sender i pays i+1) on a fresh anvil, replays each
 * with `debug_traceTransaction` and sums the gas of every opcode by kind (storage reads and
 * writes, each precompile, logs, hashing, the rest), per transfer. The intrinsic part (21k base
 * and calldata) is the receipt's gasUsed minus the execution gas the trace shows.
 *
 * Usage: pnpm --filter @pps/contracts gas:profile. Prints a markdown table; records nothing.
 * GAS_PROFILE_HARDFORK=prague runs anvil at that fork; GAS_PROFILE_OPCODES=1 lists every opcode.
 */
import { encodeDeployData, encodeFunctionData, type Hex, type LocalAccount, maxUint256, parseEventLogs, size } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import * as TestUSDG from "../src/artifacts/TestUSDG.ts"
import * as Deploy from "../src/deploy.ts"
import { batchCalldata, startBenchChain } from "./benchChain.ts"
import { type KeyPair, makeKeyPair, proveKeyPossession } from "../test/helpers/elgamal.ts"
import { confidentialRequest, signConfidential } from "../test/helpers/transfers.ts"

const abi = ConfidentialToken.abi

interface StructLog {
  readonly op: string
  readonly gas: number
  readonly gasCost: number
  readonly depth: number
  readonly stack?: ReadonlyArray<string>
}

/** The precompiles a transfer calls, by address. */
const precompiles: Record<number, string> = { 1: "ecrecover", 5: "modexp", 6: "ecAdd", 7: "ecMul" }

/** The kind an opcode's gas is counted under. */
const kindOf = (log: StructLog): string => {
  if (log.op === "STATICCALL" || log.op === "CALL") {
    const target = Number(BigInt(log.stack?.[log.stack.length - 2] ?? "0"))
    return precompiles[target] ?? `call ${target}`
  }
  if (log.op.startsWith("LOG")) return "LOG (events)"
  if (["SLOAD", "SSTORE", "TLOAD", "TSTORE", "KECCAK256", "CALLDATACOPY", "CALLDATALOAD"].includes(log.op)) return log.op
  return process.env.GAS_PROFILE_OPCODES === undefined ? "other opcodes" : `op ${log.op}`
}

/** Gas by kind: each step's real cost is the drop in remaining gas to the next step at the same depth. */
const profile = (logs: ReadonlyArray<StructLog>): Map<string, number> => {
  const byKind = new Map<string, number>()
  for (let i = 0; i < logs.length; i++) {
    const log = logs[i]!
    const next = logs.slice(i + 1).find((candidate) => candidate.depth <= log.depth)
    const cost = next === undefined ? log.gasCost : log.gas - next.gas
    byKind.set(kindOf(log), (byKind.get(kindOf(log)) ?? 0) + cost)
  }
  return byKind
}

/** GAS_PROFILE_HARDFORK=prague prices the precompiles as before Osaka (modexp under EIP-2565). */
const hardfork = process.env.GAS_PROFILE_HARDFORK
const { anvil, client, send, newAccount } = await startBenchChain({ blockTimeSeconds: 0.1, ...(hardfork === undefined ? {} : { hardfork }) })
try {
  const owner = await newAccount()
  const guardian = privateKeyToAccount(generatePrivateKey())
  const guardianKey = makeKeyPair()
  const created = async (data: Hex) => (await send(owner, null, data)).contractAddress ?? ""
  const usdg = (await created(encodeDeployData({ abi: TestUSDG.abi, bytecode: TestUSDG.bytecode, args: [owner.address] }))) as `0x${string}`
  const token = (await created(
    encodeDeployData({ abi, bytecode: ConfidentialToken.bytecode, args: [usdg, owner.address, guardian.address, guardianKey.evm, Deploy.testChainGuardianRotationDelaySeconds] })
  )) as `0x${string}`
  const domain = { chainId: anvil.chainId, contract: token }
  await send(owner, usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "approve", args: [token, maxUint256] }))
  await send(owner, usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "mint", args: [owner.address, 10n ** 15n] }))

  interface Party { readonly account: LocalAccount; readonly key: KeyPair; nonce: bigint }
  const registered = async (): Promise<Party> => {
    const account = await newAccount()
    const key = makeKeyPair()
    const proof = proveKeyPossession(key, { chainId: anvil.chainId, contract: token, account: account.address })
    await send(account, token, encodeFunctionData({ abi, functionName: "register", args: [key.evm, proof] }))
    await send(owner, token, encodeFunctionData({ abi, functionName: "shield", args: [account.address, 10n ** 9n] }))
    return { account, key, nonce: 0n }
  }
  const crowd = await Promise.all(Array.from({ length: 64 }, registered))
  const batch = async (pairs: ReadonlyArray<readonly [Party, Party]>) => {
    const items = await Promise.all(pairs.map(async ([from, to]) => {
      const request = confidentialRequest({ from: from.account.address, to: to.account.address, amount: 1_000n, fromKey: from.key, toKey: to.key, guardianKey, nonce: from.nonce++, deadline: 2n ** 40n })
      return { request, signature: await signConfidential(guardian, domain, request), accountSignature: await signConfidential(from.account, domain, request) }
    }))
    const data = await batchCalldata(client, token, items)
    const receipt = await send(owner, token, data, 14_000_000n)
    if (parseEventLogs({ abi, logs: receipt.logs, eventName: "ConfidentialTransfer" }).length !== pairs.length) throw new Error("a batch item was skipped")
    return { receipt, calldataBytes: size(data) }
  }
  const distinct = (count: number) => Array.from({ length: count }, (_, i) => [crowd[i]!, crowd[32 + i]!] as const)
  const cycling = (count: number) => Array.from({ length: count }, (_, i) => [crowd[i % 16]!, crowd[(i + 1) % 16]!] as const)
  // Warm-up: every party debited and credited once, so the figures are the steady state.
  await batch(distinct(32))
  await batch(distinct(32).map(([from, to]) => [to, from] as const))

  const columns: Array<{ label: string; byKind: Map<string, number> }> = []
  for (const [label, pairs] of [["distinct", distinct], ["16 accounts", cycling]] as const) {
    for (const count of [1, 8, 32]) {
      const { receipt, calldataBytes } = await batch(pairs(count))
      // Replayed as a call on the state before its block: anvil keeps no steps of mined
      // transactions unless started with --steps-tracing.
      const transaction = await client.getTransaction({ hash: receipt.transactionHash })
      // Plain fetch: the trace of a batch of 32 is ~150 MB, over viem's response limit.
      const response = await fetch(anvil.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "debug_traceCall", params: [
          { from: transaction.from, to: transaction.to, data: transaction.input, gas: `0x${transaction.gas.toString(16)}` },
          `0x${(receipt.blockNumber - 1n).toString(16)}`,
          { disableMemory: true, disableStorage: true, disableStack: false }
        ] })
      })
      const trace = ((await response.json()) as { readonly result: { readonly structLogs: ReadonlyArray<StructLog> } }).result
      const byKind = profile(trace.structLogs)
      const execution = [...byKind.values()].reduce((sum, gas) => sum + gas, 0)
      byKind.set("intrinsic (21k + calldata)", Number(receipt.gasUsed) - execution)
      byKind.set("total (receipt gasUsed)", Number(receipt.gasUsed))
      for (const [kind, gas] of byKind) byKind.set(kind, Math.round(gas / count))
      byKind.set("calldata bytes", Math.round(calldataBytes / count))
      columns.push({ label: `${count}, ${label}`, byKind })
    }
  }
  const kinds = [...new Set(columns.flatMap((column) => [...column.byKind.keys()]))].sort((a, b) => (a.startsWith("total") ? 1 : b.startsWith("total") ? -1 : a.localeCompare(b)))
  process.stdout.write(`| per transfer, batch of | ${columns.map((column) => column.label).join(" | ")} |\n|---|${columns.map(() => "---:").join("|")}|\n`)
  for (const kind of kinds) {
    process.stdout.write(`| ${kind} | ${columns.map((column) => (column.byKind.get(kind) ?? 0).toLocaleString("en-US")).join(" | ")} |\n`)
  }
} finally {
  await anvil.stop()
}
