/**
 * Agents (D21-D24, D44): create one with its spend policy, and edit a policy
 * (the API's validation error is shown next to the field it names, `param`);
 * issue an agent's API keys (the value shown once, here, after a recent passkey
 * confirmation as for the account's own keys), list them and revoke them.
 */
import { Amount } from "@pps/sdk"
import { type FormEvent, useState } from "react"
import type { PageProps } from "../App.tsx"
import { call, ppsFor } from "../api.ts"
import { KeyForm, keyRowOf, KeyTable, useKeyActions, type WireKey } from "../keys.tsx"
import { policyFieldWords, problemOf } from "../problems.ts"
import { Empty, Encrypted, ErrorNote, FieldError, invalidProps, Loading, Page, ProblemNote, ShownOnce, useLoad } from "../ui.tsx"
import type { TransferPage } from "./Transfers.tsx"

/** How many of the latest transfers (the account's and its agents') the spending figures read. */
const spendingWindow = 100

interface Spending {
  readonly total: bigint
  readonly today: bigint
  readonly count: number
}

interface Agent {
  readonly account_id: string
  readonly handle: string
  readonly public_key: string
  readonly status: string
  readonly spend_policy_id: string
}

interface Policy {
  readonly daily_limit_usdg: number
  readonly per_transaction_limit_usdg: number
  readonly hitl_threshold_usdg: number | null
  readonly allowed_recipients: ReadonlyArray<string> | null
  readonly active_hours: string
  readonly time_zone?: string
}

interface PolicyFields {
  daily: string
  perTransaction: string
  threshold: string
  recipients: string
  activeHours: string
  timeZone: string
}

const emptyFields: PolicyFields = { daily: "100", perTransaction: "50", threshold: "", recipients: "", activeHours: "00:00-24:00", timeZone: "UTC" }

const fieldsOf = (policy: Policy): PolicyFields => ({
  daily: String(policy.daily_limit_usdg),
  perTransaction: String(policy.per_transaction_limit_usdg),
  threshold: policy.hitl_threshold_usdg === null ? "" : String(policy.hitl_threshold_usdg),
  recipients: policy.allowed_recipients === null ? "" : policy.allowed_recipients.join(", "),
  activeHours: policy.active_hours,
  timeZone: policy.time_zone ?? "UTC"
})

/** The policy as the API takes it; numbers stay as typed so the API judges them (D4, D22). */
const policyOf = (fields: PolicyFields) => ({
  daily_limit_usdg: Number(fields.daily),
  per_transaction_limit_usdg: Number(fields.perTransaction),
  hitl_threshold_usdg: fields.threshold.trim() === "" ? null : Number(fields.threshold),
  allowed_recipients: fields.recipients.trim() === "" ? null : fields.recipients.split(",").map((r) => r.trim()).filter((r) => r !== ""),
  active_hours: fields.activeHours.trim(),
  time_zone: fields.timeZone.trim()
})

const paramOfField: Record<keyof PolicyFields, string> = {
  daily: "daily_limit_usdg",
  perTransaction: "per_transaction_limit_usdg",
  threshold: "hitl_threshold_usdg",
  recipients: "allowed_recipients",
  activeHours: "active_hours",
  timeZone: "time_zone"
}

const labels: Record<keyof PolicyFields, string> = {
  daily: "Daily limit (USDG)",
  perTransaction: "Per-transaction limit (USDG)",
  threshold: "Approval threshold (USDG; empty: never hold)",
  recipients: "Allowed recipients (comma-separated; empty: anyone)",
  activeHours: "Active hours (HH:MM-HH:MM)",
  timeZone: "Time zone (IANA)"
}

