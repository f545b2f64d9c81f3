/**
 * docs/operations.md documents every environment variable the server reads,
 * and nothing it does not read.
 */
import * as fs from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { environmentVariables } from "../src/config/AppConfig.ts"

describe("configuration docs", () => {
  it("the operations table lists exactly the variables in AppConfig", () => {
    const doc = fs.readFileSync(new URL("../../../docs/operations.md", import.meta.url), "utf8")
    const section = doc.slice(doc.indexOf("## Configuration"), doc.indexOf("## The data directory"))
    const documented = [...section.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]).sort()
    assert.deepStrictEqual(documented, [...environmentVariables].sort())
  })
})
