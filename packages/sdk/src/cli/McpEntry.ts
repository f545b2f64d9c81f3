/**
 * What `pps mcp` hands the MCP server, and how it finds it. The server is its own package,
 * `@pps/mcp` (Effect's `McpServer`, a Node HTTP server): nothing of it is a dependency of
 * `@pps/sdk`, so an application that imports the SDK neither installs nor loads it. `pps mcp`
 * resolves `@pps/mcp` from where `@pps/sdk` is installed, only when the command runs, and says
 * how to install it when it is missing. The command line does what every `pps` command does
 * (the environment, the account of the key, its key file) and hands over a ready `Pps`.
 *
 * @since 0.5.0
 */
import type { Pps } from "../Pps.ts"
import { loadNamed } from "./namedPackage.ts"

/**
 * Whose key the server holds: an agent's (it pays under its spend policy, sealed to its
 * owner's key) or an account's (with its key file: balances decrypted on this machine).
 *
 * @since 0.5.0
 * @category models
 */
export interface Holder {
  readonly kind: "agent" | "account"
  readonly accountId: string
  readonly handle: string
  /** The key's mode (its prefix): which x402 network `fetch_paid` pays on (D57). */
  readonly mode: "test" | "live"
}

/**
 * Where the server speaks MCP: stdio (the client started it), or Streamable HTTP on a
 * loopback address (`pps mcp --http 127.0.0.1:PORT`).
 *
 * @since 0.5.0
 * @category models
 */
export type Transport =
  | { readonly kind: "stdio" }
  | { readonly kind: "http"; readonly host: "127.0.0.1" | "localhost"; readonly port: number }

/**
 * What the server is given.
 *
 * @since 0.5.0
 * @category models
 */
export interface Settings {
  /** The client of the holder's key: with the key file's key pair for an account. */
  readonly pps: Pps
  readonly holder: Holder
  readonly transport: Transport
  /** Where the server says how to reach it (stderr): never stdout, which stdio's protocol owns. */
  readonly announce: (line: string) => void
}

/**
 * The server's entry point: serves until the client leaves (stdio: stdin ends) or the process is
 * told to stop (SIGINT, SIGTERM), then resolves.
 *
 * @since 0.5.0
 * @category models
 */
export interface Entry {
  readonly serve: (settings: Settings) => Promise<void>
}

/**
 * The package `pps mcp` loads. A variable, so that neither TypeScript nor a bundler follows it
 * from the SDK: the SDK does not depend on it.
 *
 * @since 0.5.0
 * @category constants
 */
export const packageName: string = "@pps/mcp"

/** Why `pps mcp` cannot start: `@pps/mcp` is not installed where `@pps/sdk` is. */
export class McpMissing extends Error {
  override readonly name = "McpMissing"
}

const isEntry = (value: unknown): value is Entry =>
  typeof value === "object" && value !== null && "serve" in value && typeof value.serve === "function"

/**
 * Loads `@pps/mcp`; fails with `McpMissing` when it is not installed, or is not an entry point
 * of this shape.
 *
 * @since 0.5.0
 * @category loading
 */
export const load = (): Promise<Entry> =>
  loadNamed(packageName, isEntry, (reason) =>
    new McpMissing(
      reason === "notInstalled"
        ? `the MCP server is the package ${packageName}, not installed next to @pps/sdk: npm install ${packageName}`
        : `${packageName} does not export serve(settings): install the version that goes with this @pps/sdk`
    ))
