/**
 * The server (D46): Effect's `McpServer` with the holder's toolkit, over stdio (the MCP client
 * started `pps mcp`) or over Streamable HTTP on a loopback address behind `HttpGuard`. Logs go
 * to stderr at warning level and above, never to stdout: over stdio, stdout carries the
 * protocol's messages and nothing else.
 *
 * @since 0.1.0
 */
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeStdio from "@effect/platform-node-shared/NodeStdio"
import type * as McpEntry from "@pps/sdk/McpEntry"
import { Cause, Effect, Exit, Layer, Logger, References } from "effect"
import { McpProtocol, McpServer } from "effect/ai"
import { HttpRouter } from "effect/http"
import manifest from "../package.json" with { type: "json" }
import * as Handlers from "./Handlers.ts"
import * as HttpGuard from "./HttpGuard.ts"
import { AccountTools, AgentTools } from "./Tools.ts"

/** Where a Streamable HTTP client posts its messages. */
const httpPath = "/mcp"

/**
 * The protocol revisions served: each one with sessions (initialize first), newest first.
 * `2026-07-28` (sessionless) is left out until the clients agents use speak it.
 */
const protocols = [McpProtocol.v2025_11_25, McpProtocol.v2025_06_18, McpProtocol.v2025_03_26, McpProtocol.v2024_11_05] as const

/** What an MCP client shows the model about the server as a whole. */
const instructions = (holder: McpEntry.Holder): string =>
  [
    `Payments of ${holder.handle} through the Private Payments Service.`,
    "Amounts and memos are sealed on this machine; the service never reads them.",
    holder.kind === "agent"
      ? "You pay under your owner's spend policy (get_spend_policy): above its approval threshold a payment is held until the owner decides (wait_for_approval)."
      : "balance decrypts the account's balances on this machine.",
    "Retry a pay that failed or got no answer with the idempotency_key it answered: it never pays twice."
  ].join(" ")

/** The server's name, version and instructions, and the holder's tools with their handlers. */
const serverOptions = (settings: McpEntry.Settings) => ({
  name: "pps",
  version: manifest.version,
  instructions: instructions(settings.holder),
  protocols,
  registrations: settings.holder.kind === "agent"
    ? McpServer.toolkit(AgentTools).pipe(Layer.provide(Handlers.agentHandlers(settings)))
    : McpServer.toolkit(AccountTools).pipe(Layer.provide(Handlers.accountHandlers(settings)))
})

/** Logs on stderr, warnings and errors only (a tool's parameters are never logged). */
const logging = Layer.mergeAll(
  Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)]),
  Layer.succeed(References.MinimumLogLevel, "Warn")
)

const stdio = (settings: McpEntry.Settings): Layer.Layer<McpServer.McpServer> =>
  McpServer.layerStdio(serverOptions(settings)).pipe(Layer.provide(NodeStdio.layer), Layer.orDie)

/** The HTTP server on `address`, with its guard; says where it is and its token once it listens. */
const http = (settings: McpEntry.Settings, address: Extract<McpEntry.Transport, { readonly kind: "http" }>) => {
  const token = HttpGuard.newToken()
  const app = Layer.mergeAll(
    McpServer.layerHttp({
      ...serverOptions(settings),
      path: httpPath,
      allowedOrigins: HttpGuard.allowedOrigins(address),
      // A client ends its session with DELETE; only a holder of the token gets that far.
      allowSessionTermination: true
    }),
    HttpGuard.layer(address, token)
  )
  const listening = Effect.sync(() => {
    settings.announce(`pps mcp: Streamable HTTP at http://${address.host}:${address.port}${httpPath}\n`)
    settings.announce(`pps mcp: bearer token ${token}\n`)
  })
  return HttpRouter.serve(app, { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provide(NodeHttpServer.layer(createServer, { host: address.host, port: address.port })),
    Layer.flatMap(() => Layer.effectDiscard(listening))
  )
}

/** Resolves when the process is told to stop. */
const stopSignal = Effect.callback<void>((resume) => {
  const stop = () => resume(Effect.void)
  process.once("SIGINT", stop)
  process.once("SIGTERM", stop)
  return Effect.sync(() => {
    process.off("SIGINT", stop)
    process.off("SIGTERM", stop)
  })
})

/**
 * Serves MCP for the holder until the client leaves (stdio: stdin ends) or SIGINT/SIGTERM; a
 * server that cannot start (the port is taken) rejects with why.
 *
 * @since 0.1.0
 * @category running
 */
export const serve = async (settings: McpEntry.Settings): Promise<void> => {
  const transport = settings.transport
  const server: Effect.Effect<never, unknown> = transport.kind === "stdio" ? Layer.launch(stdio(settings)) : Layer.launch(http(settings, transport))
  const exit = await Effect.runPromiseExit(Effect.raceFirst(server, stopSignal).pipe(Effect.provide(logging)))
  // Stdin's end interrupts the stdio server: that is its normal end.
  if (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)) throw Cause.squash(exit.cause)
}
