/**
 * Where the dashboard is served from, as browsers see it: its origin (checked on
 * every state-changing request and expected in every WebAuthn answer), the
 * WebAuthn relying-party id (the origin's host name), whether its cookie is
 * `Secure`, and the mode its sessions act in.
 *
 * `DASHBOARD_ORIGIN` defaults to `http://localhost:<PORT>`: WebAuthn refuses an
 * IP address as a relying-party id, and browsers treat `localhost` as a secure
 * context without TLS. Behind a TLS proxy set it to the public `https://` origin.
 *
 * Mode (D9, D41): a dashboard session acts on testnet data (like an `hc_test_`
 * key) unless a mainnet chain is configured (`RPC_URL_MAINNET`), when it acts
 * on mainnet data.
 *
 * The explorer (`CHAIN_EXPLORER_TX_URL_TESTNET` / `_MAINNET`, the one of the sessions'
 * mode): where the page links a transaction hash, a `http(s)` URL template holding
 * `{tx_hash}`; unset, hashes are not links. A template of another form stops the start.
 *
 * @since 0.4.0
 */
import { Context, Data, Effect, Layer, Option } from "effect"
import type { Mode } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import { makeTrustedProxies, type TrustedProxies } from "../http/ClientAddress.ts"

/**
 * `TRUSTED_PROXIES` holds an entry that is no address or CIDR; the message names it.
 *
 * @since 0.5.0
 * @category errors
 */
export class TrustedProxiesInvalid extends Data.TaggedError("TrustedProxiesInvalid")<{ readonly message: string }> {}

/**
 * A chain explorer URL template that is no `http(s)` URL holding `{tx_hash}`; the message names it.
 *
 * @since 0.9.0
 * @category errors
 */
export class ExplorerUrlInvalid extends Data.TaggedError("ExplorerUrlInvalid")<{ readonly message: string }> {}

/** The explorer template as configured, if it is one (see the module's header). */
const explorerTemplate = (name: string, template: string | undefined) => {
  if (template === undefined) return Effect.succeed(undefined)
  const url = URL.parse(template.replace("{tx_hash}", "0x"))
  return template.includes("{tx_hash}") && url !== null && (url.protocol === "https:" || url.protocol === "http:")
    ? Effect.succeed(template)
    : Effect.fail(new ExplorerUrlInvalid({ message: `${name} must be an http(s) URL holding {tx_hash}, like https://explorer.example/tx/{tx_hash}` }))
}

/**
 * @since 0.4.0
 * @category services
 */
export class DashboardConfig extends Context.Service<DashboardConfig, {
  readonly origin: string
  readonly rpId: string
  readonly secureCookie: boolean
  readonly mode: Mode
  /** `TRUSTED_PROXIES`: whose `X-Forwarded-For` names the client of a sign-in step. */
  readonly trustedProxies: TrustedProxies
  /** The explorer's transaction page for the sessions' mode, `{tx_hash}` to fill in; undefined: no link. */
  readonly explorerTxUrl: string | undefined
}>()("server/dashboard/DashboardConfig") {
  static readonly layer = Layer.effect(
    DashboardConfig,
    Effect.gen(function*() {
      const app = yield* AppConfig
      const url = new URL(app.dashboardOrigin ?? `http://localhost:${app.port}`)
      // An entry that is no address or CIDR stops the start, naming it.
      const trustedProxies = yield* Effect.try({
        try: () => makeTrustedProxies(app.trustedProxies ?? []),
        catch: (error) => new TrustedProxiesInvalid({ message: error instanceof Error ? error.message : String(error) })
      })
      const mode: Mode = Option.isSome(app.rpcUrlMainnet) ? "live" : "test"
      const explorerTxUrl = yield* (mode === "live"
        ? explorerTemplate("CHAIN_EXPLORER_TX_URL_MAINNET", app.chainExplorerTxUrlMainnet)
        : explorerTemplate("CHAIN_EXPLORER_TX_URL_TESTNET", app.chainExplorerTxUrlTestnet))
      return DashboardConfig.of({
        origin: url.origin,
        rpId: url.hostname,
        secureCookie: url.protocol === "https:",
        mode,
        trustedProxies,
        explorerTxUrl
      })
    })
  )
}
