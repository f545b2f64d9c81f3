/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`, server mode) against
 * `pps mcp --http`. The suite connects with a URL only, and the server answers nothing without
 * its bearer token, so the suite reaches it through a hop on loopback that plays an
 * authenticated client: it adds the token, and names the server's own address where the suite
 * named the hop's (Host, Origin). Any other Host or Origin (the DNS-rebinding scenario's
 * `evil.example.com`) passes unchanged, so the server's check still decides.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import { createRequire } from "node:module"
import * as os from "node:os"
import type * as net from "node:net"
import * as path from "node:path"

/** The suite's command line, resolved from this package's devDependency. */
const suiteBin = path.join(path.dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/conformance/package.json")), "dist/index.js")

export interface BearerHop {
  readonly url: string
  readonly close: () => Promise<void>
}

/** A hop in front of `pps mcp --http` on `port` that authenticates as the holder's MCP client would. */
export const startBearerHop = async (port: number, token: string): Promise<BearerHop> => {
  let own = ""
  const hop = http.createServer((request, response) => {
    const headers = { ...request.headers, authorization: `Bearer ${token}` }
    if (headers.host === own) headers.host = `127.0.0.1:${port}`
    if (headers.origin === `http://${own}`) headers.origin = `http://127.0.0.1:${port}`
    const upstream = http.request({ host: "127.0.0.1", port, method: request.method, path: request.url, headers }, (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(response)
    })
    upstream.on("error", () => response.destroy())
    request.pipe(upstream)
  })
  const hopPort = await new Promise<number>((resolve) => hop.listen(0, "127.0.0.1", () => resolve((hop.address() as net.AddressInfo).port)))
  own = `127.0.0.1:${hopPort}`
  return {
    url: `http://${own}/mcp`,
    close: () => {
      hop.closeAllConnections()
      return new Promise((resolve) => hop.close(() => resolve()))
    }
  }
}

/** One check of a scenario, as the suite reports it. */
export interface Check {
  readonly id: string
  readonly status: string
  readonly errorMessage?: string
}

/** Runs one server scenario of the suite against `url`; its checks, and whether the suite passed it (exit 0). */
export const runScenario = async (
  url: string,
  scenario: string
): Promise<{ readonly passed: boolean; readonly checks: ReadonlyArray<Check>; readonly output: string }> => {
  const results = fs.mkdtempSync(path.join(os.tmpdir(), "pps-mcp-conformance-"))
  try {
    const { passed, output } = await new Promise<{ passed: boolean; output: string }>((resolve) => {
      execFile(process.execPath, [suiteBin, "server", "--url", url, "--scenario", scenario, "--output-dir", results], { timeout: 30_000 }, (error, stdout, stderr) =>
        resolve({ passed: error === null, output: `${stdout}${stderr}` }))
    })
    // The suite writes each scenario's checks to <results>/server-<scenario>-<time>/checks.json.
    const written = fs.readdirSync(results).map((entry) => path.join(results, entry, "checks.json")).filter((file) => fs.existsSync(file))
    const checks = written.flatMap((file): ReadonlyArray<Check> => JSON.parse(fs.readFileSync(file, "utf8")))
    return { passed, checks, output }
  } finally {
    fs.rmSync(results, { recursive: true, force: true })
  }
}
