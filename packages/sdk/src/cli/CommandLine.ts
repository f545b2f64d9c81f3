/**
 * The conventions both command lines keep (`pps`, and the operator's `admin` in
 * packages/server), over Effect's CLI module (`effect/cli`). Effect parses the
 * words against each command's declared flags and arguments; this module decides
 * what is printed and how the process ends:
 *
 * - help (`--help`, `-h`, or `help [COMMAND]` as the first words): the usage on
 *   stdout, exit 0. A command's help is its synopsis, its description and every
 *   flag and argument with what it means; the whole usage lists every command.
 * - a command-line mistake (no or unknown command, unknown flag, missing or
 *   malformed value, wrong arguments): one line naming it, then the usage of the
 *   command it concerns (every command when none was recognised), on stderr;
 *   exit 2, before any request. A command that finds its words cannot be run as
 *   written (`UsageMistake`: `pps keygen` with an agent's key, known after reading the
 *   account) ends the same way, having changed nothing.
 * - any other failure: the command's own description of it on stderr, exit 1.
 *
 * The platform services Effect's CLI needs come from `@effect/platform-node-shared`,
 * which brings no server dependency into an SDK user's install.
 *
 * @since 0.5.0
 */
import * as os from "node:os"
import * as NodeChildProcessSpawner from "@effect/platform-node-shared/NodeChildProcessSpawner"
import * as NodeFileSystem from "@effect/platform-node-shared/NodeFileSystem"
import * as NodePath from "@effect/platform-node-shared/NodePath"
import * as NodeStdio from "@effect/platform-node-shared/NodeStdio"
import * as NodeTerminal from "@effect/platform-node-shared/NodeTerminal"
// Module by module rather than the barrels: the admin command loads nothing else of Effect at start.
import * as Cause from "effect/Cause"
import * as CliConfig from "effect/cli/CliConfig"
import type * as CliError from "effect/cli/CliError"
import * as CliOutput from "effect/cli/CliOutput"
import * as Command from "effect/cli/Command"
import * as Context from "effect/Context"
import * as Flag from "effect/cli/Flag"
import * as GlobalFlag from "effect/cli/GlobalFlag"
import type * as HelpDoc from "effect/cli/HelpDoc"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"

/**
 * The exit statuses of both command lines (docs/cli.md).
 *
 * @since 0.5.0
 * @category constants
 */
export const exitCodes = {
  /** The command did what it was asked, or help was asked for. */
  done: 0,
  /** The command failed: the API refused, the server was not reached, a local check failed. */
  failed: 1,
  /** The command line is wrong: nothing was sent. */
  usage: 2
} as const

/**
 * What a command line says about itself around its commands.
 *
 * @since 0.5.0
 * @category models
 */
export interface Program {
  /** How the user runs it, as the usage line names it: `pps`, `npm run -s admin --`. */
  readonly invocation: string
  /** Put before a usage mistake's line: `pps: `, or "" for none. */
  readonly prefix: string
  /** Lines printed after the commands in every usage: environment, exit statuses. */
  readonly footer: string
  /** Flags whose values a mistake's line never repeats (an amount, a memo). */
  readonly unrepeatedFlags: ReadonlyArray<string>
}

/**
 * What one run of a command line reads from and writes to outside its words: the environment,
 * the directory it was typed in, the user's home directory (where `~/.pps` is), and its two
 * output streams. The process's own (`processInvocation`) when run as a command; a test runs a
 * command in its own process with its own (`run`), and reads what it printed.
 *
 * @since 0.10.0
 * @category models
 */
export interface InvocationShape {
  readonly env: Readonly<Record<string, string | undefined>>
  /** Where relative paths are read from. */
  readonly cwd: string
  readonly homeDirectory: string
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
}

/**
 * The invocation a command runs in (see `InvocationShape`): commands read their environment
 * and write their output through it, never through `process` directly.
 *
 * @since 0.10.0
 * @category services
 */
