/**
 * `@pps/mcp`: the Model Context Protocol server of the Private Payments Service, which
 * `pps mcp` runs (docs/mcp.md). An AI agent's MCP client (Claude Desktop, an IDE, an agent
 * framework) reaches the holder's payments through its tools: `pay` (sealed on this machine),
 * `get_transfer`, `list_transfers`, and for an agent's key `get_spend_policy` and
 * `wait_for_approval`, for an account's key with its key file `balance`. Over stdio, or over
 * Streamable HTTP on a loopback address behind a bearer token and a Host/Origin check.
 *
 * A package of its own: `@pps/sdk` does not depend on it, so an application that imports the
 * SDK neither installs nor loads it.
 *
 * @since 0.1.0
 */

/**
 * Runs the server for `pps mcp` (the SDK's `McpEntry.Entry`).
 *
 * @since 0.1.0
 */
export { serve } from "./Serve.ts"

/**
 * The tools and toolkits, with their schemas.
 *
 * @since 0.1.0
 */
export * as Tools from "./Tools.ts"
