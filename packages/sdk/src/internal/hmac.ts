/**
 * HMAC-SHA256 and a constant-time comparison, from the platform (node:crypto,
 * which Node, Bun and Deno all provide).
 *
 * @since 0.1.0
 */
import { createHmac, timingSafeEqual } from "node:crypto"

/**
 * Lowercase hex HMAC-SHA256.
 *
 * @since 0.1.0
 * @category signatures
 */
export const hmacHex = (key: Uint8Array, message: Uint8Array): string => createHmac("sha256", key).update(message).digest("hex")

/**
 * Base64 HMAC-SHA256 over several parts.
 *
 * @since 0.1.0
 * @category signatures
 */
export const hmacBase64 = (key: Uint8Array, parts: ReadonlyArray<Uint8Array>): string => {
  const mac = createHmac("sha256", key)
  for (const part of parts) mac.update(part)
  return mac.digest("base64")
}

/**
 * Whether two strings are equal, in time that depends only on their length
 * (the length of a signature is public: 64 hex characters).
 *
 * @since 0.1.0
 * @category predicates
 */
export const equalConstantTime = (a: string, b: string): boolean => {
  const left = Buffer.from(a, "utf8")
  const right = Buffer.from(b, "utf8")
  return left.length === right.length && timingSafeEqual(left, right)
}
