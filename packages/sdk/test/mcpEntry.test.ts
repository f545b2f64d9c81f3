/**
 * The MCP server stays out of an SDK application: `@pps/sdk` declares no dependency on
 * `@pps/mcp`, Effect's MCP modules' Node server or the MCP SDK, and importing its main entry
 * loads none of them (every module a fresh Node process loads while importing it is recorded,
 * and checked: scripts/modulesLoadedBy.ts). `pps mcp` finds the server package only when it runs.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { modulesLoadedBy } from "../../../scripts/modulesLoadedBy.ts"
import * as McpEntry from "../src/cli/McpEntry.ts"

const sdkRoot = path.resolve(import.meta.dirname, "..")

/** What an MCP server brings: none of it may load with the SDK. */
const mcpModules = [/\/packages\/mcp\//, /@pps\/mcp/, /\/effect\/(dist|src)\/ai\/Mcp/, /@modelcontextprotocol/, /@effect\/platform-node\//]

describe("the SDK without its MCP server", { timeout: 30_000 }, () => {
  it("declares no dependency on it", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(sdkRoot, "package.json"), "utf8")) as Record<string, Record<string, string> | undefined>
    const declared = ["dependencies", "peerDependencies", "optionalDependencies"].flatMap((field) => Object.keys(manifest[field] ?? {}))
    expect(declared).toContain("effect")
    for (const name of declared) expect(mcpModules.some((pattern) => pattern.test(`/${name}/`)), name).toBe(false)
  })

  it("loads none of it when an application imports @pps/sdk", async () => {
    const loaded = await modulesLoadedBy([path.join(sdkRoot, "src/index.ts")])
    // The recording works: the SDK's own modules and Effect's are there.
    expect(loaded.some((url) => url.endsWith("/packages/sdk/src/Pps.ts"))).toBe(true)
    expect(loaded.some((url) => /\/effect\/dist\//.test(url))).toBe(true)
    expect(loaded.filter((url) => mcpModules.some((pattern) => pattern.test(url)))).toEqual([])
    // The command line's MCP module is not the SDK's entry either.
    expect(loaded.some((url) => url.endsWith("/cli/McpEntry.ts"))).toBe(false)
  })

  it("pps mcp finds the server package when it runs, by name", async () => {
    expect(McpEntry.packageName).toBe("@pps/mcp")
    const entry = await McpEntry.load()
    expect(typeof entry.serve).toBe("function")
  })
})
