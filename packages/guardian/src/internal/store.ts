/**
 * The guardian's SQL store. Every amount goes through the at-rest box on its way in
 * and out, with the row's identity as associated data; a value that does not open is
 * a defect (the storage was tampered with or the key is wrong), never a silent zero.
 *
 * Functions that change a balance expect to run inside a transaction that already
 * holds the balance row (`lockBalance`, SELECT … FOR UPDATE), so two guardian
 * processes on one PostgreSQL database serialize on the row.
 */
import { Context, Effect, Option } from "effect"
import { type SqlError, SqlClient } from "effect/sql"
import { valuesPlaceholders } from "../SqlValues.ts"
import type { AtRestBox } from "./atRest.ts"

/** A balance's identity: decimal chain id, lower-case contract and account addresses. */
export interface AccountRef {
  readonly chainId: string
  readonly contract: string
  readonly account: string
}

export interface BalanceRow {
  readonly confirmed: bigint
  readonly reserved: bigint
  readonly version: bigint
  readonly owned: boolean
  readonly frozenReason: string | null
}

export type ReservationStatus = "reserved" | "confirmed" | "failed" | "expired"

/** What is recorded of a transfer id's decision: which request, whether held, how many re-decisions. */
export interface DecisionRow {
  readonly requestDigest: string
  readonly held: boolean
  readonly redecisions: number
}

export interface ReservationRow {
  readonly transferId: string
  readonly chainId: string
  readonly contract: string
  readonly fromAccount: string
  readonly toAccount: string
  readonly kind: "confidential" | "public"
  readonly nonce: bigint
  readonly deadline: bigint
  readonly expiresAtMs: number
  readonly amount: bigint
  readonly spendBucket: number | null
  readonly requestDigest: string
  readonly result: string
  readonly status: ReservationStatus
  /** A confidential transfer's recipient was credited (by its event or by settle). */
  readonly recipientCredited: boolean
  /** The API key the server says asked for the transfer (D40); null for older rows. */
  readonly apiKeyId: string | null
}

/** An open alert as stored (docs/guardian.md, "Alerts"). */
export interface AlertRow extends AccountRef {
  readonly kind: string
  readonly sinceMs: number
  readonly lastSeenMs: number
  readonly explanation: string
}

/** A signed veto of a rotation proposal (docs/guardian.md, "Rotation vetoes"). */
export interface RotationVetoRow {
  readonly chainId: string
  readonly contract: string
  readonly proposalId: bigint
  readonly newSigner: string
  readonly executableAt: bigint
  readonly txHash: string
  readonly blockNumber: bigint
  readonly signature: string
}

/** The identity of a credit log, and what the guardian did with it. */
export interface ChainCreditRow {
  readonly chainId: string
  readonly txHash: string
  readonly logIndex: number
  readonly contract: string
  readonly account: string
  readonly kind: "shield" | "transfer_in"
  readonly transferId: string | null
  readonly blockNumber: bigint
  readonly outcome: "booked" | "already_booked" | "out_of_range" | "unknown_transfer"
}

/** What identifies a credit log: the chain, its transaction and its index there (the table's key). */
export type ChainCreditKey = Pick<ChainCreditRow, "chainId" | "txHash" | "logIndex">

/** A balance row this transaction holds locked, with the value its units have written to it so far. */
interface HeldBalance {
  readonly account: AccountRef
  balance: BalanceRow
  written: boolean
}

/** An API key's total row this transaction holds locked (D40), with the transfers added to it so far. */
interface HeldKeyTotal {
  readonly account: AccountRef
  readonly apiKeyId: string
  total: bigint
  added: number
}

/** A reservation a group's unit recorded, kept in memory until the group's flush. */
interface NewReservation {
  readonly reservation: Omit<ReservationRow, "status" | "recipientCredited">
  readonly nowMs: number
}

/** A decision a group's unit recorded, kept in memory until the group's flush. */
interface NewDecision {
  readonly decision: DecisionRow
  readonly nowMs: number
}

/** A credit log a group's unit recorded, kept in memory until the group's flush. */
interface NewChainCredit {
  readonly credit: ChainCreditRow
  readonly nowMs: number
}

/** A change to a reservation the group holds locked, kept in memory until the group's flush. */
interface ReservationChange {
  readonly status: ReservationStatus
  /** Null: the change leaves `settled_at_ms` as it is (a recipient marked credited). */
  readonly settledAtMs: number | null
  readonly recipientCredited: boolean
}

/**
 * The rows a group transaction (internal/groupCommit.ts) has locked: balances and API-key
 * totals, by key. Once a unit of the group has locked a row, the row is this transaction's
 * until its commit, so the units after it read the held value instead of selecting it
 * again, and write to it in memory; `withHeldRows` writes each changed row once, before the
 * commit. Without `withHeldRows` the service is absent and every read and write is SQL. A unit
 * run alone has it too, but nothing prefetched: it holds the balances and key totals it locks
 * itself, and reads and writes its reservations and decisions by SQL.
 *
 * `reservations` are rows `prefetch` locked for the group's units, read before any of them
 * runs: a unit reads such a row from here, and a status a unit sets is set here and kept in
 * `reservationChanges` for the flush.
 *
 * The records of new decisions (issue 16): `prefetch` reads, for the hinted ones, whether a
 * reservation or a decision exists under the transfer id and whether the sender's nonce is
 * taken (`reservedIds`, `decidedIds`, `noncesTaken`: what this transaction would read now).
 * A unit then checks and records a new reservation and decision in memory (`newReservations`,
 * `newDecisions`, and the three maps updated), and the flush inserts each table's new rows in
 * one statement. Rows are only ever added to these tables, so "exists" stays true; "absent"
 * can only turn false by another guardian process's commit, which the flush's insert meets as
 * a conflict: the group then fails as a whole and its units run alone, with plain SQL.
 * Every SQL statement on reservations or decisions inside a group first writes what is held
 * in memory (`writeRecords`), so SQL reads see it.
 *
 * Credit logs the chain follower books are recorded the same way (`creditsRecorded`,
 * `newChainCredits`): the prefetch reads which of the hinted (tx hash, log index) pairs are
 * recorded, a unit records a new one in memory, and the flush inserts them in one statement.
 * Before this a follower step ran two statements per log (the reservation under its lock, the
 * credit's insert); under load that was a third of the guardian's statements.
 */
class HeldRows extends Context.Service<HeldRows, {
  readonly balances: Map<string, HeldBalance>
  readonly keyTotals: Map<string, HeldKeyTotal>
  readonly reservations: Map<string, ReservationRow>
  readonly reservedIds: Map<string, boolean>
  readonly decidedIds: Map<string, boolean>
  readonly noncesTaken: Map<string, boolean>
  readonly newReservations: Map<string, NewReservation>
  readonly newDecisions: Map<string, NewDecision>
  readonly reservationChanges: Map<string, ReservationChange>
  readonly creditsRecorded: Map<string, boolean>
  readonly newChainCredits: Map<string, NewChainCredit>
}>()("guardian/HeldRows") {}

/**
 * What a group's units will lock (issue 16): the group reads these rows first, all of a kind in
 * one statement, instead of one statement per unit and row. A hint only saves statements: a row
 * it misses (or one that does not exist yet) is read by the unit as it would be without one.
 */
