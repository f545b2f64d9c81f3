/**
 * Where deliveries may go (D33, SSRF): the rules for a subscription URL and for
 * the IP address a delivery connects to.
 *
 * A URL must be `https` (plain `http` only to loopback, and only when the
 * operator allows loopback for development), carry no credentials, and name a
 * host. Addresses are refused by range: unspecified, loopback, private (RFC
 * 1918), carrier-grade NAT, link-local, unique-local, site-local, multicast,
 * reserved and documentation ranges, IPv4-mapped and IPv4-compatible IPv6,
 * NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`), 6to4 and Teredo (which embed an
 * IPv4 address), and the cloud metadata addresses. Loopback is allowed only with
 * `WEBHOOK_ALLOW_INSECURE_LOOPBACK`; the private kinds only inside
 * `WEBHOOK_ALLOWED_PRIVATE_CIDRS`; metadata and translated forms never.
 *
 * The URL parser (WHATWG) has already turned decimal, octal and hex IPv4 forms
 * (`2130706433`, `0177.0.0.1`, `0x7f.1`) into dotted quads, so an IP literal is
 * checked in its canonical form. A host name is checked again on every
 * connection, on the addresses it resolves to then (WebhookClient pins the
 * connection to the checked address).
 *
 * @since 0.1.0
 */
import { BlockList, isIP } from "node:net"

/**
 * Why an address is refused, or `allowed`.
 *
 * @since 0.1.0
 * @category models
 */
export type AddressClass =
  | "public"
  | "loopback"
  | "private"
  | "link_local"
  | "metadata"
  | "translated"
  | "reserved"

type Range = readonly [address: string, prefix: number, kind: Exclude<AddressClass, "public">]

const ipv4Ranges: ReadonlyArray<Range> = [
  ["0.0.0.0", 8, "reserved"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "private"], // carrier-grade NAT
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link_local"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "reserved"],
  ["192.0.2.0", 24, "reserved"],
  ["192.88.99.0", 24, "reserved"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "reserved"],
  ["198.51.100.0", 24, "reserved"],
  ["203.0.113.0", 24, "reserved"],
  ["224.0.0.0", 4, "reserved"], // multicast
  ["240.0.0.0", 4, "reserved"] // reserved, and 255.255.255.255
]

const ipv6Ranges: ReadonlyArray<Range> = [
  ["::1", 128, "loopback"],
  ["::", 128, "reserved"],
  ["::ffff:0:0", 96, "translated"], // IPv4-mapped
  ["::", 96, "translated"], // IPv4-compatible (deprecated)
  ["64:ff9b::", 96, "translated"], // NAT64
  ["64:ff9b:1::", 48, "translated"], // local-use NAT64
  ["2002::", 16, "translated"], // 6to4
  ["2001::", 32, "translated"], // Teredo
  ["100::", 64, "reserved"], // discard
  ["2001:db8::", 32, "reserved"],
  ["fc00::", 7, "private"], // unique-local
  ["fe80::", 10, "link_local"],
  ["fec0::", 10, "private"], // site-local (deprecated)
  ["ff00::", 8, "reserved"] // multicast
]

/** Cloud metadata endpoints: AWS/GCP/Azure IMDS, ECS, Alibaba, Azure wireserver, Oracle, AWS IPv6. */
const metadataAddresses: ReadonlyArray<readonly [string, "ipv4" | "ipv6"]> = [
  ["169.254.169.254", "ipv4"],
  ["169.254.170.2", "ipv4"],
  ["169.254.169.123", "ipv4"],
  ["100.100.100.200", "ipv4"],
  ["168.63.129.16", "ipv4"],
  ["192.0.0.192", "ipv4"],
  ["fd00:ec2::254", "ipv6"]
]

/** Host names that only ever mean the metadata service. */
const metadataHostNames = new Set(["metadata.google.internal", "metadata.goog", "metadata", "instance-data"])

const metadataList = new BlockList()
for (const [address, family] of metadataAddresses) metadataList.addAddress(address, family)

// One list per class and family: a BlockList matches IPv4 rules against
// IPv4-mapped IPv6 addresses (and the reverse), which would let
// `::ffff:127.0.0.1` pass as plain loopback; kept apart, a mapped address only
// meets the IPv6 rules, which refuse it as translated.
const rangeLists = new Map<string, BlockList>()
for (const [address, prefix, kind] of [...ipv4Ranges, ...ipv6Ranges]) {
  const family = isIP(address) === 6 ? "ipv6" : "ipv4"
  const key = `${kind}/${family}`
  let list = rangeLists.get(key)
  if (list === undefined) {
    list = new BlockList()
    rangeLists.set(key, list)
  }
  list.addSubnet(address, prefix, family)
}
// Order matters: the most specific refusal wins (loopback `::1` before `::/96`).
const classOrder: ReadonlyArray<Exclude<AddressClass, "public" | "metadata">> = [
  "loopback",
  "translated",
  "link_local",
  "private",
  "reserved"
]