const PolicyForm = ({ idPrefix, initial, submitLabel, onSubmit, withName }: {
  readonly idPrefix: string
  readonly initial: PolicyFields
  readonly submitLabel: string
  readonly withName: boolean
  readonly onSubmit: (fields: PolicyFields, name: string) => Promise<void>
}) => {
  const [fields, setFields] = useState(initial)
  const [name, setName] = useState("")
  const [error, setError] = useState<unknown>(undefined)
  const [saved, setSaved] = useState(false)
  // On create the API names policy fields as `spend_policy.<field>`; on update as `<field>`.
  const fieldOfParam = (param: string) => param.replace(/^spend_policy\./, "").split(".")[0]
  const typedIn = (field: string) => {
    const key = (Object.keys(paramOfField) as Array<keyof PolicyFields>).find((k) => paramOfField[k] === field)
    return key === undefined ? name : fields[key]
  }
  const problem = error === undefined ? undefined : problemOf(error, {
    fieldOf: fieldOfParam,
    fieldWords: (field) => policyFieldWords(field, { raw: typedIn(field), daily: fields.daily })
  })
  const submit = async (event: FormEvent) => {
    event.preventDefault()
    setError(undefined)
    setSaved(false)
    try {
      await onSubmit(fields, name.trim())
      setSaved(true)
    } catch (caught) {
      setError(caught)
    }
  }
  const fieldError = (param: string) => problem?.field === param
  return (
    <form onSubmit={(event) => void submit(event)} className="grid-form">
      {withName && (
        <div>
          <label htmlFor={`${idPrefix}-name`}>Name (a-z, 0-9, -)</label>
          <input id={`${idPrefix}-name`} required value={name} onChange={(event) => setName(event.target.value)}
            {...invalidProps(problem, "name", `${idPrefix}-name-error`)} />
          <FieldError problem={problem} field="name" id={`${idPrefix}-name-error`} />
        </div>
      )}
      {(Object.keys(labels) as Array<keyof PolicyFields>).map((key) => {
        const param = paramOfField[key]
        return (
          <div key={key}>
            <label htmlFor={`${idPrefix}-${key}`}>{labels[key]}</label>
            <input id={`${idPrefix}-${key}`} value={fields[key]} onChange={(event) => setFields({ ...fields, [key]: event.target.value })}
              {...invalidProps(problem, param, `${idPrefix}-${key}-error`)} />
            <FieldError problem={problem} field={param} id={`${idPrefix}-${key}-error`} />
          </div>
        )
      })}
      {problem !== undefined && !Object.values(paramOfField).some(fieldError) && !fieldError("name") && <ProblemNote problem={problem} />}
      {saved && <p className="success" role="status">Saved.</p>}
      <button type="submit">{submitLabel}</button>
    </form>
  )
}

const AgentPolicy = ({ agent }: { readonly agent: Agent }) => {
  const policy = useLoad(() => call<Policy>("GET", `/v1/agents/${encodeURIComponent(agent.account_id)}/spend-policy`), [agent.account_id])
  return (
    <>
      {policy.loading && <Loading what="the policy" />}
      <ErrorNote error={policy.error} />
      {policy.value !== undefined && (
        <PolicyForm idPrefix={agent.account_id} initial={fieldsOf(policy.value)} submitLabel="Save policy" withName={false}
          onSubmit={async (fields) => {
            await call("PATCH", `/v1/agents/${encodeURIComponent(agent.account_id)}/spend-policy`, policyOf(fields))
          }} />
      )}
    </>
  )
}

/** What `POST /v1/agents/{id}/keys` answers: the value, this once, and the owner's wallet address. */
interface NewAgentKey {
  readonly name: string
  readonly api_key: string
  readonly owner_address: string
}

/**
 * An agent's API keys (D44). Creating one gives lasting access, so the server asks a session for
 * a recent passkey confirmation (`call` runs the step-up and retries); revoking takes it away and
 * asks for nothing.
 */
const AgentKeys = ({ agent }: { readonly agent: Agent }) => {
  const path = `/v1/agents/${encodeURIComponent(agent.account_id)}/keys`
  const keys = useLoad(() => call<{ readonly data: ReadonlyArray<WireKey> }>("GET", path), [path])
  const actions = useKeyActions({
    issue: (name) => call<NewAgentKey>("POST", path, { name }),
    revoke: async (keyId) => {
      await call("POST", `${path}/${encodeURIComponent(keyId)}/revoke`, {})
    },
    confirmText: (key) => `Revoke ${agent.handle}'s key "${key.name}" (…${key.keyHint})? Requests with it fail from now on.`,
    reload: keys.reload
  })
  const created = actions.created
  return (
    <section aria-label={`API keys of ${agent.handle}`}>
      <h3>API keys</h3>
      {created !== undefined && (
        <>
          <ShownOnce label={`New key "${created.name}" for ${agent.handle}`} value={created.api_key} onDone={actions.done} />
          <p className="muted" data-testid="owner-address">
            Its amounts are sealed to the key registered for your wallet <code>{created.owner_address}</code>: an agent
            that checks keys against the chain pins this address.
          </p>
        </>
      )}
      <KeyForm inputId={`${agent.account_id}-key-name`} label="Key name" className="row" keys={actions} />
      {keys.loading && <Loading what="the agent's keys" />}
      <ErrorNote error={keys.error} />
      {keys.value !== undefined && (keys.value.data.length === 0 ? <Empty>No keys for this agent yet.</Empty> : (
        <KeyTable caption={`API keys of ${agent.handle}`} rows={keys.value.data.map(keyRowOf)} testIdPrefix="agent-key-"
          onRevoke={(key) => void actions.revoke(key)} />
      ))}
    </section>
  )
}

