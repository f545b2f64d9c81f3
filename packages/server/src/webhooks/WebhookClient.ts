/**
 * The HTTP client that sends one delivery attempt, and its SSRF defences.
 *
 * - The URL is checked before its first attempt (AddressPolicy.checkUrl), so
 *   an IP literal in any spelling is judged in canonical form; the verdict is
 *   kept per URL and grant (a pure function of the client's fixed policy: no
 *   DNS), and the resolved addresses are still checked at every connect.
 * - A host name is resolved at connect time by our own `lookup`: every address
 *   it resolves to must pass the policy (one bad address refuses the attempt,
 *   so a name that mixes a public and a private address cannot win a race),
 *   and the connection is pinned to the checked address: Node connects to what
 *   `lookup` returned, while TLS still verifies the certificate against the
 *   host name. DNS rebinding between check and connect has no gap to use.
 * - Redirects are never followed: a 3xx is just a failed attempt.
 * - 10 s for the whole exchange, on the real clock (it bounds a socket, not a
 *   schedule), then the request is destroyed.
 * - Certificates are always verified: against the system roots plus the
 *   operator's `WEBHOOK_CA_FILE`, never with verification turned off.
 * - The response body is drained and dropped: nothing of it is stored or logged.
 *
 * @since 0.1.0
 */
import * as dns from "node:dns"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type { LookupFunction } from "node:net"
import * as tls from "node:tls"
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { type AddressPolicy, checkUrl, makeAddressPolicy, refusalOf, type UrlRefusal } from "./AddressPolicy.ts"

/**
 * D31: an attempt that has not completed in 10 s has failed.
 *
 * @since 0.1.0
 * @category constants
 */
export const attemptTimeoutMs = 10_000

/**
 * The keep-alive pool of every subscription's host (the HTTPS agent also gets the operator's
 * `SecureContext`): a pooled socket was pinned and checked when it connected. Exported for the
 * rate benchmark's bare client (bench/webhookRate.ts), which must post with the same settings.
 *
 * @since 0.8.0
 * @category constants
 */
export const webhookAgentOptions = { keepAlive: true, maxSockets: 32 } as const

/**
 * Why an attempt got no HTTP status (recorded in the attempt log as is).
 *
 * @since 0.1.0
 * @category models
 */
export type AttemptError =
  | "ssrf_refused"
  | "invalid_url"
  | "dns_error"
  | "timeout"
  | "connection_refused"
  | "connection_reset"
  | "tls_error"
  | "network_error"
  | "cancelled"

/**
 * What one attempt came to.
 *
 * @since 0.1.0
 * @category models
 */
export interface AttemptOutcome {
  readonly statusCode: number | undefined
  readonly error: AttemptError | undefined
  readonly retryAfter: string | undefined
  readonly durationMs: number
}

/**
 * Resolves a host name to every address it has (injectable so tests can play
 * a hostile DNS server).
 *
 * @since 0.1.0
 * @category models
 */
export type Resolver = (hostname: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: number }>>

const systemResolver: Resolver = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true })

const ssrfCode = "EPPS_SSRF_REFUSED"

const classify = (error: unknown): AttemptError => {
  const code = typeof error === "object" && error !== null && "code" in error ? String(error.code) : ""
  if (code === ssrfCode) return "ssrf_refused"
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "ENODATA") return "dns_error"
  if (code === "ECONNREFUSED") return "connection_refused"
  if (code === "ECONNRESET" || code === "EPIPE") return "connection_reset"
  if (code === "ETIMEDOUT") return "timeout"
  if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code)) return "tls_error"
  return "network_error"
}

/**
 * The operator's webhook settings cannot be used (a private range that is no CIDR, a CA file that
 * cannot be read): the server does not start.
 *
 * @since 0.8.0
 * @category errors
 */
export class WebhookClientConfigInvalid extends Data.TaggedError("WebhookClientConfigInvalid")<{
  readonly message: string
  readonly cause: unknown
}> {}

