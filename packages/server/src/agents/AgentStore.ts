/**
 * The agents and spend_policies tables. Every read by a caller is scoped by
 * the owner's account id and the key's mode (D38: an agent, and so its policy,
 * belongs to the mode of the key that created it); the policy read for signing
 * is by agent id, whose key is of the agent's mode.
 *
 * @since 0.1.0
 */
import * as Invariant from "../platform/Invariant.ts"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { Mode } from "@pps/api/ApiKeys"
import { type Asset, AssetName } from "@pps/api/Transfers"
import { parseActiveHours, type PolicyRules, type SpendPolicy } from "@pps/api/Agents"

const PolicyRow = Schema.Struct({
  policy_id: Schema.String,
  agent_account_id: Schema.String,
  daily_limit_units: Schema.String,
  per_transaction_limit_units: Schema.String,
  hitl_threshold_units: Schema.NullOr(Schema.String),
  allowed_recipients: Schema.NullOr(Schema.String),
  assets: Schema.String,
  active_hours: Schema.String,
  time_zone: Schema.String,
  updated_at: Schema.String
})

const decodeRows = Schema.decodeUnknownEffect(Schema.Array(PolicyRow))
const decodeStrings = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(Schema.String)))
const decodeAssets = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(AssetName)))

const toPolicy = (row: typeof PolicyRow.Type): SpendPolicy => ({
  policyId: row.policy_id,
  agentAccountId: row.agent_account_id,
  dailyLimitUnits: BigInt(row.daily_limit_units),
  perTransactionLimitUnits: BigInt(row.per_transaction_limit_units),
  hitlThresholdUnits: row.hitl_threshold_units === null ? null : BigInt(row.hitl_threshold_units),
  allowedRecipients: row.allowed_recipients === null ? null : decodeStrings(row.allowed_recipients),
  assets: decodeAssets(row.assets) as ReadonlyArray<Asset>,
  // Stored only after validation: a window that no longer parses is a defect.
  activeHours: parseActiveHours(row.active_hours)!,
  timeZone: row.time_zone,
  updatedAt: row.updated_at
})

/**
 * An agent as listed to its owner.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoredAgent {
  readonly accountId: string
  readonly ownerAccountId: string
  readonly name: string
  readonly handle: string
  readonly walletAddress: string
  readonly policyId: string
  readonly mode: Mode
}

const ruleColumns = (rules: PolicyRules) => ({
  daily: rules.dailyLimitUnits.toString(),
  perTransaction: rules.perTransactionLimitUnits.toString(),
  hitl: rules.hitlThresholdUnits === null ? null : rules.hitlThresholdUnits.toString(),
  recipients: rules.allowedRecipients === null ? null : JSON.stringify(rules.allowedRecipients),
  assets: JSON.stringify(rules.assets)
})

/**
 * @since 0.1.0
 * @category services
 */