export class Invocation extends Context.Service<Invocation, InvocationShape>()("@pps/sdk/cli/Invocation") {}

/**
 * This process's environment, directories and output streams.
 *
 * @since 0.10.0
 * @category constructors
 */
export const processInvocation = (): InvocationShape => ({
  env: process.env,
  cwd: process.cwd(),
  homeDirectory: os.homedir(),
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text)
})

/** The command tree, the program's words, and the help document Effect builds for a command path. */
interface Cli {
  readonly root: Command.Command.Any
  readonly info: Program
  readonly helpDoc: (commandPath: ReadonlyArray<string>) => Effect.Effect<HelpDoc.HelpDoc, never, Invocation>
}

/** `--help` and `-h` only: no --version, --completions, --log-level or --wizard. */
const cliConfig = CliConfig.layer({ builtIns: [GlobalFlag.Help] })

/** The platform services Effect's CLI requires (files, paths, terminal, process, stdio). */
const platform = Layer.provideMerge(
  NodeChildProcessSpawner.layer,
  Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, NodeStdio.layer, NodeTerminal.layer)
)

/**
 * `--json`, which every command takes; `description` says what it changes for that command.
 *
 * @since 0.5.0
 * @category flags
 */
export const json = (description: string): Flag.Flag<boolean> =>
  Flag.Boolean("json").pipe(Flag.withDescription(description), Flag.withoutNegation, Flag.withDefault(false))

/**
 * A boolean switch, false unless given.
 *
 * @since 0.5.0
 * @category flags
 */
export const toggle = (name: string, description: string): Flag.Flag<boolean> =>
  Flag.Boolean(name).pipe(Flag.withDescription(description), Flag.withoutNegation, Flag.withDefault(false))

/**
 * A flag with a value that `check.accepts`; `check.expected` completes "--NAME must be …".
 *
 * @since 0.5.0
 * @category flags
 */
export const text = (
  name: string,
  metavar: string,
  description: string,
  check: { readonly accepts: (value: string) => boolean; readonly expected: string } = { accepts: (value) => value !== "", expected: "not empty" }
): Flag.Flag<string> =>
  Flag.String(name).pipe(
    Flag.withMetavar(metavar),
    Flag.withDescription(description),
    Flag.filter(check.accepts, () => check.expected)
  )

/**
 * A flag whose value is one of `choices`, shown as `a|b` in the synopsis.
 *
 * @since 0.5.0
 * @category flags
 */
export const choice = <const Choice extends string>(
  name: string,
  choices: ReadonlyArray<Choice>,
  description: string,
  expected = choices.length === 1 ? String(choices[0]) : `one of ${choices.join("|")}`
): Flag.Flag<Choice> =>
  Flag.String(name).pipe(
    Flag.withMetavar(choices.join("|")),
    Flag.withDescription(description),
    Flag.filterMap(
      (value) => Option.fromNullishOr(choices.find((allowed) => allowed === value)),
      () => expected
    )
  )

/** The words of a command path after the program's own name: `transfers list`. */
const words = (commandPath: ReadonlyArray<string>): string => commandPath.slice(1).join(" ")

const subcommandsOf = (command: Command.Command.Any): ReadonlyArray<Command.Command.Any> =>
  command.subcommands.flatMap((group) => group.commands)

/** The paths of the commands that run (no subcommands) at or under `commandPath`. */
const leafPaths = (root: Command.Command.Any, commandPath: ReadonlyArray<string>): ReadonlyArray<ReadonlyArray<string>> => {
  let command = root
  for (const word of commandPath.slice(1)) {
    const next = subcommandsOf(command).find((sub) => sub.name === word)
    if (next === undefined) break
    command = next
  }
  const visit = (current: Command.Command.Any, path: ReadonlyArray<string>): ReadonlyArray<ReadonlyArray<string>> => {
    const subs = subcommandsOf(current)
    return subs.length === 0 ? [path] : subs.flatMap((sub) => visit(sub, [...path, sub.name]))
  }
  return visit(command, commandPath)
}

