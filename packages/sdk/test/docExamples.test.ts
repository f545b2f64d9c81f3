/**
 * Every TypeScript example of the SDK's documentation compiles under `strict` against the
 * workspace's packages, so a change of the SDK's types cannot leave a documented example
 * behind (an example in docs/sdk.md once failed with TS2345 under strict).
 *
 * The examples are the ```ts and ```typescript blocks of README.md, docs/*.md and
 * packages/sdk/README.md that import `@pps/sdk`, and every such block of the SDK's own
 * pages (docs/sdk.md, packages/sdk/README.md) whatever it imports. A block meant as a
 * fragment is skipped when the line before it is `<!-- not compiled: <reason> -->`.
 * Each block is written to a file of its own (a module, so names do not clash across
 * blocks) in a directory inside packages/sdk (so `effect`, `@pps/api` and `@types/node`
 * resolve as they do for the SDK), with `@pps/sdk` mapped to the SDK's sources, and the
 * files are type-checked together by the TypeScript compiler with the workspace's compiler
 * options (tsconfig.base.json: `strict`, `exactOptionalPropertyTypes`,
 * `noUncheckedIndexedAccess`, ...), unused names allowed: an example may name a result it
 * does not use.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const root = resolve(sdk, "../..")

/** The pages whose every TypeScript block is SDK usage. */
const sdkPages = new Set(["docs/sdk.md", "packages/sdk/README.md"])

interface Example {
  /** Where it is: `docs/sdk.md:42` (the line of the opening fence). */
  readonly source: string
  readonly code: string
}

const fence = /^```(ts|typescript)\s*$/
const skipMarker = /^<!--\s*not compiled:\s*\S.*-->\s*$/

/** The blocks of one page that are examples to compile. */
const examplesOf = (page: string, text: string): ReadonlyArray<Example> => {
  const lines = text.split("\n")
  const examples: Array<Example> = []
  for (let index = 0; index < lines.length; index++) {
    if (!fence.test(lines[index]!)) continue
    const start = index
    const body: Array<string> = []
    for (index++; index < lines.length && !/^```\s*$/.test(lines[index]!); index++) body.push(lines[index]!)
    const code = body.join("\n")
    const skipped = start > 0 && skipMarker.test(lines[start - 1]!.trim())
    const isSdkUsage = sdkPages.has(page) || /from\s+"@pps\/sdk"/.test(code)
    if (isSdkUsage && !skipped) examples.push({ source: `${page}:${start + 1}`, code })
  }
  return examples
}

const pages = async (): Promise<ReadonlyArray<string>> => {
  const docs = (await readdir(join(root, "docs"))).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
  return ["README.md", ...docs, "packages/sdk/README.md"]
}

/** A module of its own: without an import or export, a block would be a script sharing one scope with the others. */
const asModule = (code: string): string => `${code}\n\nexport {}\n`

/**
 * Type-checks the files of a directory as one program with the workspace's options; answers
 * each file's diagnostics as text (empty when it compiles).
 */
const typeCheck = (directory: string, files: ReadonlyArray<string>): ReadonlyMap<string, string> => {
  const base = ts.getParsedCommandLineOfConfigFile(join(root, "tsconfig.base.json"), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"))
    }
  })
  if (base === undefined) throw new Error("tsconfig.base.json did not parse")
  const options: ts.CompilerOptions = {
    ...base.options,
    strict: true,
    noUnusedLocals: false,
    noUnusedParameters: false,
    noEmit: true,
    paths: { "@pps/sdk": [join(sdk, "src/index.ts")] }
  }
  const program = ts.createProgram({ rootNames: files.map((file) => join(directory, file)), options })
  const host: ts.FormatDiagnosticsHost = {
    getCanonicalFileName: (name) => name,
    getCurrentDirectory: () => directory,
    getNewLine: () => "\n"
  }
  const errors = new Map<string, string>()
  for (const file of files) {
    const sourceFile = program.getSourceFile(join(directory, file))
    const diagnostics = sourceFile === undefined
      ? []
      : [...program.getSyntacticDiagnostics(sourceFile), ...program.getSemanticDiagnostics(sourceFile)]
    errors.set(file, ts.formatDiagnostics(diagnostics, host))
  }
  return errors
}

/** A block that must not compile: proves the check reports an error when there is one. */
const broken: Example = {
  source: "(the check's own broken example)",
  code: `import { Pps } from "@pps/sdk"\nconst pps = new Pps({ apiKey: "hc_test_x" })\nexport const id: string = (await pps.transfers.create({ to: "@bob", amount: "1" })).transfer_id`
}

describe("the documentation's TypeScript examples", { timeout: 120_000 }, () => {
  let directory: string
  let examples: ReadonlyArray<Example>
  let results: ReadonlyMap<string, string>
  const fileOf = (index: number) => `example${index}.ts`

  beforeAll(async () => {
    examples = (await Promise.all((await pages()).map(async (page) => examplesOf(page, await readFile(join(root, page), "utf8"))))).flat()
    directory = await mkdtemp(join(sdk, ".doc-examples-"))
    const all = [...examples, broken]
    await Promise.all(all.map((example, index) => writeFile(join(directory, fileOf(index)), asModule(example.code))))
    results = typeCheck(directory, all.map((_, index) => fileOf(index)))
  }, 300_000)

  afterAll(async () => {
    if (directory !== undefined) await rm(directory, { recursive: true, force: true })
  })

  it("finds the examples of the SDK's pages", () => {
    const sources = examples.map((example) => example.source.replace(/:\d+$/, ""))
    expect(sources).toContain("docs/sdk.md")
    expect(sources).toContain("packages/sdk/README.md")
    expect(sources).toContain("docs/api.md")
  })

  it("reports a type error in an example (the check can fail)", () => {
    // The create answers a CreatedTransfer: `transfer_id` is on its `transfer`, not on it.
    expect(results.get(fileOf(examples.length))).toMatch(/error TS2339/)
  })

  it("compiles every example under strict", () => {
    const failures = examples.flatMap((example, index) => {
      const text = results.get(fileOf(index)) ?? "not checked"
      return text === "" ? [] : [`${example.source} (${fileOf(index)})\n${text}`]
    })
    expect(failures.join("\n")).toBe("")
  })
})
