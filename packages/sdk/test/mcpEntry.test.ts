/**
 * The MCP server stays out of an SDK application: `@pps/sdk` declares no dependency on
 * `@pps/mcp`, Effect's MCP modules' Node server or the MCP SDK, and importing its main entry
 * loads none of them (every module a fresh Node process resolves while importing it is
 * recorded, and checked). `pps mcp` finds the server package only when it runs.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"
import * as McpEntry from "../src/cli/McpEntry.ts"

const sdkRoot = path.resolve(import.meta.dirname, "..")

/** What an MCP server brings: none of it may load with the SDK. */
const mcpModules = [/\/packages\/mcp\//, /@pps\/mcp/, /\/effect\/(dist|src)\/ai\/Mcp/, /@modelcontextprotocol/, /@effect\/platform-node\//]

/** Every module URL a fresh Node process resolves while it imports `entry`. */
const modulesLoadedBy = (entry: string): Promise<ReadonlyArray<string>> => {
  const script = `
    import { registerHooks } from "node:module"
    const seen = []
    registerHooks({ resolve(specifier, context, next) { const resolved = next(specifier, context); seen.push(resolved.url); return resolved } })
    await import(${JSON.stringify(pathToFileURL(entry).href)})
    process.stdout.write(JSON.stringify(seen))
  `
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ["--disable-warning=ExperimentalWarning", "--input-type=module", "-e", script], { timeout: 30_000 }, (error, stdout) =>
      error === null ? resolve(JSON.parse(stdout) as ReadonlyArray<string>) : reject(error)))
}

describe("the SDK without its MCP server", { timeout: 30_000 }, () => {
  it("declares no dependency on it", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(sdkRoot, "package.json"), "utf8")) as Record<string, Record<string, string> | undefined>
    const declared = ["dependencies", "peerDependencies", "optionalDependencies"].flatMap((field) => Object.keys(manifest[field] ?? {}))
    expect(declared).toContain("effect")
    for (const name of declared) expect(mcpModules.some((pattern) => pattern.test(`/${name}/`)), name).toBe(false)
  })

  it("loads none of it when an application imports @pps/sdk", async () => {
    const loaded = await modulesLoadedBy(path.join(sdkRoot, "src/index.ts"))
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
