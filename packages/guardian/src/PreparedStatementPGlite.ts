/**
 * Embedded PostgreSQL (PGlite) as the guardian and the server run it, with every parameterized
 * statement prepared once and then executed in one call into PGlite.
 *
 * Why: PGlite's `query(sql, params)` drives the extended protocol one message per call into its
 * WebAssembly (Parse, Describe statement, Bind, Describe portal, Execute, Sync: six calls, each
 * with its JavaScript framing and result parsing), and an unnamed statement is parsed, analysed
 * and planned again on every execution. The guardian's throughput profiles put PGlite at about
 * half of both processes' CPU per transfer, dominated by that per-call cost rather than by the
 * work of the statements (docs/benchmarks.md, "PGlite: what a statement costs"). Here a statement
 * text is prepared once under a name (Parse + Describe + Sync, one call; its parameter types and
 * row description kept), and each execution is Bind + Execute + Sync in one call. PostgreSQL then
 * plans a named statement as it would over a driver's prepared statements (custom plans first, a
 * generic plan once it is no dearer), so a repeated statement is neither parsed nor, usually,
 * planned again.
 *
 * Behaviour is PGlite's own `query`: the same serializers (by the parameter types PostgreSQL
 * reports; a `bytea` goes in the binary format instead of hex), the same parsers (a faster one
 * for `bytea`, same result) and result shape (`parse.parseResults`), the same error (the
 * `DatabaseError`, with the query attached), the same mutual exclusion. Statements that fail
 * are forgotten (prepared again on next use), so a statement made stale by a schema change is
 * prepared afresh; one whose result type a migration changed ("cached plan must not change
 * result type") is prepared again and run once more at once, outside a transaction. Texts are
 * bounded: past `maxPreparedStatements` the half that ran least recently is closed. Query
 * options this path does not implement (`blob`, `paramTypes`, `onNotice`; the service sets none)
 * go PGlite's own way.
 *
 * @since 0.1.0
 */
import { PGlite, type PGliteOptions, parse, protocol, type QueryOptions, type Results } from "@electric-sql/pglite"
import { durableOptions } from "./DurableNodeFS.ts"
import * as StatementLog from "./StatementLog.ts"

type BackendMessage = Awaited<ReturnType<PGlite["execProtocolStream"]>>[number]

interface Prepared {
  readonly name: string
  /** When it last ran (or was prepared), on the instance's `#runs` count: what `#closeLeastRecent` orders by. */
  lastUsed: number
  readonly parameterTypes: ReadonlyArray<number>
  /** The statement's RowDescription, or undefined for one that returns no rows (NoData). */
  readonly rowDescription: BackendMessage | undefined
}

/**
 * PostgreSQL's memory settings for the embedded database, after PGlite's start parameters (D67).
 *
 * Why: PGlite's cluster comes with `shared_buffers = 128MB`, and Emscripten zeroes the shared
 * memory it maps, so all of it was resident in each process (~150 MB of WebAssembly memory, which
 * never shrinks) whatever the database's size. 16 MB caches the service's hot pages (each table's
 * latest rows and its indexes' upper levels); a page read past it comes from the operating
 * system's page cache, one file read, not the disk. `wal_buffers` stays at the 4 MB it had
 * (PostgreSQL derives it from `shared_buffers`: 512 kB at 16 MB), room for a group commit's WAL.
 * docs/benchmarks.md ("Resident memory") has what it saved and what it cost.
 *
 * @since 0.12.0
 * @category constants
 */
export const memoryStartParams: ReadonlyArray<string> = ["-c", "shared_buffers=16MB", "-c", "wal_buffers=4MB"]

/**
 * The options a `PreparedStatementPGlite` opens with: durable on disk (DurableNodeFS.ts), and
 * `memoryStartParams` after whichever start parameters apply (the caller's, the durable ones, or
 * PGlite's own): PostgreSQL takes the last `-c` of a setting, so these hold in every case.
 */
