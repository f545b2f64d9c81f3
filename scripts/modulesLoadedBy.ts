/**
 * Every module a fresh Node process loads while it imports the given entries, statically or not,
 * as their URLs: the graph as Node loads it, not as the sources read. For tests that keep a
 * package's start-up free of what it does not use (the SDK without its MCP server, the server and
 * the guardian without what D93 leaves out). A load hook (`module.registerHooks`) records them,
 * so a module only resolved, as `import.meta.resolve` does, is not among them.
 */
import { execFile } from "node:child_process"
import { pathToFileURL } from "node:url"

export const modulesLoadedBy = (entries: ReadonlyArray<string>, cwd?: string): Promise<ReadonlyArray<string>> => {
  const script = `
    import { registerHooks } from "node:module"
    const loaded = []
    registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context) } })
    for (const entry of ${JSON.stringify(entries.map((entry) => pathToFileURL(entry).href))}) await import(entry)
    process.stdout.write(JSON.stringify(loaded))
    process.exit(0)
  `
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      ["--disable-warning=ExperimentalWarning", "--input-type=module", "--eval", script],
      { cwd, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout) => error === null ? resolve(JSON.parse(stdout) as ReadonlyArray<string>) : reject(error)
    ))
}