/**
 * The help document Effect builds for one command path: asked of the parser as
 * `<path> --help` with a presenter that keeps it instead of printing it.
 */
const helpDocOf = <Name extends string, Input, ContextInput, E>(
  root: Command.Command<Name, Input, ContextInput, E, Invocation>,
  commandPath: ReadonlyArray<string>
): Effect.Effect<HelpDoc.HelpDoc, never, Invocation> =>
  Effect.suspend(() => {
    let kept: HelpDoc.HelpDoc | undefined
    const keep = CliOutput.layerPresenter({
      present: (event) =>
        Effect.sync(() => {
          if (event._tag === "Help") kept = event.helpDoc
        })
    })
    return Command.runWith(root, { version: "" })([...commandPath.slice(1), "--help"]).pipe(
      Effect.provide(Layer.mergeAll(keep, cliConfig, platform)),
      Effect.ignore,
      Effect.flatMap(() => kept === undefined ? Effect.die(`no help for ${commandPath.join(" ")}`) : Effect.succeed(kept))
    )
  })

/** `--name META`, or `--name` for a switch. */
const flagShown = (flag: HelpDoc.FlagDoc): string => flag.type === "boolean" ? `--${flag.name}` : `--${flag.name} ${flag.type}`

/** `[--name META]`, `--name META`, `[--name]`: a flag as the synopsis shows it. */
const flagSynopsis = (flag: HelpDoc.FlagDoc): string => flag.required ? flagShown(flag) : `[${flagShown(flag)}]`

const argumentSynopsis = (argument: HelpDoc.ArgDoc): string => {
  const shown = argument.variadic ? `${argument.type}...` : argument.type
  return argument.required ? shown : `[${shown}]`
}

/** One command's line: its words, its arguments, then its flags in the order declared. */
const synopsis = (doc: HelpDoc.HelpDoc): string =>
  [words(doc.commandPath ?? []), ...(doc.args ?? []).map(argumentSynopsis), ...doc.flags.map(flagSynopsis)].join(" ")

/** Where descriptions start, so that the short synopses line up. */
const descriptionColumn = 54

/** The widest flag (with its value's name) whose description still starts on its own line. */
const flagColumnMax = 22

/** `  left    right`, with `right` (lines of it) starting at `column`, or on the next line when `left` is too long. */
const columns = (left: string, right: string, column: number): string => {
  const [first = "", ...rest] = right.split("\n")
  const indent = " ".repeat(column)
  const head = left.length + 2 <= column ? `${left.padEnd(column)}${first}` : `${left}\n${indent}${first}`
  return [head.trimEnd(), ...rest.map((line) => `${indent}${line}`)].join("\n")
}

/** One command in the list of all of them: synopsis and description. */
const summary = (doc: HelpDoc.HelpDoc): string => columns(`  ${synopsis(doc)}`, doc.description, descriptionColumn)

/** A command's arguments and flags, each with what it means. */
const entriesOf = (doc: HelpDoc.HelpDoc): ReadonlyArray<readonly [string, string]> => [
  ...(doc.args ?? []).map((argument) => [argument.type, Option.getOrElse(argument.description, () => "")] as const),
  ...doc.flags.map((flag) => [flagShown(flag), Option.getOrElse(flag.description, () => "")] as const)
]

/** The commands' arguments and flags indented under their synopses, descriptions in one column (a long flag's on the next line). */
const details = (docs: ReadonlyArray<HelpDoc.HelpDoc>): ReadonlyArray<string> => {
  const widest = Math.max(0, ...docs.flatMap(entriesOf).map(([left]) => left.length))
  const column = 6 + Math.min(flagColumnMax, widest) + 2
  return docs.map((doc) => [summary(doc), ...entriesOf(doc).map(([left, right]) => columns(`      ${left}`, right, column))].join("\n"))
}