/** A `lookup` that resolves with `resolver`, refuses any address the policy refuses, and pins the first. */
const pinnedLookup = (policy: AddressPolicy, resolver: Resolver): LookupFunction => (hostname, lookupOptions, callback) => {
  resolver(hostname).then(
    (addresses) => {
      const refused = addresses.find((entry) => refusalOf(policy, entry.address) !== undefined)
      const pinned = addresses[0]
      if (refused !== undefined || pinned === undefined) {
        const error = Object.assign(
          new Error(refused === undefined ? `${hostname} has no address` : `${hostname} resolves to a refused address`),
          { code: refused === undefined ? "ENOTFOUND" : ssrfCode }
        )
        return callback(error, "", 0)
      }
      if (lookupOptions.all === true) return callback(null, [{ address: pinned.address, family: pinned.family }])
      return callback(null, pinned.address, pinned.family)
    },
    (error: NodeJS.ErrnoException) => callback(error, "", 0)
  )
}

/** How attempts under one address policy connect: its lookup and its own socket pools. */
interface Route {
  readonly policy: AddressPolicy
  readonly lookup: LookupFunction
  readonly httpsAgent: https.Agent
  readonly httpAgent: http.Agent
}

/** What every attempt is sent with, built once by `WebhookClient.make`. */
interface ClientContext {
  readonly timeoutMs: number
  /** The operator's policy (configuration). */
  readonly strict: Route
  /**
   * D59: the same with loopback allowed, for accounts the operator granted it; separate pools,
   * so a socket opened under a grant is never reused after it is withdrawn.
   */
  readonly loopback: Route
  /** D59: ports of the service itself, never reached through a loopback grant. */
  readonly ownPorts: ReadonlySet<number>
  /** Checked URLs by grant and URL (`targetOf`). */
  readonly targets: Map<string, Target>
}

interface OutgoingRequest {
  readonly url: string
  readonly headers: Record<string, string>
  readonly body: Uint8Array
  /** D59: the subscription's account may deliver to loopback (the operator's grant). */
  readonly loopbackGranted: boolean
}

/** A URL's port, the scheme's default when it names none; undefined for a URL that does not parse. */
const portOf = (text: string): number | undefined => {
  if (!URL.canParse(text)) return undefined
  const url = new URL(text)
  return url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
}

/**
 * The route of a request: a grant opens loopback, except to the service's own ports, which stay
 * refused whatever the host name resolves to (the strict policy refuses every loopback address).
 */
const routeFor = (context: ClientContext, url: string, loopbackGranted: boolean): Route => {
  const port = portOf(url)
  return loopbackGranted && port !== undefined && !context.ownPorts.has(port) ? context.loopback : context.strict
}

/**
 * Checks a subscription URL for an account (D33, D59): the operator's policy, opened to loopback
 * when the account holds a grant, never to the service's own ports (`own_port`).
 */
const checkFor = (context: ClientContext, url: string, loopbackGranted: boolean): UrlCheck => {
  const route = routeFor(context, url, loopbackGranted)
  const checked = checkUrl(route.policy, url)
  if (checked._tag === "Refused" && loopbackGranted && route === context.strict && checkUrl(context.loopback.policy, url)._tag === "Ok") {
    return { _tag: "Refused", reason: "own_port" }
  }
  return checked
}

/**
 * The verdict on a subscription URL.
 *
 * @since 0.9.0
 * @category models
 */
export type UrlCheck = { readonly _tag: "Ok"; readonly url: URL } | { readonly _tag: "Refused"; readonly reason: UrlRefusal | "own_port" }

/**
 * Where a request goes, or why it may not: the URL's check (D33, D59) and its route, read once
 * per URL and grant and kept (`targetsMax`), since every attempt of a subscription checks the
 * same string against the same fixed policy and own ports (the check is a pure function of
 * those: no DNS; addresses are checked at connect time by the route's `lookup`). Plain fields,
 * not the checked URL object, so nothing shared can be changed by a caller.
 */
type Target =
  | { readonly _tag: "Refused"; readonly error: AttemptError }
  | {
    readonly _tag: "Ok"
    readonly route: Route
    readonly secure: boolean
    readonly protocol: string
    readonly hostname: string
    readonly port: number | undefined
    readonly path: string
  }

const targetsMax = 1_024

