/**
 * `pps mcp` as an MCP client runs it: the command line (`packages/sdk/src/cli.ts mcp`) as a
 * child process, reached by the official TypeScript SDK's client (`@modelcontextprotocol/sdk`)
 * over stdio, or started with `--http` and reached over Streamable HTTP with the bearer token it
 * printed. Only PATH (and the compile cache) of the test's environment is passed on.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { childEnvironment, childNodeFlags } from "../../../../scripts/childEnvironment.ts"
import { repositoryRoot } from "../../../sdk/test/support/server.ts"

const cliArguments = [...childNodeFlags(), path.join(repositoryRoot, "packages/sdk/src/cli.ts"), "mcp"]

/** What a tool call answered: its text, whether it is a tool error, its structured content. */
export interface Called {
  readonly isError: boolean
  readonly text: string
  readonly structured: Record<string, unknown> | undefined
}

export interface Connected {
  readonly client: Client
  /** What the server printed on stderr so far. */
  readonly stderr: () => string
  readonly call: (name: string, args?: Record<string, unknown>) => Promise<Called>
  readonly close: () => Promise<void>
}

const callWith = (client: Client) => async (name: string, args: Record<string, unknown> = {}): Promise<Called> => {
  const result = await client.callTool({ name, arguments: args })
  const content = Array.isArray(result.content) ? result.content : []
  const text = content.map((part: { readonly type: string; readonly text?: string }) => part.type === "text" ? part.text ?? "" : "").join("")
  const structured = result.structuredContent as Record<string, unknown> | undefined
  return { isError: result.isError === true, text, structured }
}

/** `pps mcp` over stdio, as Claude Desktop starts it, with `env` (PPS_API_KEY, PPS_BASE_URL, HOME). */
export const connectStdio = async (env: Readonly<Record<string, string>>): Promise<Connected> => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: cliArguments,
    env: { ...childEnvironment(), ...env },
    cwd: repositoryRoot,
    stderr: "pipe"
  })
  const output: Array<string> = []
  transport.stderr?.on("data", (chunk: Buffer) => output.push(chunk.toString()))
  const client = new Client({ name: "pps-mcp-test", version: "1.0.0" })
  await client.connect(transport)
  return { client, stderr: () => output.join(""), call: callWith(client), close: () => client.close() }
}

export interface HttpServer {
  readonly url: string
  readonly token: string
  readonly stderr: () => string
  readonly stop: () => Promise<void>
}

/** `pps mcp --http 127.0.0.1:PORT`, once it printed where it is and its token. */
export const startHttp = async (env: Readonly<Record<string, string>>, port: number): Promise<HttpServer> => {
  const child = spawn(process.execPath, [...cliArguments, "--http", `127.0.0.1:${port}`], {
    cwd: repositoryRoot,
    env: { ...childEnvironment(), ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const output: Array<string> = []
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const started = new Promise<{ url: string; token: string }>((resolve, reject) => {
    child.stderr.on("data", (chunk: Buffer) => {
      output.push(chunk.toString())
      const text = output.join("")
      const url = /Streamable HTTP at (\S+)/.exec(text)?.[1]
      const token = /bearer token (\S+)/.exec(text)?.[1]
      if (url !== undefined && token !== undefined) resolve({ url, token })
    })
    void exited.then((code) => reject(new Error(`pps mcp --http exited (${code}) before it listened:\n${output.join("")}`)))
  })
  const { url, token } = await started
  return {
    url,
    token,
    stderr: () => output.join(""),
    stop: async () => {
      child.kill("SIGTERM")
      await exited
    }
  }
}

/** The official client over Streamable HTTP, with the bearer token. */
export const connectHttp = async (server: HttpServer): Promise<Connected> => {
  const transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers: { authorization: `Bearer ${server.token}` } }
  })
  const client = new Client({ name: "pps-mcp-test", version: "1.0.0" })
  await client.connect(transport)
  return { client, stderr: server.stderr, call: callWith(client), close: () => client.close() }
}