/** The usage for a command path: every command's summary at the root, else each command under it in full. */
const usageOf = (cli: Cli, commandPath: ReadonlyArray<string>): Effect.Effect<string, never, Invocation> =>
  Effect.gen(function*() {
    const docs = yield* Effect.forEach(leafPaths(cli.root, commandPath), cli.helpDoc)
    const body = commandPath.length <= 1 ? docs.map(summary) : details(docs)
    return [`usage: ${cli.info.invocation} <command> [options]`, ...body, cli.info.footer].join("\n")
  })

/** Every flag some command of the tree takes, so a mistake can tell a misplaced flag from an unknown one. */
const flagsOfTree = (cli: Cli): Effect.Effect<ReadonlySet<string>, never, Invocation> =>
  Effect.map(
    Effect.forEach(leafPaths(cli.root, [cli.root.name]), cli.helpDoc),
    (docs) => new Set(docs.flatMap((doc) => doc.flags.map((flag) => `--${flag.name}`)))
  )

/** The flag or argument an error names, as its help document has it. */
const metavarOf = (doc: HelpDoc.HelpDoc, name: string): string =>
  doc.args?.find((argument) => argument.name === name)?.type ?? name.toUpperCase()

/** One line naming a mistake Effect's parser found, in this command line's words. */
const mistake = (cli: Cli, error: CliError.NonShowHelpErrors, doc: HelpDoc.HelpDoc): Effect.Effect<string, never, Invocation> =>
  Effect.gen(function*() {
    const command = words(doc.commandPath ?? [cli.root.name])
    switch (error._tag) {
      case "UnrecognizedOption": {
        const known = yield* flagsOfTree(cli)
        const hint = error.suggestions.length > 0 ? ` (did you mean ${error.suggestions.join(" or ")}?)` : ""
        if (!known.has(error.option)) return `unknown option "${error.option}"${hint}`
        // The command's own flag, written before its last word (where it was read as a flag of the words before).
        if (doc.flags.some((flag) => `--${flag.name}` === error.option)) return `${error.option} goes after "${command}"`
        return `${command === "" ? words(error.command ?? []) : command} does not take ${error.option}${hint}`
      }
      case "UnknownSubcommand": {
        const parent = words(error.parent ?? [])
        return `unknown ${parent === "" ? "" : `${parent} `}command "${error.subcommand}"`
      }
      case "MissingOption":
        return `${command} needs --${error.option}`
      case "MissingArgument":
        return `${command} needs ${metavarOf(doc, error.argument)}`
      case "UnexpectedArgument":
        return `too many arguments for ${command}: ${error.arguments.map((value) => JSON.stringify(value)).join(" ")}`
      case "InvalidValue": {
        const name = error.kind === "flag" ? `--${error.option}` : metavarOf(doc, error.option)
        if (error.kind === "flag" && doc.flags.find((flag) => flag.name === error.option)?.type === "boolean") return `${name} takes no value`
        if (error.value === "") return `${name} needs a value`
        const expected = error.expected.replace(/^Expected:? /, "")
        return cli.info.unrepeatedFlags.includes(error.option) ? `${name} must be ${expected}` : `${name} must be ${expected}, not ${JSON.stringify(error.value)}`
      }
      default:
        return error.message
    }
  })

/** Why a command line is wrong (or "" for none given), then the usage of the command it concerns: for stderr. */
const usageMistake = (cli: Cli, commandPath: ReadonlyArray<string>, reason: string): Effect.Effect<string, never, Invocation> =>
  Effect.map(usageOf(cli, commandPath), (usage) => `${reason === "" ? "" : `${cli.info.prefix}${reason}\n`}${usage}\n`)

const stdout = (output: string): Effect.Effect<void, never, Invocation> => Invocation.useSync((invocation) => invocation.stdout(output))
const stderr = (output: string): Effect.Effect<void, never, Invocation> => Invocation.useSync((invocation) => invocation.stderr(output))

