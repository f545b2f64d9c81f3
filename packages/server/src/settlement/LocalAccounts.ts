/**
 * The chain keys this node signs with (relayers, the faucet): viem's private-key accounts whose
 * transactions are signed by libsecp256k1 in WebAssembly instead of noble (for throughput: a relayer
 * signs every chain transaction, 0.59 ms each through viem on the 2-vCPU VM, 0.20 ms this way,
 * serialization included). The bytes are the same (RFC 6979, low-s: `localAccounts.test.ts`
 * compares them); messages and typed data are still signed by viem's own code.
 *
 * @since 0.7.0
 */
import * as libsecp256k1 from "tiny-secp256k1"
import { bytesToHex, type Hex, hexToBytes, keccak256, type LocalAccount, serializeTransaction } from "viem"
import { privateKeyToAccount } from "viem/accounts"

/**
 * @since 0.7.0
 * @category constructors
 */
export const localAccount = (privateKey: Hex): LocalAccount => {
  const account = privateKeyToAccount(privateKey)
  const key = hexToBytes(privateKey)
  const signTransaction: LocalAccount["signTransaction"] = async (transaction, options) => {
    const serializer = options?.serializer ?? serializeTransaction
    // As viem's own signTransaction: a blob transaction is signed without its sidecars.
    const signable = transaction.type === "eip4844" ? { ...transaction, sidecars: false } : transaction
    const digest = hexToBytes(keccak256(await serializer(signable)))
    const { recoveryId, signature } = libsecp256k1.signRecoverable(digest, key)
    return await serializer(transaction, {
      r: bytesToHex(signature.subarray(0, 32)),
      s: bytesToHex(signature.subarray(32, 64)),
      v: recoveryId === 1 ? 28n : 27n,
      yParity: recoveryId
    })
  }
  return { ...account, signTransaction }
}