const embeddedOptions = (dataDir: string | undefined, options: PGliteOptions | undefined): PGliteOptions => {
  const chosen = durableOptions(dataDir, options) ?? {}
  return { ...chosen, startParams: [...(chosen.startParams ?? PGlite.defaultStartParams), ...memoryStartParams] }
}

/** Bounds the named statements held by the backend (and their plans in its memory). */
const maxPreparedStatements = 512

/** SQLSTATE of "cached plan must not change result type" (feature_not_supported). */
const featureNotSupported = "0A000"

/** PostgreSQL's type OID of `bytea`. */
const byteaOid = 17

/**
 * A `bytea` result as PostgreSQL writes it in text (`\x` and two hex digits a byte), decoded in
 * one call into an array of its own. PGlite's parser makes a substring and a `parseInt` per byte,
 * and sealed balances, call data and signed transactions are hundreds of bytes each. Any other
 * form (`bytea_output = escape`, which the service never sets) goes to PGlite's parser.
 */
const byteaParser = (pglites: (text: string, typeId?: number) => unknown) => (text: string, typeId?: number): unknown => {
  if (!text.startsWith("\\x")) return pglites(text, typeId)
  const bytes = new Uint8Array((text.length - 2) >>> 1)
  Buffer.from(bytes.buffer).write(text.slice(2), "hex")
  return bytes
}

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  let length = 0
  for (const part of parts) length += part.length
  const out = new Uint8Array(length)
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

const attachQuery = (error: unknown, query: string, params: ReadonlyArray<unknown>, options: QueryOptions | undefined) => {
  if (error instanceof Error) Object.assign(error, { query, params, queryOptions: options })
  return error
}

/**
 * PGlite whose `query` runs each statement text as a named prepared statement (see the module
 * comment). Everything else is PGlite's.
 *
 * @since 0.1.0
 * @category models
 */
export class PreparedStatementPGlite extends PGlite {
  readonly #prepared = new Map<string, Prepared>()
  #nextName = 0
  /** Statements run (or tried), the clock of `Prepared.lastUsed`. */
  #runs = 0

  constructor(dataDir?: string, options?: PGliteOptions) {
    // On disk, every commit is synced to it (DurableNodeFS.ts); in memory, PGlite as it is. Both
    // with PostgreSQL's memory bounded (memoryStartParams).
    // One options object: given no directory, PGlite ignores its second argument.
    super({ ...(dataDir === undefined ? {} : { dataDir }), ...embeddedOptions(dataDir, options) })
    // This instance's own table of parsers (PGlite copies the defaults into each instance).
    const pglites = this.parsers[byteaOid]
    if (pglites !== undefined) this.parsers[byteaOid] = byteaParser(pglites)
  }

  /** Executions that reused a prepared statement, and statements prepared: for tests and benchmarks. */
  readonly preparedStatistics = { executions: 0, prepares: 0 }