/** The words that may follow a command with subcommands: `list, get`. */
const nextWords = (cli: Cli, commandPath: ReadonlyArray<string>): string => {
  const next = leafPaths(cli.root, commandPath).map((path) => path[commandPath.length] ?? "")
  return next.filter((word, index) => next.indexOf(word) === index).join(", ")
}

/** Effect's help and parse events, printed in this module's format: help on stdout, mistakes on stderr. */
const presenter = (cli: Cli, invocation: InvocationShape) =>
  CliOutput.layerPresenter({
    present: (event) => presentEvent(cli, event).pipe(Effect.provideService(Invocation, invocation))
  })

const presentEvent = (cli: Cli, event: CliOutput.Presenter.Event): Effect.Effect<void, never, Invocation> => {
  switch (event._tag) {
    case "Help": {
      if (event.reason === "Requested") return Effect.flatMap(usageOf(cli, event.commandPath), (usage) => stdout(`${usage}\n`))
      // Implicit: a command with subcommands was given none, or no command was given at all.
      const reason = event.commandPath.length <= 1 ? "" : `${words(event.commandPath)} needs one of: ${nextWords(cli, event.commandPath)}`
      return Effect.flatMap(usageMistake(cli, event.commandPath, reason), stderr)
    }
    case "InvalidInvocation": {
      const [first] = event.errors
      return Effect.gen(function*() {
        const reason = first === undefined ? "" : yield* mistake(cli, first, event.helpDoc)
        yield* stderr(yield* usageMistake(cli, event.commandPath, reason))
      })
    }
    case "Version":
      return Effect.void
  }
}

/**
 * The words of a help request, when the command line is one: `help WORDS...`, or
 * `--help`/`-h` anywhere before `--` (then the words are the other non-flag words).
 */
const helpWords = (argv: ReadonlyArray<string>): ReadonlyArray<string> | undefined => {
  const end = argv.indexOf("--")
  const before = end === -1 ? argv : argv.slice(0, end)
  if (before[0] === "help") return before.slice(1).filter((word) => !word.startsWith("-"))
  return before.some((word) => word === "--help" || word === "-h") ? before.filter((word) => !word.startsWith("-")) : undefined
}

/** The command path a help request names, or the first word that names no command (with the path before it). */
const resolveHelp = (root: Command.Command.Any, asked: ReadonlyArray<string>) => {
  let command = root
  const path = [root.name]
  for (const word of asked) {
    const subs = subcommandsOf(command)
    // A command that runs takes the rest as its arguments (`transfers get ID --help`).
    if (subs.length === 0) break
    const next = subs.find((sub) => sub.name === word)
    if (next === undefined) return { path, unknown: word }
    command = next
    path.push(word)
  }
  return { path, unknown: undefined }
}

/**
 * Help is answered here rather than by Effect's `--help`, which shows the whole
 * usage (exit 0) for `frobnicate --help`; here an unknown command is a mistake.
 */
const help = (cli: Cli, asked: ReadonlyArray<string>): Effect.Effect<number, never, Invocation> =>
  Effect.gen(function*() {
    const { path, unknown } = resolveHelp(cli.root, asked)
    if (unknown === undefined) {
      yield* stdout(`${yield* usageOf(cli, path)}\n`)
      return exitCodes.done
    }
    const parent = words(path)
    yield* stderr(yield* usageMistake(cli, path, `unknown ${parent === "" ? "" : `${parent} `}command "${unknown}"`))
    return exitCodes.usage
  })

/**
 * A command line that parses but cannot be run as written, found by the command itself
 * (`pps keygen` with an agent's key: agents use their owner's key). Printed as any
 * mistake: one line, then the usage of the command; exit 2, with nothing changed.
 *
 * @since 0.5.0
 * @category errors
 */
export class UsageMistake extends Error {
  override readonly name = "UsageMistake"
}

const isShowHelp = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "ShowHelp"

/**
 * Runs the command line on `argv` in `invocation` (its environment, directories and output
 * streams) and resolves with its exit status ({@link exitCodes}); `describe` turns a command's
 * failure into its stderr text. Never rejects.
 *
 * @since 0.10.0
 * @category running
 */