export class AgentStore extends Context.Service<AgentStore, {
  /** The agent row and its policy (inside the caller's transaction, with the account row). */
  readonly insert: (agent: {
    readonly accountId: string
    readonly ownerAccountId: string
    readonly name: string
    readonly mode: Mode
    readonly policyId: string
    readonly rules: PolicyRules
    readonly createdAt: string
  }) => Effect.Effect<void, SqlError.SqlError>
  readonly listByOwner: (
    ownerAccountId: string,
    mode: Mode
  ) => Effect.Effect<ReadonlyArray<StoredAgent>, SqlError.SqlError>
  /** One page of `listByOwner`'s order: at most `limit` agents after skipping `offset`. */
  readonly pageByOwner: (
    ownerAccountId: string,
    mode: Mode,
    page: { readonly limit: number; readonly offset: number }
  ) => Effect.Effect<ReadonlyArray<StoredAgent>, SqlError.SqlError>
  /**
   * How many agents the owner has in the mode, read with the owner's account row locked (inside
   * the caller's transaction): two creates of one owner count one after the other (D61).
   */
  readonly countForCreate: (ownerAccountId: string, mode: Mode) => Effect.Effect<number, SqlError.SqlError>
  /** Any agent by id, in every mode: for the operator and for replaying an operation that made it. */
  readonly findAgent: (accountId: string) => Effect.Effect<Option.Option<StoredAgent>, SqlError.SqlError>
  /**
   * An agent of the caller's mode by id (D38), whoever owns it: the caller checks
   * ownership, D29 tells 404 from 403, and one of the other mode is unknown.
   */
  readonly findInMode: (accountId: string, mode: Mode) => Effect.Effect<Option.Option<StoredAgent>, SqlError.SqlError>
  readonly policyOf: (agentAccountId: string) => Effect.Effect<Option.Option<SpendPolicy>, SqlError.SqlError>
  /** Replaces the rules and bumps `updated_at`; the policy as stored. */
  readonly updatePolicy: (
    agentAccountId: string,
    rules: PolicyRules,
    updatedAt: string
  ) => Effect.Effect<SpendPolicy, SqlError.SqlError>
}>()("server/agents/AgentStore") {
  static readonly layer = Layer.effect(
    AgentStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const agentColumns = sql`g.account_id, g.owner_account_id, g.name, a.handle, a.wallet_address, g.policy_id, g.mode`
      const toAgent = (row: {
        account_id: string
        owner_account_id: string
        name: string
        handle: string
        wallet_address: string
        policy_id: string
        mode: Mode
      }): StoredAgent => ({
        accountId: row.account_id,
        ownerAccountId: row.owner_account_id,
        name: row.name,
        handle: row.handle,
        walletAddress: row.wallet_address,
        policyId: row.policy_id,
        mode: row.mode
      })
      type AgentRow = Parameters<typeof toAgent>[0]
      const policyColumns = sql`policy_id, agent_account_id, daily_limit_units, per_transaction_limit_units,
        hitl_threshold_units, allowed_recipients, assets, active_hours, time_zone, iso_utc(updated_at) AS updated_at`
      const onePolicy = (rows: ReadonlyArray<unknown>) =>
        decodeRows(rows).pipe(
          Invariant.orDie("a spend_policies row decodes as the policy it stores"),
          Effect.map((decoded) => Option.map(Option.fromNullishOr(decoded[0]), toPolicy)))

      return AgentStore.of({
        insert: Effect.fn("AgentStore.insert")(function*(agent) {
          const c = ruleColumns(agent.rules)
          yield* sql`
            INSERT INTO agents (account_id, owner_account_id, name, status, policy_id, mode, created_at)
            VALUES (${agent.accountId}, ${agent.ownerAccountId}, ${agent.name}, 'active', ${agent.policyId},
              ${agent.mode}, ${agent.createdAt}::timestamptz)`
          yield* sql`
            INSERT INTO spend_policies (policy_id, agent_account_id, daily_limit_units, per_transaction_limit_units,
              hitl_threshold_units, allowed_recipients, assets, active_hours, time_zone, created_at, updated_at)
            VALUES (${agent.policyId}, ${agent.accountId}, ${c.daily}, ${c.perTransaction}, ${c.hitl}, ${c.recipients},
              ${c.assets}, ${agent.rules.activeHours.text}, ${agent.rules.timeZone}, ${agent.createdAt}::timestamptz,
              ${agent.createdAt}::timestamptz)`
        }),
        listByOwner: (ownerAccountId, mode) =>
          sql<AgentRow>`
            SELECT ${agentColumns} FROM agents g JOIN accounts a ON a.account_id = g.account_id
            WHERE g.owner_account_id = ${ownerAccountId} AND g.mode = ${mode}
            ORDER BY g.created_at, g.account_id`.pipe(
            Effect.map((rows) => rows.map(toAgent))
          ),
        pageByOwner: (ownerAccountId, mode, page) =>
          sql<AgentRow>`
            SELECT ${agentColumns} FROM agents g JOIN accounts a ON a.account_id = g.account_id
            WHERE g.owner_account_id = ${ownerAccountId} AND g.mode = ${mode}
            ORDER BY g.created_at, g.account_id
            LIMIT ${page.limit} OFFSET ${page.offset}`.pipe(
            Effect.map((rows) => rows.map(toAgent))
          ),
        countForCreate: (ownerAccountId, mode) =>
          sql`SELECT 1 FROM accounts WHERE account_id = ${ownerAccountId} FOR UPDATE`.pipe(
            Effect.andThen(sql<{ count: string }>`
              SELECT count(*)::text AS count FROM agents WHERE owner_account_id = ${ownerAccountId} AND mode = ${mode}`),
            Effect.map((rows) => Number(rows[0]?.count ?? "0"))
          ),
        findAgent: (accountId) =>
          sql<AgentRow>`
            SELECT ${agentColumns} FROM agents g JOIN accounts a ON a.account_id = g.account_id
            WHERE g.account_id = ${accountId}`.pipe(Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toAgent))),
        findInMode: (accountId, mode) =>
          sql<AgentRow>`
            SELECT ${agentColumns} FROM agents g JOIN accounts a ON a.account_id = g.account_id
            WHERE g.account_id = ${accountId} AND g.mode = ${mode}`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toAgent))
          ),
        policyOf: (agentAccountId) =>
          sql`SELECT ${policyColumns} FROM spend_policies WHERE agent_account_id = ${agentAccountId}`.pipe(
            Effect.flatMap(onePolicy)
          ),
        updatePolicy: (agentAccountId, rules, updatedAt) => {
          const c = ruleColumns(rules)
          return sql`
            UPDATE spend_policies SET daily_limit_units = ${c.daily}, per_transaction_limit_units = ${c.perTransaction},
              hitl_threshold_units = ${c.hitl}, allowed_recipients = ${c.recipients}, assets = ${c.assets},
              active_hours = ${rules.activeHours.text}, time_zone = ${rules.timeZone}, updated_at = ${updatedAt}::timestamptz
            WHERE agent_account_id = ${agentAccountId}
            RETURNING ${policyColumns}`.pipe(
            Effect.flatMap(onePolicy),
            Effect.flatMap(Invariant.some("an agent found before is never deleted, nor its policy"))
          )
        }
      })
    })
  )
}