export const Agents = ({ keyPair }: PageProps) => {
  const agents = useLoad(() => call<{ readonly agents: ReadonlyArray<Agent> }>("GET", "/v1/accounts/me/agents"), [])
  // Each agent's USDG sent, opened here with the owner's key (agents' amounts are sealed to it).
  const spending = useLoad(async () => {
    const byAgent = new Map<string, Spending>()
    if (keyPair === undefined) return byAgent
    const pps = ppsFor(keyPair)
    const page = await call<TransferPage>("GET", `/v1/transfers?include_agents=true&limit=${spendingWindow}`)
    const startOfDay = new Date()
    startOfDay.setUTCHours(0, 0, 0, 0)
    for (const transfer of page.data) {
      if (transfer.direction !== "sent" || transfer.status === "failed" || !transfer.from.includes("/") || transfer.asset !== "USDG") continue
      const opened = await pps.transfers.decrypt(transfer.transfer_id)
      const previous = byAgent.get(transfer.from) ?? { total: 0n, today: 0n, count: 0 }
      byAgent.set(transfer.from, {
        total: previous.total + opened.amount,
        today: previous.today + (Date.parse(transfer.created_at) >= startOfDay.getTime() ? opened.amount : 0n),
        count: previous.count + 1
      })
    }
    return byAgent
  }, [keyPair])
  const [open, setOpen] = useState<string | undefined>(undefined)
  const [keysOpen, setKeysOpen] = useState<string | undefined>(undefined)
  return (
    <Page title="Agents">
      <section className="panel" aria-labelledby="new-agent-title">
        <h2 id="new-agent-title">New agent</h2>
        <PolicyForm idPrefix="new-agent" initial={emptyFields} submitLabel="Create agent" withName
          onSubmit={async (fields, name) => {
            await call("POST", "/v1/accounts/me/agents", { name, spend_policy: policyOf(fields) })
            agents.reload()
          }} />
      </section>
      {agents.loading && <Loading what="agents" />}
      <ErrorNote error={agents.error} />
      <ErrorNote error={spending.error} />
      {keyPair !== undefined && <p className="muted">Spending figures read the latest {spendingWindow} transfers.</p>}
      {agents.value !== undefined && (agents.value.agents.length === 0 ? <Empty>No agents yet.</Empty> : (
        <ul className="stack">
          {agents.value.agents.map((agent) => (
            <li key={agent.account_id} className="panel">
              <p><strong>{agent.handle}</strong> · {agent.status}</p>
              <p data-testid={`spent-${agent.handle}`}>
                {"Sent: "}
                {keyPair === undefined ? <Encrypted /> : spending.loading ? "opening…" : spending.value === undefined ? "unavailable" : (() => {
                  const figures = spending.value.get(agent.handle) ?? { total: 0n, today: 0n, count: 0 }
                  return `${Amount.format("USDG", figures.total)} USDG in ${figures.count} transfer${figures.count === 1 ? "" : "s"} (today, UTC: ${Amount.format("USDG", figures.today)} USDG)`
                })()}
              </p>
              <button type="button" className="secondary" aria-expanded={open === agent.account_id}
                onClick={() => setOpen(open === agent.account_id ? undefined : agent.account_id)}>Spend policy</button>
              <button type="button" className="secondary" aria-expanded={keysOpen === agent.account_id}
                onClick={() => setKeysOpen(keysOpen === agent.account_id ? undefined : agent.account_id)}>API keys</button>
              {open === agent.account_id && <AgentPolicy agent={agent} />}
              {keysOpen === agent.account_id && <AgentKeys agent={agent} />}
            </li>
          ))}
        </ul>
      ))}
    </Page>
  )
}
