/**
 * Loading a package the SDK does not depend on, by name, when a command needs it (`pps mcp`
 * loads `@pps/mcp`, `pps x402 fetch` loads `@pps/x402`): the name is a variable, so neither
 * TypeScript nor a bundler follows it, and an application importing the SDK loads none of it.
 *
 * @since 0.11.0
 */

/** Node's answer when the package itself is not found (not a module missing inside it). */
const isPackageNotFound = (error: unknown, packageName: string): boolean =>
  error instanceof Error && "code" in error && error.code === "ERR_MODULE_NOT_FOUND" && error.message.includes(`'${packageName}'`)

/**
 * Imports `packageName` and checks that it exports the entry; `missing` makes the error for a
 * package that is not installed (`notInstalled`) or not of this shape (`wrongShape`).
 *
 * @since 0.11.0
 * @category loading
 */
export const loadNamed = async <Entry>(
  packageName: string,
  isEntry: (value: unknown) => value is Entry,
  missing: (reason: "notInstalled" | "wrongShape") => Error
): Promise<Entry> => {
  const loaded: unknown = await import(packageName).catch((error: unknown) => {
    if (isPackageNotFound(error, packageName)) throw missing("notInstalled")
    throw error
  })
  if (!isEntry(loaded)) throw missing("wrongShape")
  return loaded
}