export interface RowHints {
  /** Reservations the units read under their row lock (settlements, booked credits). */
  readonly reservations?: ReadonlyArray<string>
  /** Balances the units lock besides those of the hinted reservations' parties. */
  readonly balances?: ReadonlyArray<AccountRef>
  /** New decisions the units will check for earlier records (`recordedBefore`), each under its sender's lock. */
  readonly decisions?: ReadonlyArray<DecisionHint>
  /** Credit logs the units will record (`insertChainCredit`), once each. */
  readonly credits?: ReadonlyArray<ChainCreditKey>
}

/** A decision to come: its transfer id, and the sender and nonce its reservation would take. */
export interface DecisionHint {
  readonly transferId: string
  readonly sender: AccountRef
  readonly nonce: bigint
}

const heldRows = Effect.map(Effect.serviceOption(HeldRows), Option.getOrUndefined)

/** The scope of the chain-wide cursor that finds the contracts naming this guardian. */
export const discoveryScope = "discovery"

const prefix = "pps/guardian/v1"
const ref = (account: AccountRef) => `${account.chainId}/${account.contract}/${account.account}`
const confirmedBinding = (account: AccountRef) => `${prefix}/balance/confirmed/${ref(account)}`
const reservedBinding = (account: AccountRef) => `${prefix}/balance/reserved/${ref(account)}`
const reservationBinding = (transferId: string) => `${prefix}/reservation/${transferId}`
const spendBinding = (agent: AccountRef, bucket: number) => `${prefix}/spend/${ref(agent)}/${bucket}`
const creditBinding = (creditId: string) => `${prefix}/credit/${creditId}`
const keyTotalBinding = (account: AccountRef, apiKeyId: string) => `${prefix}/key-total/${ref(account)}/${apiKeyId}`
/** A held API-key total's key (HeldRows.keyTotals). */
const keyTotalId = (account: AccountRef, apiKeyId: string) => `${ref(account)}/${apiKeyId}`
/** A sender's nonce's key (HeldRows.noncesTaken). */
const nonceId = (sender: AccountRef, nonce: bigint) => `${ref(sender)}/${nonce}`
/** A credit log's key (HeldRows.creditsRecorded). */
const creditId = (credit: ChainCreditKey) => `${credit.chainId}/${credit.txHash}/${credit.logIndex}`

interface BalanceSqlRow {
  readonly confirmed_sealed: Uint8Array
  readonly reserved_sealed: Uint8Array
  readonly version: string
  readonly owned: boolean
  readonly frozen_reason: string | null
}

interface ReservationSqlRow {
  readonly transfer_id: string
  readonly chain_id: string
  readonly contract: string
  readonly from_account: string
  readonly to_account: string
  readonly kind: "confidential" | "public"
  readonly nonce: string
  readonly deadline: string
  readonly expires_at_ms: string
  readonly amount_sealed: Uint8Array
  readonly spend_bucket: string | null
  readonly request_digest: string
  readonly result: string
  readonly status: ReservationStatus
  readonly recipient_credited: boolean
  readonly api_key_id: string | null
}

/** The columns of a `BalanceSqlRow`. */
const balanceColumns = "confirmed_sealed, reserved_sealed, version::text AS version, owned, frozen_reason"

const reservationColumns = `transfer_id, chain_id, contract, from_account, to_account, kind, nonce,
  deadline::text AS deadline, expires_at_ms::text AS expires_at_ms, amount_sealed, spend_bucket::text AS spend_bucket,
  request_digest, result, status, recipient_credited, api_key_id`

export type Store = ReturnType<typeof makeStore>

