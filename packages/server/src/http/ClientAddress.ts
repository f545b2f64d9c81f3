/**
 * The client address a per-address limit is keyed on, behind trusted proxies.
 *
 * Behind the TLS balancer every request's socket comes from the balancer, so a
 * limit keyed on the socket address is one bucket for everybody. With
 * `TRUSTED_PROXIES` set (addresses or CIDRs), a request whose socket address is
 * trusted is judged by `X-Forwarded-For`: the client is the right-most entry
 * that is not itself a trusted proxy (entries to its left were written by the
 * client and prove nothing). A request from an untrusted socket is judged by its
 * socket address whatever headers it carries, so nobody outside the proxies can
 * choose their bucket.
 *
 * IPv6 addresses are bucketed by their /64: one subscriber usually gets a whole
 * /64, so per-address buckets would let one client take as many as it likes.
 *
 * @since 0.4.0
 */
import { BlockList, isIP } from "node:net"

/**
 * The proxies whose `X-Forwarded-For` is believed.
 *
 * @since 0.4.0
 * @category models
 */
export interface TrustedProxies {
  readonly isEmpty: boolean
  readonly contains: (address: string) => boolean
}

/** `::ffff:192.0.2.1` (an IPv4 client on a dual-stack socket) is `192.0.2.1`. */
const unmapped = (address: string): string => {
  const match = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)
  return match === null ? address : match[1]!
}

/** An address as written in a header or a socket: brackets, zone and IPv4 mapping removed. */
const normalize = (raw: string): string => {
  let address = raw.trim()
  if (address.startsWith("[")) address = address.slice(1, address.indexOf("]") === -1 ? undefined : address.indexOf("]"))
  const zone = address.indexOf("%")
  if (zone !== -1) address = address.slice(0, zone)
  return unmapped(address)
}

/**
 * Parses `TRUSTED_PROXIES` entries (`203.0.113.7`, `10.0.0.0/8`, `::1`, `fd00::/8`).
 * Throws on an entry that is neither, naming it: a typo must stop the start, not
 * silently trust nothing.
 *
 * @since 0.4.0
 * @category constructors
 */
export const makeTrustedProxies = (entries: ReadonlyArray<string>): TrustedProxies => {
  const list = new BlockList()
  let count = 0
  for (const raw of entries) {
    const entry = raw.trim()
    if (entry === "") continue
    const [base = "", prefix] = entry.split("/")
    const address = normalize(base)
    const family = isIP(address)
    if (family === 0) throw new Error(`TRUSTED_PROXIES: ${JSON.stringify(entry)} is not an IP address or CIDR`)
    const type = family === 4 ? "ipv4" : "ipv6"
    if (prefix === undefined) {
      list.addAddress(address, type)
    } else {
      const bits = Number(prefix)
      if (!/^\d{1,3}$/.test(prefix) || bits > (family === 4 ? 32 : 128)) {
        throw new Error(`TRUSTED_PROXIES: ${JSON.stringify(entry)} has an invalid prefix length`)
      }
      list.addSubnet(address, bits, type)
    }
    count += 1
  }
  return {
    isEmpty: count === 0,
    contains: (raw) => {
      const address = normalize(raw)
      const family = isIP(address)
      return family !== 0 && list.check(address, family === 4 ? "ipv4" : "ipv6")
    }
  }
}

/** The eight 16-bit groups of an IPv6 address (valid per `isIP`). */
const ipv6Groups = (address: string): Array<number> => {
  const [head = "", tail] = address.split("::")
  const parse = (part: string): Array<number> => {
    if (part === "") return []
    return part.split(":").flatMap((group) => {
      if (group.includes(".")) {
        // An embedded IPv4 tail: two groups.
        const [a = 0, b = 0, c = 0, d = 0] = group.split(".").map(Number)
        return [(a << 8) | b, (c << 8) | d]
      }
      return [parseInt(group, 16)]
    })
  }
  const left = parse(head)
  const right = tail === undefined ? [] : parse(tail)
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right]
}

/**
 * The bucket a client address counts in: the IPv4 address itself, or an IPv6
 * address's /64 prefix.
 *
 * @since 0.4.0
 * @category constructors
 */
export const addressBucket = (raw: string): string => {
  const address = normalize(raw)
  if (isIP(address) !== 6) return address
  const prefix = ipv6Groups(address).slice(0, 4).map((group) => group.toString(16)).join(":")
  return `${prefix}::/64`
}

/**
 * The client's address: the socket's, or, when the socket is a trusted proxy,
 * the right-most `X-Forwarded-For` entry that is not a trusted proxy (the
 * left-most entry if all are).
 *
 * @since 0.4.0
 * @category constructors
 */
export const clientAddress = (
  socketAddress: string | undefined,
  forwardedFor: string | undefined,
  trusted: TrustedProxies
): string => {
  const socket = socketAddress === undefined ? "unknown" : normalize(socketAddress)
  if (trusted.isEmpty || forwardedFor === undefined || !trusted.contains(socket)) return socket
  const hops = forwardedFor.split(",").map(normalize).filter((hop) => hop !== "")
  for (let index = hops.length - 1; index >= 0; index--) {
    const hop = hops[index]!
    // Not an address (a proxy wrote garbage, or "unknown"): stop believing the chain here.
    if (isIP(hop) === 0) return socket
    if (!trusted.contains(hop)) return hop
  }
  return hops[0] ?? socket
}
