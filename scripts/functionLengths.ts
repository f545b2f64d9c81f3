// Lists the longest functions in the packages whose core must stay readable, and fails when
// one is longer than the limit.
//
// Why: a function a screen long can be read and changed by someone who did not write it; a
// thousand-line closure that captures twenty services cannot. A function here is any function
// declaration, function expression, arrow function, method, accessor or constructor, measured from
// its first line to its last; a nested function counts on its own and inside its parent, so a
// layer that holds its logic in closures is as long as the closures it holds.
//
// Usage: node scripts/functionLengths.ts [--top N] [--max LINES] [--check]
//   --check exits 1 when any function is longer than --max (default 100).
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

/** The folders the limit applies to: the server's, the guardian's, the SDK's and the MCP server's sources. */
const checkedRoots = ["packages/server/src", "packages/guardian/src", "packages/sdk/src", "packages/mcp/src"]
/** The limit, in lines: a function longer than this is listed as over it. */
const functionLinesMaxDefault = 100

interface FunctionLength {
  readonly file: string
  readonly line: number
  readonly name: string
  readonly lines: number
}

const sourceFiles = (root: string): ReadonlyArray<string> => {
  if (!fs.existsSync(root)) return []
  return fs.readdirSync(root, { recursive: true, encoding: "utf8" })
    .filter((entry) => /\.tsx?$/.test(entry) && !entry.endsWith(".d.ts"))
    .map((entry) => path.join(root, entry))
    .sort()
}

const isFunctionLike = (node: ts.Node): node is ts.FunctionLikeDeclaration =>
  ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) ||
  ts.isMethodDeclaration(node) || ts.isGetAccessorDeclaration(node) ||
  ts.isSetAccessorDeclaration(node) || ts.isConstructorDeclaration(node)

/** A readable name: the declared one, else the variable, property or call it is passed to. */
const nameOf = (node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string => {
  if (node.name !== undefined) return node.name.getText(source)
  if (ts.isConstructorDeclaration(node)) return "constructor"
  const parent = node.parent
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(source)
  }
  if (ts.isCallExpression(parent)) {
    const callee = parent.expression.getText(source)
    const label = parent.arguments.find(ts.isStringLiteral)
    return label === undefined ? `(argument of ${callee})` : `(${callee} ${label.text})`
  }
  return "(anonymous)"
}

const functionLengths = (file: string): ReadonlyArray<FunctionLength> => {
  const text = fs.readFileSync(file, "utf8")
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const found: Array<FunctionLength> = []
  const visit = (node: ts.Node): void => {
    if (isFunctionLike(node)) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line
      found.push({ file, line: first + 1, name: nameOf(node, source), lines: last - first + 1 })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

const numberFlag = (args: ReadonlyArray<string>, flag: string, fallback: number): number => {
  const at = args.indexOf(flag)
  if (at === -1) return fallback
  const value = Number(args[at + 1])
  if (!Number.isInteger(value) || value < 1) {
    console.error(`functionLengths: ${flag} takes a positive whole number`)
    process.exit(2)
  }
  return value
}

const main = (args: ReadonlyArray<string>): void => {
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
  const top = numberFlag(args, "--top", 10)
  const linesMax = numberFlag(args, "--max", functionLinesMaxDefault)
  const all = checkedRoots
    .flatMap((dir) => sourceFiles(path.join(root, dir)))
    .flatMap(functionLengths)
    .sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line)
  const over = all.filter((entry) => entry.lines > linesMax)
  console.log(`The ${Math.min(top, all.length)} longest functions in ${checkedRoots.join(", ")}:`)
  for (const entry of all.slice(0, Math.max(top, args.includes("--check") ? over.length : 0))) {
    const where = `${path.relative(root, entry.file)}:${entry.line}`
    console.log(`${String(entry.lines).padStart(6)}  ${where}  ${entry.name}`)
  }
  console.log(`${over.length} function(s) over ${linesMax} lines, of ${all.length}.`)
  // exitCode, not exit(): exit() can cut off what is still buffered for a slow reader of the pipe.
  if (args.includes("--check") && over.length > 0) process.exitCode = 1
}

main(process.argv.slice(2))
