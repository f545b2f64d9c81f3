/**
 * Every decision the repository cites resolves inside it: each `Dn` in code, tests, scripts
 * and docs has its record `docs/decisions/D<n>-<title>.md`, each record has the three sections
 * a reader expects, and the index `docs/decisions/README.md` lists every record exactly once.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const root = fileURLToPath(new URL("../../../", import.meta.url))
const decisionsDir = path.join(root, "docs", "decisions")

/** Where decisions are cited: the workspace's packages, docs, scripts and deployment files. */
const scannedDirectories = ["packages", "docs", "scripts", "deploy", ".ci"]
const scannedRootFiles = ["README.md", "Dockerfile", "docker-compose.yml", "package.json", "vitest.config.ts", "vitest.shared.ts"]
/** Generated or installed trees: nothing in them is ours to cite. */
const skippedDirectories = new Set(["node_modules", "dist", "coverage", ".vitest-tmp", ".data", ".git"])
/** Text the project writes; images and other binaries cannot cite anything. */
const textFile = /(\.(ts|tsx|js|mjs|cjs|md|sol|sh|json|ya?ml|html|css|example)|^Dockerfile|\/run)$/

const walk = (directory: string): ReadonlyArray<string> => {
  if (!fs.existsSync(directory)) return []
  return fs.readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name)
    if (entry.isDirectory()) return skippedDirectories.has(entry.name) ? [] : walk(full)
    return entry.isFile() && textFile.test(full) ? [full] : []
  })
}

/**
 * The decision numbers a text cites: every `Dn`, and every number inside a range
 * `Dm-Dn` (a citation of D21-D24 cites D22 and D23 as well).
 */
const citedDecisions = (text: string): ReadonlySet<number> => {
  const cited = new Set<number>()
  for (const match of text.matchAll(/\bD(\d{1,3})\b/g)) cited.add(Number(match[1]))
  for (const match of text.matchAll(/\bD(\d{1,3})\s*[-–]\s*D(\d{1,3})\b/g)) {
    for (let n = Number(match[1]); n <= Number(match[2]); n++) cited.add(n)
  }
  return cited
}

/** Each decision number with the files that cite it. */
const citations = (): ReadonlyMap<number, ReadonlyArray<string>> => {
  const files = [
    ...scannedDirectories.flatMap((directory) => walk(path.join(root, directory))),
    ...scannedRootFiles.map((file) => path.join(root, file)).filter((file) => fs.existsSync(file))
  ]
  const byNumber = new Map<number, Array<string>>()
  for (const file of files) {
    for (const n of citedDecisions(fs.readFileSync(file, "utf8"))) {
      const citing = byNumber.get(n) ?? []
      citing.push(path.relative(root, file))
      byNumber.set(n, citing)
    }
  }
  return byNumber
}

/** The records in docs/decisions, by number. */
const records = (): ReadonlyMap<number, string> => {
  const byNumber = new Map<number, string>()
  for (const file of fs.readdirSync(decisionsDir)) {
    const match = /^D(\d+)-[a-z0-9]+(-[a-z0-9]+)*\.md$/.exec(file)
    if (match === null) continue
    const n = Number(match[1])
    assert.isFalse(byNumber.has(n), `two records for D${n}: ${byNumber.get(n)} and ${file}`)
    byNumber.set(n, file)
  }
  return byNumber
}

describe("decision records", () => {
  it("finds a citation in a text, ranges included", () => {
    assert.deepStrictEqual([...citedDecisions("(D14); D21-D24, and D3's; not ED25519 or D2x")].sort((a, b) => a - b), [
      3,
      14,
      21,
      22,
      23,
      24
    ])
  })

  it("every Dn cited in the repository has its record in docs/decisions", () => {
    const recorded = records()
    const unresolved = [...citations()]
      .filter(([n]) => !recorded.has(n))
      .sort(([a], [b]) => a - b)
      .map(([n, files]) => `D${n} (cited in ${files.slice(0, 5).join(", ")}${files.length > 5 ? ", ..." : ""})`)
    assert.deepStrictEqual(unresolved, [], `no docs/decisions/D<n>-*.md for: ${unresolved.join("; ")}`)
  })

  it("each record is titled with its number and has Context, Decision and Consequences", () => {
    for (const [n, file] of records()) {
      const text = fs.readFileSync(path.join(decisionsDir, file), "utf8")
      assert.match(text, new RegExp(`^# D${n}: \\S`), `${file}: its first line is "# D${n}: <title>"`)
      for (const section of ["Context", "Decision", "Consequences"]) {
        assert.match(text, new RegExp(`^## ${section}$`, "m"), `${file}: no "## ${section}" section`)
      }
    }
  })

  it("the index lists every record once, in number order, and nothing else", () => {
    const index = fs.readFileSync(path.join(decisionsDir, "README.md"), "utf8")
    const listed = [...index.matchAll(/^\| \[D(\d+)\]\(([^)]+)\) \|/gm)].map((m) => ({ n: Number(m[1]), file: m[2] }))
    const expected = [...records()].sort(([a], [b]) => a - b).map(([n, file]) => ({ n, file }))
    assert.deepStrictEqual(listed, expected)
  })
})