const targetOf = (context: ClientContext, url: string, loopbackGranted: boolean): Target => {
  const key = `${loopbackGranted ? "1" : "0"}${url}`
  const known = context.targets.get(key)
  if (known !== undefined) return known
  const checked = checkFor(context, url, loopbackGranted)
  const target: Target = checked._tag === "Refused"
    ? {
      _tag: "Refused",
      error: checked.reason === "address" || checked.reason === "own_port" || checked.reason === "scheme" ? "ssrf_refused" : "invalid_url"
    }
    : {
      _tag: "Ok",
      route: routeFor(context, url, loopbackGranted),
      secure: checked.url.protocol === "https:",
      protocol: checked.url.protocol,
      hostname: checked.url.hostname.startsWith("[") ? checked.url.hostname.slice(1, -1) : checked.url.hostname,
      port: checked.url.port === "" ? undefined : Number(checked.url.port),
      path: `${checked.url.pathname}${checked.url.search}`
    }
  if (context.targets.size >= targetsMax) context.targets.clear()
  context.targets.set(key, target)
  return target
}

/**
 * One POST; calls `done` once with its outcome (never throws). Returns how to cancel it (an
 * interrupted attempt: its request is destroyed), or nothing when it was refused before sending.
 */
const sendRequest = (context: ClientContext, request: OutgoingRequest, done: (outcome: AttemptOutcome) => void) => {
  const startedMs = performance.now()
  const finish = (outcome: Omit<AttemptOutcome, "durationMs">) => done({ ...outcome, durationMs: Math.round(performance.now() - startedMs) })
  const target = targetOf(context, request.url, request.loopbackGranted)
  if (target._tag === "Refused") return finish({ statusCode: undefined, error: target.error, retryAfter: undefined })
  let timedOut = false
  let cancelled = false
  const outgoing = (target.secure ? https : http).request({
    protocol: target.protocol,
    hostname: target.hostname,
    port: target.port,
    path: target.path,
    method: "POST",
    headers: { ...request.headers, "content-length": String(request.body.byteLength) },
    agent: target.secure ? target.route.httpsAgent : target.route.httpAgent,
    lookup: target.route.lookup
  }, (response) => {
    const statusCode = response.statusCode
    const retryAfter = response.headers["retry-after"]
    // Drain and drop the body (it is never stored), so the socket can be reused.
    response.resume()
    response.once("end", () => {
      clearTimeout(timer)
      finish({ statusCode, error: undefined, retryAfter })
    })
    response.once("error", (error) => {
      clearTimeout(timer)
      finish({ statusCode, error: timedOut ? "timeout" : classify(error), retryAfter })
    })
  })
  const timer = setTimeout(() => {
    timedOut = true
    outgoing.destroy(Object.assign(new Error("attempt timed out"), { code: "ETIMEDOUT" }))
  }, context.timeoutMs)
  outgoing.once("error", (error) => {
    clearTimeout(timer)
    finish({ statusCode: undefined, error: timedOut ? "timeout" : cancelled ? "cancelled" : classify(error), retryAfter: undefined })
  })
  outgoing.end(request.body)
  return () => {
    cancelled = true
    clearTimeout(timer)
    outgoing.destroy(Object.assign(new Error("attempt cancelled"), { code: "ABORT_ERR" }))
  }
}

/**
 * One POST as an effect that never fails. No AbortController and no span per attempt (both cost
 * CPU a delivery, issue 49): an interruption destroys the request through the canceller.
 */
const send = (context: ClientContext, request: OutgoingRequest): Effect.Effect<AttemptOutcome> =>
  Effect.callback<AttemptOutcome>((resume) => {
    const cancel = sendRequest(context, request, (outcome) => resume(Effect.succeed(outcome)))
    return cancel === undefined ? undefined : Effect.sync(cancel)
  })

/**
 * D59: the service's own ports, which a loopback grant never opens: the public and admin
 * listeners' (when configured, not 0) and those of the parts it talks to (guardian, chain, NATS,
 * PostgreSQL) when given by URL. Embedded parts on ports drawn at start are not listed: a grant is
 * for a developer's machine, and the docs say to keep receivers off those.
 *
 * @since 0.9.0
 * @category constructors
 */