export const run = <Name extends string, Input, ContextInput, E>(
  root: Command.Command<Name, Input, ContextInput, E, Invocation>,
  info: Program,
  argv: ReadonlyArray<string>,
  describe: (error: unknown) => string,
  invocation: InvocationShape
): Promise<number> => {
  const cli: Cli = { root, info, helpDoc: (commandPath) => helpDocOf(root, commandPath) }
  const asked = helpWords(argv)
  const program = asked !== undefined ? help(cli, asked) : Effect.gen(function*() {
    const exit = yield* Effect.exit(Command.runWith(root, { version: "" })(argv))
    if (Exit.isSuccess(exit)) return exitCodes.done
    const error = Cause.findErrorOption(exit.cause)
    // ShowHelp: the presenter has printed the mistake and the usage.
    if (Option.isSome(error) && isShowHelp(error.value)) return exitCodes.usage
    if (Option.isSome(error) && error.value instanceof UsageMistake) {
      const { path } = resolveHelp(root, argv.filter((word) => !word.startsWith("-")))
      yield* stderr(yield* usageMistake(cli, path, error.value.message))
      return exitCodes.usage
    }
    yield* stderr(Option.isSome(error) ? describe(error.value) : `${info.prefix}${Cause.pretty(exit.cause)}\n`)
    return exitCodes.failed
  })
  return Effect.runPromise(program.pipe(
    Effect.provide(Layer.mergeAll(presenter(cli, invocation), cliConfig, platform)),
    Effect.provideService(Invocation, invocation)
  )).then(
    (code) => code,
    (defect: unknown) => {
      invocation.stderr(`${info.prefix}${defect instanceof Error ? defect.message : String(defect)}\n`)
      return exitCodes.failed
    }
  )
}

/**
 * Runs the command line on `argv` as this process ({@link processInvocation}) and sets the
 * process's exit status.
 *
 * @since 0.5.0
 * @category running
 */
export const main = <Name extends string, Input, ContextInput, E>(
  root: Command.Command<Name, Input, ContextInput, E, Invocation>,
  info: Program,
  argv: ReadonlyArray<string>,
  describe: (error: unknown) => string
): void => {
  void run(root, info, argv, describe, processInvocation()).then((code) => {
    process.exitCode = code
  })
}

/** Plain words for the errno codes Node's fetch hides behind `TypeError: fetch failed`. */
const networkCauses: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  ETIMEDOUT: "timed out",
  UND_ERR_CONNECT_TIMEOUT: "timed out",
  UND_ERR_HEADERS_TIMEOUT: "timed out",
  UND_ERR_BODY_TIMEOUT: "timed out",
  ECONNRESET: "connection reset",
  UND_ERR_SOCKET: "connection closed by the server",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable"
}

/**
 * Why a request got no answer. Node's fetch throws `TypeError("fetch failed")`
 * and puts the socket error in `cause` (an AggregateError when a host name has
 * several addresses); its errno `code` is what the user can act on.
 *
 * @since 0.5.0
 * @category errors
 */
export const networkFailure = (error: unknown): string => {
  const codes: Array<string> = []
  let innermost = "the request failed"
  const visit = (value: unknown, depth: number): void => {
    if (depth > 5 || typeof value !== "object" || value === null) return
    if ("code" in value && typeof value.code === "string") codes.push(value.code)
    if (value instanceof Error && value.name === "TimeoutError") codes.push("ETIMEDOUT")
    if (value instanceof Error && depth > 0 && value.message !== "") innermost = value.message
    if (value instanceof AggregateError) for (const inner of value.errors) visit(inner, depth + 1)
    if ("cause" in value) visit(value.cause, depth + 1)
  }
  visit(error, 0)
  return codes.map((code) => networkCauses[code]).find((words) => words !== undefined) ?? innermost
}

/**
 * A command's output on stdout.
 *
 * @since 0.5.0
 * @category running
 */
export const print = stdout