  override async query<T>(query: string, params: Array<unknown> = [], options?: QueryOptions): Promise<Results<T>> {
    // Options this path does not implement (the service sets none): PGlite's own way.
    if (options?.blob !== undefined || options?.paramTypes !== undefined || options?.onNotice !== undefined) {
      return super.query<T>(query, params, options)
    }
    // As PGlite's own `query`: ready (not `waitReady`: PGlite queries itself while it starts),
    // outside any `transaction()` callback and alone on the backend.
    await this._checkReady()
    return this._runExclusiveTransaction(() => this._runExclusiveQuery(async () => {
      // A measurement's count (StatementLog.ts): the time inside PGlite, not the wait for it.
      const record = StatementLog.recorder()
      const startedMs = record === undefined ? 0 : performance.now()
      const preparesBefore = this.preparedStatistics.prepares
      try {
        return await this.#run<T>(query, params, options)
      } catch (error) {
        const stalePlan = (error as { code?: unknown }).code === featureNotSupported &&
          /cached plan must not change result type/.test(String((error as { message?: unknown }).message))
        // Inside a transaction the failure has aborted it: a second try could only fail too.
        if (!stalePlan || this.isInTransaction()) throw attachQuery(error, query, params, options)
        // A migration changed what the statement returns: prepare it again and run it once more.
        return await this.#run<T>(query, params, options).catch((again) => {
          throw attachQuery(again, query, params, options)
        })
      } finally {
        record?.(query, performance.now() - startedMs, this.preparedStatistics.prepares !== preparesBefore)
      }
    }))
  }

  async #run<T>(query: string, params: ReadonlyArray<unknown>, options: QueryOptions | undefined): Promise<Results<T>> {
    const prepared = this.#prepared.get(query) ?? await this.#prepare(query)
    prepared.lastUsed = this.#runs++
    const values = params.map((value, index) => {
      if (value === null || value === undefined) return null
      const type = prepared.parameterTypes[index]!
      const serializer = options?.serializers?.[type]
      // A `bytea` goes as it is, in the binary format (Bind sends an array's bytes with format 1,
      // which for `bytea` is the bytes themselves): PGlite's serializer would write two hex
      // digits a byte, one string each, and PostgreSQL parse them back.
      if (type === byteaOid && serializer === undefined && value instanceof Uint8Array) return value
      const serialize = serializer ?? this.serializers[type]
      return serialize ? serialize(value) : String(value)
    })
    let messages: Array<BackendMessage>
    try {
      messages = await this.execProtocolStream(
        concat([
          protocol.serialize.bind({ statement: prepared.name, values }),
          protocol.serialize.execute({}),
          protocol.serialize.sync()
        ]),
        { syncToFs: false }
      )
    } catch (error) {
      await this.#forget(query)
      throw error
    }
    this.preparedStatistics.executions += 1
    await this.syncToFs()
    const described = prepared.rowDescription === undefined ? messages : [prepared.rowDescription, ...messages]
    return parse.parseResults(described, this.parsers, options)[0] as Results<T>
  }

  async #prepare(query: string): Promise<Prepared> {
    if (this.#prepared.size >= maxPreparedStatements) await this.#closeLeastRecent()
    const name = `pps_${(this.#nextName++).toString(36)}`
    const messages = await this.execProtocolStream(
      concat([
        protocol.serialize.parse({ name, text: query, types: [] }),
        protocol.serialize.describe({ type: "S", name }),
        protocol.serialize.sync()
      ]),
      { syncToFs: false }
    )
    const prepared: Prepared = {
      name,
      lastUsed: this.#runs,
      parameterTypes: parse.parseDescribeStatementResults(messages),
      rowDescription: messages.find((message) => message.name === "rowDescription")
    }
    this.#prepared.set(query, prepared)
    this.preparedStatistics.prepares += 1
    return prepared
  }

  async #forget(query: string): Promise<void> {
    const prepared = this.#prepared.get(query)
    if (prepared === undefined) return
    this.#prepared.delete(query)
    await this.#close([prepared.name])
  }

  /**
   * Closes the half of the statements that ran least recently. Why not the oldest prepared: the
   * statements every transfer runs are prepared first, at start, and a batch's sizes are a text
   * each, so under load the texts pass the bound and the oldest half was the hottest.
   */
  async #closeLeastRecent(): Promise<void> {
    const leastRecent = [...this.#prepared].sort(([, a], [, b]) => a.lastUsed - b.lastUsed).slice(0, maxPreparedStatements / 2)
    for (const [query] of leastRecent) this.#prepared.delete(query)
    await this.#close(leastRecent.map(([, prepared]) => prepared.name))
  }

  async #close(names: ReadonlyArray<string>): Promise<void> {
    await this.execProtocolStream(
      concat([...names.map((name) => protocol.serialize.close({ type: "S", name })), protocol.serialize.sync()]),
      { syncToFs: false, throwOnError: false }
    )
  }
}