export const ownPortsOf = (config: AppConfig["Service"]): ReadonlyArray<number> => {
  const urls = [
    ...[config.guardianUrl, config.rpcUrlTestnet, config.rpcUrlMainnet, config.natsUrl].flatMap((url) => Option.isSome(url) ? [url.value] : []),
    ...Option.match(config.databaseUrl, { onNone: () => [], onSome: (url) => [Redacted.value(url)] })
  ]
  const defaults: Record<string, number> = { "https:": 443, "http:": 80, "postgres:": 5432, "postgresql:": 5432, "nats:": 4222 }
  const fromUrls = urls.flatMap((text) => {
    if (!URL.canParse(text)) return []
    const url = new URL(text)
    const port = url.port === "" ? defaults[url.protocol] : Number(url.port)
    return port === undefined ? [] : [port]
  })
  return [config.port, config.adminPort, ...fromUrls].filter((port) => port > 0)
}

/**
 * @since 0.1.0
 * @category services
 */
export class WebhookClient extends Context.Service<WebhookClient, {
  readonly policy: AddressPolicy
  /** D59: checks a subscription URL for an account with or without the operator's loopback grant. */
  readonly check: (url: string, loopbackGranted: boolean) => UrlCheck
  /** Sends one POST; never fails: every outcome is an AttemptOutcome. */
  readonly send: (request: OutgoingRequest) => Effect.Effect<AttemptOutcome>
}>()("server/webhooks/WebhookClient") {
  /**
   * @since 0.1.0
   * @category constructors
   */
  static readonly make = (options: {
    readonly policy: AddressPolicy
    /** Extra trusted CA certificates (PEM), besides the system roots. */
    readonly extraCaPem?: string | undefined
    readonly resolver?: Resolver | undefined
    readonly timeoutMs?: number | undefined
    /** D59: ports of the service itself (never reached through a loopback grant). */
    readonly ownPorts?: ReadonlyArray<number> | undefined
  }) => {
    // One TLS context built once: handing `ca` to the agent instead would make it
    // concatenate every root certificate into the pool key on each request.
    const secureContext = options.extraCaPem === undefined
      ? undefined
      : tls.createSecureContext({ ca: [...tls.rootCertificates, options.extraCaPem] })
    const route = (policy: AddressPolicy): Route => ({
      policy,
      lookup: pinnedLookup(policy, options.resolver ?? systemResolver),
      // Keep-alive pools per host: a pooled socket was pinned and checked when it connected.
      httpsAgent: new https.Agent({
        ...webhookAgentOptions,
        ...(secureContext === undefined ? {} : { secureContext })
      }),
      httpAgent: new http.Agent(webhookAgentOptions)
    })
    const context: ClientContext = {
      timeoutMs: options.timeoutMs ?? attemptTimeoutMs,
      strict: route(options.policy),
      loopback: options.policy.allowLoopback ? route(options.policy) : route({ ...options.policy, allowLoopback: true }),
      ownPorts: new Set(options.ownPorts ?? []),
      targets: new Map()
    }
    return WebhookClient.of({
      policy: options.policy,
      check: (url, loopbackGranted) => checkFor(context, url, loopbackGranted),
      send: (request) => send(context, request)
    })
  }

  /**
   * From configuration: loopback flag, private allow-list, extra CA file. Settings that cannot be
   * used fail the layer with {@link WebhookClientConfigInvalid}.
   *
   * @since 0.1.0
   * @category layers
   */
  static readonly layer = Layer.effect(
    WebhookClient,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const policy = yield* Effect.try({
        try: () =>
          makeAddressPolicy({
            allowLoopback: config.webhookAllowInsecureLoopback,
            allowedPrivateCidrs: config.webhookAllowedPrivateCidrs
          }),
        catch: (cause) => new WebhookClientConfigInvalid({ message: "WEBHOOK_ALLOWED_PRIVATE_CIDRS cannot be used", cause })
      })
      const caFile = config.webhookCaFile
      const extraCaPem = Option.isSome(caFile)
        ? yield* Effect.try({
          try: () => fs.readFileSync(caFile.value, "utf8"),
          catch: (cause) => new WebhookClientConfigInvalid({ message: "WEBHOOK_CA_FILE cannot be read", cause })
        })
        : undefined
      return WebhookClient.make({ policy, extraCaPem, ownPorts: ownPortsOf(config) })
    })
  )
}