export const makeStore = (sql: SqlClient.SqlClient, box: AtRestBox) => {
  const open = (sealed: Uint8Array, binding: string): Effect.Effect<bigint> => {
    const value = box.open(new Uint8Array(sealed), binding)
    return value === undefined
      ? Effect.die(new Error(`a sealed amount did not open (${binding.split("/").slice(3, 5).join("/")}): storage tampered with or wrong GUARDIAN_SECRET`))
      : Effect.succeed(value)
  }

  const toBalance = (row: BalanceSqlRow, account: AccountRef): Effect.Effect<BalanceRow> =>
    Effect.all([open(row.confirmed_sealed, confirmedBinding(account)), open(row.reserved_sealed, reservedBinding(account))]).pipe(
      Effect.map(([confirmed, reserved]) => ({
        confirmed,
        reserved,
        version: BigInt(row.version),
        owned: row.owned,
        frozenReason: row.frozen_reason
      }))
    )

  const toReservation = (row: ReservationSqlRow): Effect.Effect<ReservationRow> =>
    open(row.amount_sealed, reservationBinding(row.transfer_id)).pipe(
      Effect.map((amount) => ({
        transferId: row.transfer_id,
        chainId: row.chain_id,
        contract: row.contract,
        fromAccount: row.from_account,
        toAccount: row.to_account,
        kind: row.kind,
        nonce: BigInt(row.nonce),
        deadline: BigInt(row.deadline),
        expiresAtMs: Number(row.expires_at_ms),
        amount,
        spendBucket: row.spend_bucket === null ? null : Number(row.spend_bucket),
        requestDigest: row.request_digest,
        result: row.result,
        status: row.status,
        recipientCredited: row.recipient_credited,
        apiKeyId: row.api_key_id
      }))
    )

  /**
   * Locks a row (`select` is a SELECT … FOR UPDATE), creating it first when missing. The
   * row exists on every call but an account's first, so the SELECT comes first: one
   * statement instead of an INSERT … ON CONFLICT DO NOTHING before every lock (issue 16).
   */
  const lockOrCreate = <Row>(
    select: Effect.Effect<ReadonlyArray<Row>, SqlError.SqlError>,
    /** Lazy: it seals a zero, wasted work when the row exists. */
    insert: () => Effect.Effect<unknown, SqlError.SqlError>
  ) =>
    Effect.gen(function*() {
      const found = (yield* select)[0]
      if (found !== undefined) return found
      yield* insert()
      return (yield* select)[0]
    })

  /** Creates the balance row when missing, then locks it for the transaction. */
  const lockBalance = (account: AccountRef): Effect.Effect<BalanceRow, SqlError.SqlError> =>
    Effect.gen(function*() {
      const held = (yield* heldRows)?.balances
      const known = held?.get(ref(account))
      if (known !== undefined) return known.balance
      const row = yield* lockOrCreate(
        sql<BalanceSqlRow>`
          SELECT ${sql.literal(balanceColumns)}
          FROM guardian_balances
          WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
          FOR UPDATE`,
        () => sql`
          INSERT INTO guardian_balances (chain_id, contract, account, confirmed_sealed, reserved_sealed)
          VALUES (${account.chainId}, ${account.contract}, ${account.account},
            ${box.seal(0n, confirmedBinding(account))}, ${box.seal(0n, reservedBinding(account))})
          ON CONFLICT DO NOTHING`
      )
      if (row === undefined) return yield* Effect.die(new Error("invariant violated: the balance row vanished after its upsert"))
      const balance = yield* toBalance(row, account)
      held?.set(ref(account), { account, balance, written: false })
      return balance
    })

  /** The balance without locking (zero when the guardian never booked the account). */
  const readBalance = (account: AccountRef): Effect.Effect<BalanceRow, SqlError.SqlError> =>
    Effect.gen(function*() {
      const rows = yield* sql<BalanceSqlRow>`
        SELECT ${sql.literal(balanceColumns)}
        FROM guardian_balances
        WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`
      const row = rows[0]
      return row === undefined
        ? { confirmed: 0n, reserved: 0n, version: 0n, owned: false, frozenReason: null }
        : yield* toBalance(row, account)
    })

  type BalanceWrite = Pick<BalanceRow, "confirmed" | "reserved" | "version" | "owned">

  /** Writes a balance locked by `lockBalance` (in memory until the commit when its group holds it). */
  const writeBalance = (account: AccountRef, balance: BalanceWrite) =>
    Effect.gen(function*() {
      const held = (yield* heldRows)?.balances.get(ref(account))
      if (held === undefined) return yield* updateBalances([{ account, balance }])
      held.balance = { ...held.balance, ...balance }
      held.written = true
    })

  /** Every row these writes change is locked by their transaction: a row a write missed is a broken invariant. */
  const everyHeldRow = (expected: number, what: string) => (written: ReadonlyArray<unknown>): Effect.Effect<void> =>
    written.length === expected
      ? Effect.void
      : Effect.die(new Error(`invariant violated: ${expected - written.length} held ${what} vanished before their write`))

  /**
   * Writes locked balances in one statement, each row checked written: a group's changed ones
   * together (issue 16: a statement costs the embedded database about as much for one row as
   * for several), or one outside a group.
   */
  const updateBalances = (
    entries: ReadonlyArray<{ readonly account: AccountRef; readonly balance: BalanceWrite }>
  ): Effect.Effect<void, SqlError.SqlError> => {
    if (entries.length === 0) return Effect.void
    const values = valuesPlaceholders(entries.length, ["::text", "::text", "::text", "::bytea", "::bytea", "::bigint", "::boolean"])
    return sql.unsafe<{ readonly account: string }>(
      `UPDATE guardian_balances b
       SET confirmed_sealed = v.confirmed_sealed, reserved_sealed = v.reserved_sealed, version = v.version, owned = v.owned
       FROM (VALUES ${values}) AS v (chain_id, contract, account, confirmed_sealed, reserved_sealed, version, owned)
       WHERE b.chain_id = v.chain_id AND b.contract = v.contract AND b.account = v.account
       RETURNING b.account`,
      entries.flatMap(({ account, balance }) => [
        account.chainId,
        account.contract,
        account.account,
        box.seal(balance.confirmed, confirmedBinding(account)),
        box.seal(balance.reserved, reservedBinding(account)),
        balance.version.toString(),
        balance.owned
      ])
    ).pipe(Effect.flatMap(everyHeldRow(entries.length, "balance rows")))
  }

  /** Writes locked API-key totals in one statement (a group's changed ones, or one outside a group), as `updateBalances`. */
  const updateKeyTotals = (entries: ReadonlyArray<HeldKeyTotal>): Effect.Effect<void, SqlError.SqlError> => {
    if (entries.length === 0) return Effect.void
    const values = valuesPlaceholders(entries.length, ["::text", "::text", "::text", "::text", "::bytea", "::bigint"])
    return sql.unsafe<{ readonly account: string }>(
      `UPDATE guardian_key_totals t SET total_sealed = v.total_sealed, transfers = t.transfers + v.added
       FROM (VALUES ${values}) AS v (chain_id, contract, account, api_key_id, total_sealed, added)
       WHERE t.chain_id = v.chain_id AND t.contract = v.contract AND t.account = v.account AND t.api_key_id = v.api_key_id
       RETURNING t.account`,
      entries.flatMap((entry) => [
        entry.account.chainId,
        entry.account.contract,
        entry.account.account,
        entry.apiKeyId,
        box.seal(entry.total, keyTotalBinding(entry.account, entry.apiKeyId)),
        String(entry.added)
      ])
    ).pipe(Effect.flatMap(everyHeldRow(entries.length, "key totals")))
  }

  /**
   * A conflict the in-memory checks could not see: another guardian process committed a row
   * after the prefetch read it absent. It fails the group, whose units then run alone. Only a
   * group reaches it: without a prefetch nothing is recorded in memory.
   */
  const committedMeanwhile = (what: string) =>
    Effect.die(new Error(`a group's ${what} met rows another transaction committed after its prefetch`))

  /** Inserts reservations in one statement; answers the transfer ids inserted (an existing one is skipped). */
  const insertReservationRows = (entries: ReadonlyArray<NewReservation>) => {
    const casts = ["::text", "::text", "::text", "::text", "::text", "::text", "::text", "::bigint", "::bigint", "::bytea", "::bigint", "::text", "::text", "::bigint", "::text"]
    return sql.unsafe<{ readonly transfer_id: string }>(
      `INSERT INTO guardian_reservations (transfer_id, chain_id, contract, from_account, to_account, kind, nonce, deadline,
         expires_at_ms, amount_sealed, spend_bucket, request_digest, result, created_at_ms, api_key_id, status)
       VALUES ${valuesPlaceholders(entries.length, casts, ", 'reserved'")}
       ON CONFLICT (transfer_id) DO NOTHING
       RETURNING transfer_id`,
      entries.flatMap(({ nowMs, reservation }) => [
        reservation.transferId,
        reservation.chainId,
        reservation.contract,
        reservation.fromAccount,
        reservation.toAccount,
        reservation.kind,
        reservation.nonce.toString(),
        reservation.deadline.toString(),
        String(reservation.expiresAtMs),
        box.seal(reservation.amount, reservationBinding(reservation.transferId)),
        reservation.spendBucket === null ? null : String(reservation.spendBucket),
        reservation.requestDigest,
        reservation.result,
        String(nowMs),
        reservation.apiKeyId
      ])
    )
  }

  /** Inserts decisions in one statement; answers the transfer ids inserted (an existing one is skipped). */
  const insertDecisionRows = (entries: ReadonlyArray<readonly [string, NewDecision]>) =>
    sql.unsafe<{ readonly transfer_id: string }>(
      `INSERT INTO guardian_decisions (transfer_id, request_digest, held, redecisions, decided_at_ms)
       VALUES ${valuesPlaceholders(entries.length, ["::text", "::text", "::boolean", "::integer", "::bigint"])}
       ON CONFLICT (transfer_id) DO NOTHING
       RETURNING transfer_id`,
      entries.flatMap(([transferId, { decision, nowMs }]) => [
        transferId,
        decision.requestDigest,
        decision.held,
        String(decision.redecisions),
        String(nowMs)
      ])
    )

  /** A group's new rows of one table, each checked inserted (see `HeldRows`). */
  const insertAll = <E>(
    what: string,
    entries: ReadonlyArray<E>,
    insert: (entries: ReadonlyArray<E>) => Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>
  ): Effect.Effect<void, SqlError.SqlError> =>
    entries.length === 0
      ? Effect.void
      : Effect.flatMap(insert(entries), (rows) => rows.length === entries.length ? Effect.void : committedMeanwhile(what))

  /** The status changes of a group's locked reservations in one statement, each row checked written. */
  const updateReservations = (
    entries: ReadonlyArray<readonly [string, ReservationChange]>
  ): Effect.Effect<void, SqlError.SqlError> => {
    if (entries.length === 0) return Effect.void
    return sql.unsafe<{ readonly transfer_id: string }>(
      `UPDATE guardian_reservations r
       SET status = v.status, settled_at_ms = COALESCE(v.settled_at_ms, r.settled_at_ms),
         recipient_credited = r.recipient_credited OR v.recipient_credited
       FROM (VALUES ${valuesPlaceholders(entries.length, ["::text", "::text", "::bigint", "::boolean"])})
         AS v (transfer_id, status, settled_at_ms, recipient_credited)
       WHERE r.transfer_id = v.transfer_id
       RETURNING r.transfer_id`,
      entries.flatMap(([transferId, change]) => [
        transferId,
        change.status,
        change.settledAtMs === null ? null : String(change.settledAtMs),
        change.recipientCredited
      ])
    ).pipe(Effect.flatMap(everyHeldRow(entries.length, "reservations")))
  }

  /**
   * Writes the reservations, decisions and credit logs a group holds in memory (see `HeldRows`):
   * before its commit, and before any SQL statement on those tables inside it. A unit run alone holds
   * none (nothing prefetched): nothing to write.
   */
  const writeRecords: Effect.Effect<void, SqlError.SqlError> = Effect.gen(function*() {
    const held = yield* heldRows
    if (held === undefined) return
    const reservations = [...held.newReservations.values()]
    const decisions = [...held.newDecisions.entries()]
    const changes = [...held.reservationChanges.entries()]
    const credits = [...held.newChainCredits.values()]
    held.newReservations.clear()
    held.newDecisions.clear()
    held.reservationChanges.clear()
    held.newChainCredits.clear()
    yield* insertAll("reservations", reservations, insertReservationRows)
    yield* insertAll("decisions", decisions, insertDecisionRows)
    yield* updateReservations(changes)
    yield* insertAll("chain credits", credits, insertChainCreditRows)
  })

  /** A SQL statement on reservations, decisions or credit logs: what the group holds in memory is written first. */
  const afterRecords = <A, E>(statement: Effect.Effect<A, E>) => Effect.andThen(writeRecords, statement)

  /**
   * Runs `body` (a group's units, inside its transaction) holding the rows it locks, then
   * writes the changed ones: all balances in one statement, all key totals in another. A
   * failure writes nothing: the transaction rolls back.
   */
  const withHeldRows = <A, E, R>(body: Effect.Effect<A, E, R>) =>
    Effect.suspend(() => {
      const held: HeldRows["Service"] = {
        balances: new Map(),
        keyTotals: new Map(),
        reservations: new Map(),
        reservedIds: new Map(),
        decidedIds: new Map(),
        noncesTaken: new Map(),
        newReservations: new Map(),
        newDecisions: new Map(),
        reservationChanges: new Map(),
        creditsRecorded: new Map(),
        newChainCredits: new Map()
      }
      const flush = Effect.suspend(() =>
        Effect.all([
          updateBalances([...held.balances.values()].filter((entry) => entry.written)),
          updateKeyTotals([...held.keyTotals.values()].filter((entry) => entry.added > 0)),
          writeRecords
        ], { discard: true })
      )
      return body.pipe(Effect.tap(() => flush), Effect.provideService(HeldRows, held))
    })

  const setFrozen = (account: AccountRef, reason: string | null, nowMs: number) =>
    Effect.gen(function*() {
      // frozen_reason is not among the columns a held balance writes back: the row now, the held copy too.
      const held = (yield* heldRows)?.balances.get(ref(account))
      if (held !== undefined) held.balance = { ...held.balance, frozenReason: reason }
      yield* setFrozenRow(account, reason, nowMs)
    })

  const setFrozenRow = (account: AccountRef, reason: string | null, nowMs: number) =>
    sql`
      UPDATE guardian_balances
      SET frozen_reason = ${reason}, frozen_at_ms = ${reason === null ? null : String(nowMs)}::bigint
      WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`.pipe(Effect.asVoid)

  /**
   * Locks, in one statement per kind, the rows the group's units will lock (see `RowHints`): the
   * hinted reservations, then the balances of their parties and the hinted balances, then the
   * API-key totals their confirmations add to; each held from then on as a unit's own lock
   * would have held it. Rows are locked in key order, as a unit locks its pair.
   */
  const prefetch = (hints: ReadonlyArray<RowHints>): Effect.Effect<void, SqlError.SqlError> =>
    Effect.gen(function*() {
      const held = yield* heldRows
      if (held === undefined) return
      const transferIds = [...new Set(hints.flatMap((hint) => hint.reservations ?? []))].filter((id) => !held.reservations.has(id))
      if (transferIds.length > 0) {
        const rows = yield* sql<ReservationSqlRow>`
          SELECT ${sql.literal(reservationColumns)} FROM guardian_reservations
          WHERE ${sql.in("transfer_id", transferIds)} ORDER BY transfer_id FOR UPDATE`
        for (const row of rows) held.reservations.set(row.transfer_id, yield* toReservation(row))
      }
      const accounts = new Map<string, AccountRef>()
      const keyTotals = new Map<string, { readonly account: AccountRef; readonly apiKeyId: string }>()
      for (const hint of hints) for (const account of hint.balances ?? []) accounts.set(ref(account), account)
      for (const id of transferIds) {
        const reservation = held.reservations.get(id)
        if (reservation === undefined) continue
        const sender = { chainId: reservation.chainId, contract: reservation.contract, account: reservation.fromAccount }
        accounts.set(ref(sender), sender)
        if (reservation.kind === "confidential") {
          const recipient = { ...sender, account: reservation.toAccount }
          accounts.set(ref(recipient), recipient)
        }
        if (reservation.apiKeyId !== null) keyTotals.set(keyTotalId(sender, reservation.apiKeyId), { account: sender, apiKeyId: reservation.apiKeyId })
      }
      const balances = [...accounts.entries()].filter(([id]) => !held.balances.has(id)).map(([, account]) => account)
      if (balances.length > 0) {
        const rows = yield* sql.unsafe<BalanceSqlRow & { readonly chain_id: string; readonly contract: string; readonly account: string }>(
          `SELECT chain_id, contract, account, ${balanceColumns}
           FROM guardian_balances WHERE (chain_id, contract, account) IN (VALUES ${valuesPlaceholders(balances.length, ["::text", "::text", "::text"])})
           ORDER BY chain_id, contract, account FOR UPDATE`,
          balances.flatMap((account) => [account.chainId, account.contract, account.account])
        )
        for (const row of rows) {
          const account = { chainId: row.chain_id, contract: row.contract, account: row.account }
          held.balances.set(ref(account), { account, balance: yield* toBalance(row, account), written: false })
        }
      }
      const totals = [...keyTotals.entries()].filter(([id]) => !held.keyTotals.has(id)).map(([, total]) => total)
      if (totals.length > 0) {
        const rows = yield* sql.unsafe<{ readonly chain_id: string; readonly contract: string; readonly account: string; readonly api_key_id: string; readonly total_sealed: Uint8Array }>(
          `SELECT chain_id, contract, account, api_key_id, total_sealed FROM guardian_key_totals
           WHERE (chain_id, contract, account, api_key_id) IN (VALUES ${valuesPlaceholders(totals.length, ["::text", "::text", "::text", "::text"])})
           ORDER BY chain_id, contract, account, api_key_id FOR UPDATE`,
          totals.flatMap((total) => [total.account.chainId, total.account.contract, total.account.account, total.apiKeyId])
        )
        for (const row of rows) {
          const account = { chainId: row.chain_id, contract: row.contract, account: row.account }
          const total = yield* open(row.total_sealed, keyTotalBinding(account, row.api_key_id))
          held.keyTotals.set(keyTotalId(account, row.api_key_id), { account, apiKeyId: row.api_key_id, total, added: 0 })
        }
      }
      // Read under the senders' locks, as `recordedBefore` is; a sender whose row does not exist
      // yet is not locked here, and its unit reads its records itself, after creating the row.
      // (The prefetch runs before any unit: nothing is held in memory to write first.)
      const decisions = hints.flatMap((hint) => hint.decisions ?? []).filter((decision) => held.balances.has(ref(decision.sender)))
      if (decisions.length > 0) {
        const rows = yield* sql.unsafe<{
          readonly position: number
          readonly reserved: boolean
          readonly decided: boolean
          readonly nonce_taken: boolean
        }>(
          `SELECT v.position,
             EXISTS (SELECT 1 FROM guardian_reservations r WHERE r.transfer_id = v.transfer_id) AS reserved,
             EXISTS (SELECT 1 FROM guardian_decisions d WHERE d.transfer_id = v.transfer_id) AS decided,
             EXISTS (
               SELECT 1 FROM guardian_reservations r
               WHERE r.chain_id = v.chain_id AND r.contract = v.contract AND r.from_account = v.from_account AND r.nonce = v.nonce
             ) AS nonce_taken
           FROM (VALUES ${valuesPlaceholders(decisions.length, ["::text", "::text", "::text", "::text", "::text", "::integer"])})
             AS v (transfer_id, chain_id, contract, from_account, nonce, position)`,
          decisions.flatMap((decision, position) => [
            decision.transferId,
            decision.sender.chainId,
            decision.sender.contract,
            decision.sender.account,
            decision.nonce.toString(),
            String(position)
          ])
        )
        const byPosition = new Map(rows.map((row) => [Number(row.position), row]))
        for (const [position, decision] of decisions.entries()) {
          const row = byPosition.get(position)
          if (row === undefined) return yield* Effect.die(new Error("invariant violated: a VALUES row came back without its answer"))
          held.reservedIds.set(decision.transferId, row.reserved)
          held.decidedIds.set(decision.transferId, row.decided)
          // Another hint's decision may name the same nonce under another transfer id: taken by either.
          const nonce = nonceId(decision.sender, decision.nonce)
          held.noncesTaken.set(nonce, row.nonce_taken || held.noncesTaken.get(nonce) === true)
        }
      }
      const credits = [...new Map(hints.flatMap((hint) => hint.credits ?? []).map((credit) => [creditId(credit), credit])).values()]
        .filter((credit) => !held.creditsRecorded.has(creditId(credit)))
      if (credits.length > 0) {
        const rows = yield* sql.unsafe<{ readonly chain_id: string; readonly tx_hash: string; readonly log_index: number }>(
          `SELECT c.chain_id, c.tx_hash, c.log_index FROM guardian_chain_credits c
           JOIN (VALUES ${valuesPlaceholders(credits.length, ["::text", "::text", "::integer"])}) AS v (chain_id, tx_hash, log_index)
             ON c.chain_id = v.chain_id AND c.tx_hash = v.tx_hash AND c.log_index = v.log_index`,
          credits.flatMap((credit) => [credit.chainId, credit.txHash, String(credit.logIndex)])
        )
        for (const credit of credits) held.creditsRecorded.set(creditId(credit), false)
        for (const row of rows) held.creditsRecorded.set(creditId({ chainId: row.chain_id, txHash: row.tx_hash, logIndex: Number(row.log_index) }), true)
      }
    })

  const findReservation = (transferId: string, options: { readonly forUpdate: boolean }) =>
    Effect.gen(function*() {
      // Locked by the group's prefetch and not written since: the row as a read would give it.
      const prefetched = (yield* heldRows)?.reservations.get(transferId)
      if (prefetched !== undefined) return prefetched
      const rows = yield* afterRecords(options.forUpdate
        ? sql<ReservationSqlRow>`SELECT ${sql.literal(reservationColumns)} FROM guardian_reservations WHERE transfer_id = ${transferId} FOR UPDATE`
        : sql<ReservationSqlRow>`SELECT ${sql.literal(reservationColumns)} FROM guardian_reservations WHERE transfer_id = ${transferId}`)
      const row = rows[0]
      return row === undefined ? undefined : yield* toReservation(row)
    })

  /** The decision recorded for a transfer id (guardian_decisions), locked for the caller's transaction. */
  const findDecision = (transferId: string) =>
    afterRecords(sql<{ readonly request_digest: string; readonly held: boolean; readonly redecisions: number }>`
      SELECT request_digest, held, redecisions FROM guardian_decisions WHERE transfer_id = ${transferId} FOR UPDATE`).pipe(
      Effect.map((rows) => {
        const row = rows[0]
        return row === undefined
          ? undefined
          : { requestDigest: row.request_digest, held: row.held, redecisions: Number(row.redecisions) } satisfies DecisionRow
      })
    )

  /**
   * Records the first decision of a transfer id; false when a concurrent twin recorded one
   * first (the caller then decides again and finds it).
   */
  const insertDecision = (transferId: string, decision: DecisionRow, nowMs: number) =>
    Effect.gen(function*() {
      const held = yield* heldRows
      const known = held?.decidedIds.get(transferId)
      // Known to the group (see `HeldRows`): recorded in memory, or found taken, without a statement.
      if (held !== undefined && known !== undefined) {
        if (known) return false
        held.decidedIds.set(transferId, true)
        held.newDecisions.set(transferId, { decision, nowMs })
        return true
      }
      const rows = yield* afterRecords(insertDecisionRows([[transferId, { decision, nowMs }]]))
      held?.decidedIds.set(transferId, true)
      return rows.length === 1
    })

  const updateDecision = (transferId: string, decision: DecisionRow, nowMs: number) =>
    afterRecords(sql`
      UPDATE guardian_decisions
      SET request_digest = ${decision.requestDigest}, held = ${decision.held}, redecisions = ${decision.redecisions},
          decided_at_ms = ${String(nowMs)}::bigint
      WHERE transfer_id = ${transferId}`).pipe(Effect.asVoid)

  /**
   * What a new decision must know was recorded before, in one statement instead of three (issue
   * 16: almost every transfer id is new, and then none of the rows exists): a reservation under
   * the transfer id, a decision under it, another reservation under the sender's nonce.
   */
  const recordedBefore = (transferId: string, sender: AccountRef, nonce: bigint) =>
    Effect.flatMap(heldRows, (held) => {
      // Read by the group's prefetch and kept up to date by its units (see `HeldRows`).
      const reserved = held?.reservedIds.get(transferId)
      const decided = held?.decidedIds.get(transferId)
      const nonceTaken = held?.noncesTaken.get(nonceId(sender, nonce))
      return reserved !== undefined && decided !== undefined && nonceTaken !== undefined
        ? Effect.succeed({ reserved, decided, nonceTaken })
        : recordedBeforeRead(transferId, sender, nonce)
    })

  const recordedBeforeRead = (transferId: string, sender: AccountRef, nonce: bigint) =>
    afterRecords(sql<{ readonly reserved: boolean; readonly decided: boolean; readonly nonce_taken: boolean }>`
      SELECT
        EXISTS (SELECT 1 FROM guardian_reservations WHERE transfer_id = ${transferId}) AS reserved,
        EXISTS (SELECT 1 FROM guardian_decisions WHERE transfer_id = ${transferId}) AS decided,
        EXISTS (
          SELECT 1 FROM guardian_reservations
          WHERE chain_id = ${sender.chainId} AND contract = ${sender.contract} AND from_account = ${sender.account}
            AND nonce = ${nonce.toString()}
        ) AS nonce_taken`).pipe(Effect.flatMap((rows) => {
      const row = rows[0]
      return row === undefined
        ? Effect.die(new Error("invariant violated: a SELECT without FROM returned no row"))
        : Effect.succeed({ reserved: row.reserved, decided: row.decided, nonceTaken: row.nonce_taken })
    }))

  /** Inserts a reservation; false when the transfer id exists already (a concurrent twin). */
  const insertReservation = (reservation: Omit<ReservationRow, "status" | "recipientCredited">, nowMs: number) =>
    Effect.gen(function*() {
      const held = yield* heldRows
      const sender = { chainId: reservation.chainId, contract: reservation.contract, account: reservation.fromAccount }
      const nonce = nonceId(sender, reservation.nonce)
      const reserved = held?.reservedIds.get(reservation.transferId)
      // Known to the group (see `HeldRows`): an existing transfer id is a conflict, as ON CONFLICT
      // would answer; a new one with a free nonce is recorded in memory. A taken nonce goes to SQL,
      // whose unique index refuses it as it always did.
      if (held !== undefined && reserved !== undefined) {
        if (reserved) return false
        if (held.noncesTaken.get(nonce) === false) {
          held.reservedIds.set(reservation.transferId, true)
          held.noncesTaken.set(nonce, true)
          held.newReservations.set(reservation.transferId, { reservation, nowMs })
          return true
        }
      }
      // (An insert never changes an existing row: a reservation the group holds stays as it is.)
      const inserted = (yield* afterRecords(insertReservationRows([{ reservation, nowMs }]))).length === 1
      held?.reservedIds.set(reservation.transferId, true)
      if (inserted) held?.noncesTaken.set(nonce, true)
      return inserted
    })

  /** Sets a reservation's status; `recipientCredited` also marks its recipient credited, in the same write. */
  const setReservationStatus = (
    transferId: string,
    status: ReservationStatus,
    nowMs: number,
    options: { readonly recipientCredited?: boolean } = {}
  ) =>
    changeReservation(transferId, { status, settledAtMs: nowMs, recipientCredited: options.recipientCredited === true })

  /**
   * Changes a reservation: in memory when the group holds it locked (written by the flush, see
   * `HeldRows`), by SQL otherwise. `settledAtMs` null leaves the row's as it is.
   */
  const changeReservation = (transferId: string, change: Omit<ReservationChange, "status"> & { readonly status?: ReservationStatus }) =>
    Effect.gen(function*() {
      const held = yield* heldRows
      const row = held?.reservations.get(transferId)
      if (held !== undefined && row !== undefined) {
        const changed = {
          status: change.status ?? row.status,
          settledAtMs: change.settledAtMs ?? held.reservationChanges.get(transferId)?.settledAtMs ?? null,
          recipientCredited: row.recipientCredited || change.recipientCredited
        }
        held.reservations.set(transferId, { ...row, status: changed.status, recipientCredited: changed.recipientCredited })
        held.reservationChanges.set(transferId, changed)
        return
      }
      // Not held by the group (nothing to keep in step): the row itself, after what the group holds.
      yield* afterRecords(sql`
        UPDATE guardian_reservations
        SET status = COALESCE(${change.status ?? null}::text, status),
          settled_at_ms = COALESCE(${change.settledAtMs === null ? null : String(change.settledAtMs)}::bigint, settled_at_ms),
          recipient_credited = recipient_credited OR ${change.recipientCredited}
        WHERE transfer_id = ${transferId}`)
    })

  /** Reservations still open past their expiry, oldest first. */
  const dueReservations = (nowMs: number, limit: number) =>
    afterRecords(sql<{ readonly transfer_id: string }>`
      SELECT transfer_id FROM guardian_reservations
      WHERE status = 'reserved' AND expires_at_ms <= ${String(nowMs)}::bigint
      ORDER BY expires_at_ms LIMIT ${limit}`).pipe(Effect.map((rows) => rows.map((row) => row.transfer_id)))

  /** Open reservations that debit or credit the account. */
  const openReservationsOf = (account: AccountRef, limit: number) =>
    Effect.gen(function*() {
      const rows = yield* afterRecords(sql<ReservationSqlRow>`
        SELECT ${sql.literal(reservationColumns)} FROM guardian_reservations
        WHERE status = 'reserved' AND chain_id = ${account.chainId} AND contract = ${account.contract}
          AND (from_account = ${account.account} OR to_account = ${account.account})
        ORDER BY created_at_ms LIMIT ${limit}`)
      return yield* Effect.forEach(rows, toReservation)
    })

  /** The agent's spend over buckets [firstBucket, endBucket). */
  const spentIn = (agent: AccountRef, firstBucket: number, endBucket: number) =>
    Effect.gen(function*() {
      const rows = yield* sql<{ readonly bucket: string; readonly spent_sealed: Uint8Array }>`
        SELECT bucket::text AS bucket, spent_sealed FROM guardian_agent_spend
        WHERE chain_id = ${agent.chainId} AND contract = ${agent.contract} AND agent = ${agent.account}
          AND bucket >= ${String(firstBucket)}::bigint AND bucket < ${String(endBucket)}::bigint`
      let total = 0n
      for (const row of rows) total += yield* open(row.spent_sealed, spendBinding(agent, Number(row.bucket)))
      return total
    })

  /** Adds `delta` (negative to release) to one bucket of the agent's spend. */
  const addSpend = (agent: AccountRef, bucket: number, delta: bigint) =>
    Effect.gen(function*() {
      const binding = spendBinding(agent, bucket)
      const row = yield* lockOrCreate(
        sql<{ readonly spent_sealed: Uint8Array }>`
          SELECT spent_sealed FROM guardian_agent_spend
          WHERE chain_id = ${agent.chainId} AND contract = ${agent.contract} AND agent = ${agent.account}
            AND bucket = ${String(bucket)}::bigint
          FOR UPDATE`,
        () => sql`
          INSERT INTO guardian_agent_spend (chain_id, contract, agent, bucket, spent_sealed)
          VALUES (${agent.chainId}, ${agent.contract}, ${agent.account}, ${String(bucket)}::bigint, ${box.seal(0n, binding)})
          ON CONFLICT DO NOTHING`
      )
      const current = yield* open(row?.spent_sealed ?? new Uint8Array(), binding)
      const next = current + delta
      if (next < 0n) return yield* Effect.die(new Error("invariant violated: an agent's spend would go negative"))
      yield* sql`
        UPDATE guardian_agent_spend SET spent_sealed = ${box.seal(next, binding)}
        WHERE chain_id = ${agent.chainId} AND contract = ${agent.contract} AND agent = ${agent.account}
          AND bucket = ${String(bucket)}::bigint`
    })

  /** Adds a confirmed debit to the total of the API key that asked for it (D40), in the caller's transaction. */
  const addKeyTotal = (account: AccountRef, apiKeyId: string, amount: bigint) =>
    Effect.gen(function*() {
      const binding = keyTotalBinding(account, apiKeyId)
      const held = (yield* heldRows)?.keyTotals
      const id = keyTotalId(account, apiKeyId)
      let entry = held?.get(id)
      if (entry === undefined) {
        const row = yield* lockOrCreate(
          sql<{ readonly total_sealed: Uint8Array }>`
            SELECT total_sealed FROM guardian_key_totals
            WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
              AND api_key_id = ${apiKeyId}
            FOR UPDATE`,
          () => sql`
            INSERT INTO guardian_key_totals (chain_id, contract, account, api_key_id, total_sealed, transfers)
            VALUES (${account.chainId}, ${account.contract}, ${account.account}, ${apiKeyId}, ${box.seal(0n, binding)}, 0)
            ON CONFLICT DO NOTHING`
        )
        entry = { account, apiKeyId, total: yield* open(row?.total_sealed ?? new Uint8Array(), binding), added: 0 }
        held?.set(id, entry)
      }
      // Sealed at rest as u64 base units: 18.4 trillion USDG through one key before it saturates.
      entry.total = entry.total + amount >= 1n << 64n ? (1n << 64n) - 1n : entry.total + amount
      entry.added++
      if (held === undefined) yield* updateKeyTotals([entry])
    })

  /** Every API key's total for the account, in key id order. */
  const keyTotals = (account: AccountRef) =>
    Effect.gen(function*() {
      const rows = yield* sql<{ readonly api_key_id: string; readonly total_sealed: Uint8Array; readonly transfers: string }>`
        SELECT api_key_id, total_sealed, transfers::text AS transfers FROM guardian_key_totals
        WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
        ORDER BY api_key_id`
      return yield* Effect.forEach(rows, (row) =>
        open(row.total_sealed, keyTotalBinding(account, row.api_key_id)).pipe(
          Effect.map((amount) => ({ apiKeyId: row.api_key_id, amount, transfers: BigInt(row.transfers) }))
        ))
    })

  const findCredit = (creditId: string) =>
    sql<{ readonly request_digest: string }>`SELECT request_digest FROM guardian_credits WHERE credit_id = ${creditId}`.pipe(
      Effect.map((rows) => rows[0]?.request_digest)
    )

  const insertCredit = (
    credit: { readonly creditId: string; readonly amount: bigint; readonly requestDigest: string } & AccountRef,
    nowMs: number
  ) =>
    sql<{ readonly credit_id: string }>`
      INSERT INTO guardian_credits (credit_id, chain_id, contract, account, amount_sealed, request_digest, created_at_ms)
      VALUES (${credit.creditId}, ${credit.chainId}, ${credit.contract}, ${credit.account},
        ${box.seal(credit.amount, creditBinding(credit.creditId))}, ${credit.requestDigest}, ${String(nowMs)}::bigint)
      ON CONFLICT (credit_id) DO NOTHING
      RETURNING credit_id`.pipe(Effect.map((rows) => rows.length === 1))

  const markRecipientCredited = (transferId: string) => changeReservation(transferId, { settledAtMs: null, recipientCredited: true })

  // ------------------------------------------------------------------ chain following

  const cursor = (chainId: string, scope: string) =>
    sql<{ readonly next_block: string }>`
      SELECT next_block::text AS next_block FROM guardian_chain_cursors WHERE chain_id = ${chainId} AND scope = ${scope}`.pipe(
      Effect.map((rows) => (rows[0] === undefined ? undefined : BigInt(rows[0].next_block)))
    )

  /** Starts following a scope at `nextBlock`; a scope already followed keeps its cursor. */
  const startCursor = (chainId: string, scope: string, nextBlock: bigint, nowMs: number) =>
    sql`
      INSERT INTO guardian_chain_cursors (chain_id, scope, next_block, updated_at_ms)
      VALUES (${chainId}, ${scope}, ${nextBlock.toString()}::bigint, ${String(nowMs)}::bigint)
      ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

  /** Moves a cursor forward (never back: a concurrent step may have gone further). */
  const advanceCursor = (chainId: string, scope: string, nextBlock: bigint, nowMs: number) =>
    sql`
      UPDATE guardian_chain_cursors SET next_block = ${nextBlock.toString()}::bigint, updated_at_ms = ${String(nowMs)}::bigint
      WHERE chain_id = ${chainId} AND scope = ${scope} AND next_block < ${nextBlock.toString()}::bigint`.pipe(Effect.asVoid)

  /** The ConfidentialTokens followed on a chain, with their cursors. */
  const followedContracts = (chainId: string) =>
    sql<{ readonly scope: string; readonly next_block: string }>`
      SELECT scope, next_block::text AS next_block FROM guardian_chain_cursors
      WHERE chain_id = ${chainId} AND scope <> ${discoveryScope} ORDER BY scope`.pipe(
      Effect.map((rows) => rows.map((row) => ({ contract: row.scope, nextBlock: BigInt(row.next_block) })))
    )

  /** Inserts credit logs in one statement; answers a row for each one inserted (one recorded before is skipped). */
  const insertChainCreditRows = (entries: ReadonlyArray<NewChainCredit>) =>
    sql.unsafe<{ readonly tx_hash: string }>(
      `INSERT INTO guardian_chain_credits (chain_id, tx_hash, log_index, contract, account, kind, transfer_id, block_number,
         outcome, created_at_ms)
       VALUES ${valuesPlaceholders(entries.length, ["::text", "::text", "::integer", "::text", "::text", "::text", "::text", "::bigint", "::text", "::bigint"])}
       ON CONFLICT DO NOTHING
       RETURNING tx_hash`,
      entries.flatMap(({ credit, nowMs }) => [
        credit.chainId,
        credit.txHash,
        String(credit.logIndex),
        credit.contract,
        credit.account,
        credit.kind,
        credit.transferId,
        credit.blockNumber.toString(),
        credit.outcome,
        String(nowMs)
      ])
    )

  /**
   * Records a credit log; false when it was recorded before (then nothing may be booked). In a
   * group that prefetched it (see `HeldRows`), in memory until the flush.
   */
  const insertChainCredit = (credit: ChainCreditRow, nowMs: number) =>
    Effect.gen(function*() {
      const held = yield* heldRows
      const id = creditId(credit)
      const recorded = held?.creditsRecorded.get(id)
      if (held !== undefined && recorded !== undefined) {
        if (recorded) return false
        held.creditsRecorded.set(id, true)
        held.newChainCredits.set(id, { credit, nowMs })
        return true
      }
      const inserted = (yield* insertChainCreditRows([{ credit, nowMs }])).length === 1
      held?.creditsRecorded.set(id, true)
      return inserted
    })

  const chainCreditRecorded = (chainId: string, txHash: string, logIndex: number) =>
    afterRecords(sql<{ readonly tx_hash: string }>`
      SELECT tx_hash FROM guardian_chain_credits
      WHERE chain_id = ${chainId} AND tx_hash = ${txHash} AND log_index = ${logIndex}`).pipe(Effect.map((rows) => rows.length > 0))

  /** Whether credits were reported through `credit` for this contract (books older than following). */
  const hasReportedCredits = (chainId: string, contract: string) =>
    sql<{ readonly credit_id: string }>`
      SELECT credit_id FROM guardian_credits WHERE chain_id = ${chainId} AND contract = ${contract} LIMIT 1`.pipe(
      Effect.map((rows) => rows.length > 0)
    )

  // ------------------------------------------------------------------ alerts

  /** Raises an alert, or confirms an open one; true when it is new. */
  const raiseAlert = (account: AccountRef, kind: string, explanation: string, nowMs: number) =>
    Effect.gen(function*() {
      const inserted = yield* sql<{ readonly kind: string }>`
        INSERT INTO guardian_alerts (chain_id, contract, account, kind, since_ms, last_seen_ms, explanation)
        VALUES (${account.chainId}, ${account.contract}, ${account.account}, ${kind}, ${String(nowMs)}::bigint,
          ${String(nowMs)}::bigint, ${explanation})
        ON CONFLICT DO NOTHING
        RETURNING kind`
      if (inserted.length === 1) return true
      yield* sql`
        UPDATE guardian_alerts SET last_seen_ms = ${String(nowMs)}::bigint, explanation = ${explanation}
        WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
          AND kind = ${kind}`
      return false
    })

  /** Clears the account's alerts of these kinds; the number cleared. */
  const clearAlerts = (account: AccountRef, kinds: ReadonlyArray<string>) =>
    sql<{ readonly kind: string }>`
      DELETE FROM guardian_alerts
      WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
        AND kind IN ${sql.in(kinds)}
      RETURNING kind`.pipe(Effect.map((rows) => rows.length))

  const alertCount = sql<{ readonly count: string }>`SELECT count(*)::text AS count FROM guardian_alerts`.pipe(
    Effect.map((rows) => Number(rows[0]?.count ?? "0"))
  )

  const listAlerts = (limit: number) =>
    sql<{
      readonly chain_id: string
      readonly contract: string
      readonly account: string
      readonly kind: string
      readonly since_ms: string
      readonly last_seen_ms: string
      readonly explanation: string
    }>`
      SELECT chain_id, contract, account, kind, since_ms::text AS since_ms, last_seen_ms::text AS last_seen_ms, explanation
      FROM guardian_alerts ORDER BY since_ms, chain_id, contract, account, kind LIMIT ${limit}`.pipe(
      Effect.map((rows) =>
        rows.map((row): AlertRow => ({
          chainId: row.chain_id,
          contract: row.contract,
          account: row.account,
          kind: row.kind,
          sinceMs: Number(row.since_ms),
          lastSeenMs: Number(row.last_seen_ms),
          explanation: row.explanation
        }))
      )
    )

  // ------------------------------------------------------------------ rotation vetoes

  /** Records a veto; false when this proposal was vetoed already (a re-read log). */
  const insertRotationVeto = (veto: RotationVetoRow, nowMs: number) =>
    sql<{ readonly proposal_id: string }>`
      INSERT INTO guardian_rotation_vetoes (chain_id, contract, proposal_id, new_signer, executable_at, tx_hash, block_number,
        signature, seen_at_ms)
      VALUES (${veto.chainId}, ${veto.contract}, ${veto.proposalId.toString()}, ${veto.newSigner},
        ${veto.executableAt.toString()}::bigint, ${veto.txHash}, ${veto.blockNumber.toString()}::bigint, ${veto.signature},
        ${String(nowMs)}::bigint)
      ON CONFLICT DO NOTHING
      RETURNING proposal_id`.pipe(Effect.map((rows) => rows.length === 1))

  /** The veto of one proposal, if the guardian made one. */
  const rotationVetoOf = (chainId: string, contract: string, proposalId: bigint) =>
    sql<{ readonly proposal_id: string; readonly new_signer: string; readonly executable_at: string; readonly signature: string }>`
      SELECT proposal_id, new_signer, executable_at::text AS executable_at, signature
      FROM guardian_rotation_vetoes
      WHERE chain_id = ${chainId} AND contract = ${contract.toLowerCase()} AND proposal_id = ${proposalId.toString()}`.pipe(
      Effect.map((rows) => {
        const row = rows[0]
        return row === undefined ? undefined : {
          proposalId: BigInt(row.proposal_id),
          newSigner: row.new_signer,
          executableAt: BigInt(row.executable_at),
          signature: row.signature
        }
      })
    )

  /** The latest veto of a proposal to `newSigner` on this contract (what its alert carries). */
  const latestRotationVeto = (chainId: string, contract: string, newSigner: string) =>
    sql<{
      readonly proposal_id: string
      readonly new_signer: string
      readonly executable_at: string
      readonly tx_hash: string
      readonly block_number: string
      readonly signature: string
    }>`
      SELECT proposal_id, new_signer, executable_at::text AS executable_at, tx_hash, block_number::text AS block_number, signature
      FROM guardian_rotation_vetoes
      WHERE chain_id = ${chainId} AND contract = ${contract} AND new_signer = ${newSigner}
      ORDER BY proposal_id::numeric DESC LIMIT 1`.pipe(
      Effect.map((rows) => {
        const row = rows[0]
        return row === undefined ? undefined : {
          chainId,
          contract,
          proposalId: BigInt(row.proposal_id),
          newSigner: row.new_signer,
          executableAt: BigInt(row.executable_at),
          txHash: row.tx_hash,
          blockNumber: BigInt(row.block_number),
          signature: row.signature
        } satisfies RotationVetoRow
      })
    )

  // ------------------------------------------------------------------ pinned keys

  const pinnedKey = (account: AccountRef) =>
    sql<{ readonly public_key: string }>`
      SELECT public_key FROM guardian_key_pins
      WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`.pipe(
      Effect.map((rows) => rows[0]?.public_key)
    )

  /** Pins `publicKey` for the account unless one is pinned already; answers the pinned key. */
  const pinKey = (account: AccountRef, publicKey: string, nowMs: number) =>
    Effect.gen(function*() {
      yield* sql`
        INSERT INTO guardian_key_pins (chain_id, contract, account, public_key, created_at_ms)
        VALUES (${account.chainId}, ${account.contract}, ${account.account}, ${publicKey}, ${String(nowMs)}::bigint)
        ON CONFLICT DO NOTHING`
      return (yield* pinnedKey(account)) ?? publicKey
    })

  const frozenCount = sql<{ readonly count: string }>`
    SELECT count(*)::text AS count FROM guardian_balances WHERE frozen_reason IS NOT NULL`.pipe(
    Effect.map((rows) => Number(rows[0]?.count ?? "0"))
  )

  /** Accounts the periodic reconciliation checks, after `after` in key order (paging). */
  const ownedAccounts = (after: AccountRef | undefined, limit: number) =>
    (after === undefined
      ? sql<{ readonly chain_id: string; readonly contract: string; readonly account: string }>`
          SELECT chain_id, contract, account FROM guardian_balances WHERE owned
          ORDER BY chain_id, contract, account LIMIT ${limit}`
      : sql<{ readonly chain_id: string; readonly contract: string; readonly account: string }>`
          SELECT chain_id, contract, account FROM guardian_balances
          WHERE owned AND (chain_id, contract, account) > (${after.chainId}, ${after.contract}, ${after.account})
          ORDER BY chain_id, contract, account LIMIT ${limit}`).pipe(
        Effect.map((rows) => rows.map((row): AccountRef => ({ chainId: row.chain_id, contract: row.contract, account: row.account })))
      )

  return {
    lockBalance,
    readBalance,
    writeBalance,
    withHeldRows,
    prefetch,
    setFrozen,
    findReservation,
    findDecision,
    recordedBefore,
    insertDecision,
    updateDecision,
    insertReservation,
    setReservationStatus,
    dueReservations,
    openReservationsOf,
    spentIn,
    addSpend,
    addKeyTotal,
    keyTotals,
    findCredit,
    insertCredit,
    frozenCount,
    ownedAccounts,
    markRecipientCredited,
    cursor,
    startCursor,
    advanceCursor,
    followedContracts,
    insertChainCredit,
    chainCreditRecorded,
    hasReportedCredits,
    raiseAlert,
    clearAlerts,
    alertCount,
    listAlerts,
    insertRotationVeto,
    latestRotationVeto,
    rotationVetoOf,
    pinnedKey,
    pinKey
  }
}