/**
 * The class of an IP address (as text, IPv6 without brackets).
 *
 * @since 0.1.0
 * @category predicates
 */
export const classifyAddress = (address: string): AddressClass => {
  const version = isIP(address)
  if (version === 0) return "reserved"
  const family = version === 6 ? "ipv6" : "ipv4"
  if (metadataList.check(address, family)) return "metadata"
  for (const kind of classOrder) {
    if (rangeLists.get(`${kind}/${family}`)?.check(address, family) === true) return kind
  }
  return "public"
}

/**
 * The operator's choices (from configuration).
 *
 * @since 0.1.0
 * @category models
 */
export interface AddressPolicy {
  readonly allowLoopback: boolean
  /** Private, link-local or unique-local ranges deliveries may reach. */
  readonly allowedPrivate: BlockList
}

/**
 * A CIDR of the allow-list is malformed.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidCidr extends Error {
  override readonly name = "InvalidCidr"
}

/**
 * Builds the policy; throws InvalidCidr on a malformed allow-list entry (a
 * configuration error, refused at start).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeAddressPolicy = (options: {
  readonly allowLoopback: boolean
  readonly allowedPrivateCidrs: ReadonlyArray<string>
}): AddressPolicy => {
  const allowedPrivate = new BlockList()
  for (const cidr of options.allowedPrivateCidrs) {
    const [address = "", prefixText = ""] = cidr.split("/")
    const version = isIP(address)
    const prefix = Number(prefixText)
    if (version === 0 || !/^\d{1,3}$/.test(prefixText) || prefix > (version === 4 ? 32 : 128)) {
      throw new InvalidCidr(`WEBHOOK_ALLOWED_PRIVATE_CIDRS: '${cidr}' is not a CIDR`)
    }
    allowedPrivate.addSubnet(address, prefix, version === 4 ? "ipv4" : "ipv6")
  }
  return { allowLoopback: options.allowLoopback, allowedPrivate }
}

/**
 * The verdict on one address: undefined when a delivery may connect to it,
 * otherwise the class that refuses it.
 *
 * @since 0.1.0
 * @category predicates
 */
export const refusalOf = (policy: AddressPolicy, address: string): AddressClass | undefined => {
  const kind = classifyAddress(address)
  switch (kind) {
    case "public":
      return undefined
    case "loopback":
      return policy.allowLoopback ? undefined : kind
    case "private":
    case "link_local":
      return policy.allowedPrivate.check(address, isIP(address) === 6 ? "ipv6" : "ipv4") ? undefined : kind
    case "metadata":
    case "translated":
    case "reserved":
      return kind
  }
}

/**
 * Why a subscription URL is refused.
 *
 * @since 0.1.0
 * @category models
 */
export type UrlRefusal =
  | "malformed"
  | "scheme"
  | "credentials"
  | "address"

/**
 * The longest URL a subscription may have.
 *
 * @since 0.1.0
 * @category constants
 */
export const urlLengthMax = 2_048

const isLoopbackName = (hostname: string) => hostname === "localhost" || hostname.endsWith(".localhost")

/**
 * Checks a subscription URL before anything connects to it; returns the parsed
 * URL, or the reason it is refused. IP literals are checked here; names are
 * checked at connect time on what they resolve to (and `localhost` names
 * count as loopback here already).
 *
 * @since 0.1.0
 * @category predicates
 */
export const checkUrl = (
  policy: AddressPolicy,
  text: string
): { readonly _tag: "Ok"; readonly url: URL } | { readonly _tag: "Refused"; readonly reason: UrlRefusal } => {
  if (text.length > urlLengthMax || !URL.canParse(text)) return { _tag: "Refused", reason: "malformed" }
  const url = new URL(text)
  if (url.hostname === "") return { _tag: "Refused", reason: "malformed" }
  if (url.username !== "" || url.password !== "") return { _tag: "Refused", reason: "credentials" }
  // A trailing dot makes a name absolute without changing what it means.
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname.toLowerCase().replace(/\.$/, "")
  const literal = isIP(host) !== 0
  const loopback = literal ? classifyAddress(host) === "loopback" : isLoopbackName(host)
  if (url.protocol === "http:") {
    if (!(policy.allowLoopback && loopback)) return { _tag: "Refused", reason: "scheme" }
  } else if (url.protocol !== "https:") {
    return { _tag: "Refused", reason: "scheme" }
  }
  if (metadataHostNames.has(host)) return { _tag: "Refused", reason: "address" }
  if (literal && refusalOf(policy, host) !== undefined) return { _tag: "Refused", reason: "address" }
  if (!literal && loopback && !policy.allowLoopback) return { _tag: "Refused", reason: "address" }
  return { _tag: "Ok", url }
}
