/**
 * The last step of `pnpm --dir packages/sdk run build`: makes `dist/` a package that installs
 * alone (D48). The workspace packages the SDK imports (`@pps/api`, the contract; `@pps/crypto`) are not
 * on a registry, so their built `dist/` is copied under the SDK's own, at a private path
 * (`dist/bundled/<name>/`, outside the package's `exports`), and every import of them in the SDK's
 * emitted JavaScript and declarations is rewritten to a relative path there. The SDK then depends
 * on third-party packages only, each of which it declares (checked here: each dependency of a
 * bundled package is the SDK's dependency at the same version, or its peer dependency from it on).
 *
 * Fails (exit 1) when an import of a workspace package is left, or a dependency is undeclared.
 */
import * as fs from "node:fs"
import * as path from "node:path"

const sdkRoot = path.resolve(import.meta.dirname, "..")
const packagesRoot = path.resolve(sdkRoot, "..")
const dist = path.join(sdkRoot, "dist")

/** The workspace packages bundled: their name and their directory under packages/. */
const bundled: ReadonlyArray<{ readonly name: string; readonly directory: string }> = [
  { name: "@pps/api", directory: "api" },
  { name: "@pps/crypto", directory: "crypto" }
]

interface Manifest {
  readonly dependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
}

const manifestOf = (directory: string): Manifest =>
  JSON.parse(fs.readFileSync(path.join(directory, "package.json"), "utf8")) as Manifest

/** The `.js` and `.d.ts` files under a directory, recursively. */
const emittedFiles = (directory: string): ReadonlyArray<string> =>
  fs.readdirSync(directory, { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".js") || file.endsWith(".d.ts"))
    .map((file) => path.join(directory, file))

/** `from "…"`, `import "…"`, `import("…")` and `export … from "…"`: the module specifiers of a file. */
const specifier = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])([^"']+)\2/g

/** Where a workspace specifier (`@pps/api`, `@pps/api/Errors`) points in dist/, or undefined for any other. */
const bundledTarget = (module: string): string | undefined => {
  for (const { name, directory } of bundled) {
    if (module === name) return path.join(dist, "bundled", directory, "index.js")
    if (module.startsWith(`${name}/`)) return path.join(dist, "bundled", directory, `${module.slice(name.length + 1)}.js`)
  }
  return undefined
}

const rewrite = (file: string): void => {
  const text = fs.readFileSync(file, "utf8")
  const rewritten = text.replace(specifier, (whole, lead: string, quote: string, module: string) => {
    const target = bundledTarget(module)
    if (target === undefined) return whole
    if (!fs.existsSync(target.endsWith(".js") && file.endsWith(".d.ts") ? target.replace(/\.js$/, ".d.ts") : target)) {
      throw new Error(`${path.relative(sdkRoot, file)} imports ${module}, which the build of its package did not emit`)
    }
    const relative = path.relative(path.dirname(file), target).split(path.sep).join("/")
    return `${lead}${quote}${relative.startsWith(".") ? relative : `./${relative}`}${quote}`
  })
  if (rewritten !== text) fs.writeFileSync(file, rewritten)
}

/**
 * Every import left of a workspace package other than the SDK itself (its documentation's
 * examples import `@pps/sdk`): none may be, nothing would install it.
 */
const workspaceImports = (file: string): ReadonlyArray<string> =>
  [...fs.readFileSync(file, "utf8").matchAll(specifier)]
    .map((match) => match[3] ?? "")
    .filter((module) => module.startsWith("@pps/") && module !== "@pps/sdk" && !module.startsWith("@pps/sdk/"))

const main = () => {
  if (!fs.existsSync(dist)) throw new Error("dist/ is missing: run tsc -p tsconfig.build.json first")
  fs.rmSync(path.join(dist, "bundled"), { recursive: true, force: true })
  for (const { directory } of bundled) {
    const built = path.join(packagesRoot, directory, "dist")
    if (!fs.existsSync(built)) throw new Error(`packages/${directory}/dist is missing: build it first`)
    fs.cpSync(built, path.join(dist, "bundled", directory), { recursive: true })
  }
  const files = emittedFiles(dist)
  for (const file of files) rewrite(file)
  const left = files.flatMap((file) => workspaceImports(file).map((module) => `${path.relative(sdkRoot, file)}: ${module}`))
  if (left.length > 0) throw new Error(`imports of workspace packages left in dist/:\n${left.join("\n")}`)

  const sdk = manifestOf(sdkRoot)
  const declared = { ...sdk.peerDependencies, ...sdk.dependencies }
  // A dependency the SDK shares with its user's program (effect) is a peer, from that version on.
  const undeclared = bundled.flatMap(({ name, directory }) =>
    Object.entries(manifestOf(path.join(packagesRoot, directory)).dependencies ?? {})
      .filter(([dependency, version]) => sdk.dependencies?.[dependency] !== version && sdk.peerDependencies?.[dependency] !== `^${version}`)
      .map(([dependency, version]) => `${name} needs ${dependency}@${version}; @pps/sdk declares ${declared[dependency] ?? "nothing"}`))
  if (undeclared.length > 0) throw new Error(`dependencies of the bundled packages that @pps/sdk must declare:\n${undeclared.join("\n")}`)
  process.stdout.write(`bundled ${bundled.map(({ name }) => name).join(", ")} into dist/bundled/; ${files.length} files checked\n`)
}

main()
