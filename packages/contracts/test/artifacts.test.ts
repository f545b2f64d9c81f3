/**
 * The committed artifacts are exactly what the pinned solc makes of the committed sources,
 * and nothing the server imports pulls solc in.
 */
import { readdir, readFile } from "node:fs/promises"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { compileArtifacts, deployableContracts } from "../scripts/build.ts"

const packageDirectory = fileURLToPath(new URL("..", import.meta.url))

describe("artifacts", () => {
  it("match a fresh compile of contracts/src (run `pnpm --filter @pps/contracts build` if not)", async () => {
    const modules = await compileArtifacts()
    expect([...modules.keys()].sort()).toEqual(deployableContracts.map((name) => `${name}.ts`).sort())
    for (const [fileName, content] of modules) {
      const committed = await readFile(join(packageDirectory, "src", "artifacts", fileName), "utf8")
      expect(committed, `${fileName} drifted from its source`).toBe(content)
    }
  }, 60_000)

  it("src never imports solc", async () => {
    const files = await readdir(join(packageDirectory, "src"), { recursive: true })
    const sources = files.filter((file) => file.endsWith(".ts"))
    expect(sources.length).toBeGreaterThan(5)
    for (const file of sources) {
      const text = await readFile(join(packageDirectory, "src", file), "utf8")
      expect(text, file).not.toMatch(/from\s+["']solc["']|import\(\s*["']solc["']\s*\)|require\(\s*["']solc["']\s*\)/)
    }
  })
})
