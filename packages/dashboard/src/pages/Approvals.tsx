/**
 * Approvals (D26-D28): agents' transfers held above their threshold. Nothing is
 * approved unseen: Approve is enabled only once the amount the guardian would
 * pay is opened in this page with the holder's key (and agrees with the agent's
 * own note); approve and reject each ask once more, showing the amount, the
 * recipient and what the agent has sent today against its limits.
 */
import { Amount, type PpsTypes } from "@pps/sdk"
import type { EncryptionKey } from "@pps/crypto"
import { type MouseEvent, useEffect, useState } from "react"
import type { PageProps } from "../App.tsx"
import { call, ppsFor } from "../api.ts"
import { problemOf } from "../problems.ts"
import { type SentToday, sentToday } from "../spending.ts"
import { When } from "../time.tsx"
import { ConfirmDialog, Empty, Encrypted, ErrorNote, Loading, Page, timeLeft, useLoad } from "../ui.tsx"

type Held = PpsTypes.PendingTransaction
type Policy = PpsTypes.SpendPolicy

interface Opened {
  /** USDG base units: what an approval pays (the guardian's figure). */
  readonly amount: bigint
  readonly asset: string
  readonly memo: string
  /** False: the agent's own note states another amount. */
  readonly noteMatches: boolean | null
}

interface Loaded {
  readonly held: ReadonlyArray<Held>
  readonly opened: ReadonlyMap<string, Opened>
  readonly policies: ReadonlyMap<string, Policy>
  /** By agent handle; undefined without the key (the amounts cannot be read). */
  readonly spent: ReadonlyMap<string, SentToday> | undefined
}

/** A policy limit (a number of USDG, D22) in base units. */
const usdgUnits = (value: number): bigint => {
  const [whole = "0", fraction = ""] = value.toFixed(6).split(".")
  return BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, "0"))
}

const usdg = (units: bigint) => `${Amount.format("USDG", units)} USDG`

const loadApprovals = async (keyPair: EncryptionKey.KeyPair | undefined): Promise<Loaded> => {
  const [listed, agents] = await Promise.all([
    call<{ readonly pending: ReadonlyArray<Held> }>("GET", "/v1/agents/transactions/pending"),
    call<{ readonly agents: ReadonlyArray<{ readonly account_id: string; readonly handle: string }> }>("GET", "/v1/accounts/me/agents")
  ])
  const policies = new Map<string, Policy>()
  for (const handle of new Set(listed.pending.map((held) => held.agent))) {
    const agent = agents.agents.find((a) => a.handle === handle)
    if (agent !== undefined) policies.set(handle, await call<Policy>("GET", `/v1/agents/${encodeURIComponent(agent.account_id)}/spend-policy`))
  }
  const opened = new Map<string, Opened>()
  if (keyPair === undefined) return { held: listed.pending, opened, policies, spent: undefined }
  const pps = ppsFor(keyPair)
  for (const held of listed.pending) {
    const one = await pps.approvals.open(held.transaction_id).catch(() => undefined)
    if (one !== undefined) opened.set(held.transaction_id, { amount: one.amount, asset: one.asset, memo: one.memo, noteMatches: one.noteMatches })
  }
  const spent = await sentToday(keyPair, [...policies].map(([handle, policy]) => ({ handle, timeZone: policy.time_zone })), Date.now())
  return { held: listed.pending, opened, policies, spent }
}

/** The agent's day so far against its limits, and where this transfer would take it. */
const SpendAgainstLimits = ({ held, loaded }: { readonly held: Held; readonly loaded: Loaded }) => {
  const policy = loaded.policies.get(held.agent)
  if (policy === undefined) return <p className="muted">The agent's spend policy could not be read.</p>
  const opened = loaded.opened.get(held.transaction_id)
  const spent = loaded.spent?.get(held.agent)
  const daily = usdgUnits(policy.daily_limit_usdg)
  const perTransaction = usdgUnits(policy.per_transaction_limit_usdg)
  const after = spent !== undefined && opened !== undefined ? spent.amount + opened.amount : undefined
  return (
    <div className="spend" data-testid="held-spend">
      <p>
        {"Limits: "}{usdg(perTransaction)} per transfer, {usdg(daily)} a day (the day in {policy.time_zone}).
      </p>
      <p>
        {"Sent today: "}
        {spent === undefined ? <Encrypted /> : `${spent.complete ? "" : "at least "}${usdg(spent.amount)} in ${spent.count} transfer${spent.count === 1 ? "" : "s"}`}
        {after === undefined ? "" : `; with this one ${usdg(after)} of ${usdg(daily)}.`}
      </p>
      {opened !== undefined && opened.amount > perTransaction && <p className="error">This is above the agent's per-transaction limit: an approval will be refused.</p>}
      {after !== undefined && after > daily && <p className="error">With this one the agent goes over its daily limit: an approval will be refused.</p>}
    </div>
  )
}

/** Why Approve is not offered, when it is not: the amount was not opened here, or does not agree. */
const approveBlocked = (opened: Opened | undefined, keyLocked: boolean): string | undefined => {
  if (opened === undefined) {
    return keyLocked
      ? "Approving needs the amount opened in this page: unlock your encryption key in Settings first."
      : "The amount could not be opened with your key, so it cannot be approved here."
  }
  if (opened.noteMatches === false) return "The agent's own note states a different amount than the one that would be paid: do not approve; reject it and look into the agent."
  return undefined
}

const HeldCard = ({ held, loaded, keyLocked, nowMs, onDecide, navigate }: {
  readonly held: Held
  readonly loaded: Loaded
  readonly keyLocked: boolean
  readonly nowMs: number
  readonly onDecide: (verdict: "approve" | "reject") => void
  readonly navigate: (path: string) => void
}) => {
  const opened = loaded.opened.get(held.transaction_id)
  const blocked = approveBlocked(opened, keyLocked)
  const hintId = `approve-hint-${held.transaction_id}`
  const toSettings = (event: MouseEvent<HTMLAnchorElement>) => {
    event.preventDefault()
    navigate("/settings")
  }
  return (
    <li className="panel" data-testid={`held-${held.transaction_id}`}>
      <p><strong>{held.agent}</strong> wants to pay <strong>{held.to}</strong></p>
      <p className="figure" data-testid="held-amount">{opened === undefined ? <Encrypted /> : `${Amount.format(opened.asset, opened.amount)} ${opened.asset}`}</p>
      {opened !== undefined && <p>Memo: {opened.memo === "" ? "(none)" : opened.memo}</p>}
      <SpendAgainstLimits held={held} loaded={loaded} />
      <p className="muted">Requested <When iso={held.requested_at} /> · {timeLeft(held.expires_at, nowMs)}</p>
      {blocked !== undefined && (
        <p id={hintId} className="hint" data-testid="approve-hint">
          {blocked}{keyLocked && <>{" "}<a href="/dashboard/settings" onClick={toSettings}>Go to Settings</a></>}
        </p>
      )}
      <div className="row">
        <button type="button" disabled={blocked !== undefined} aria-describedby={blocked === undefined ? undefined : hintId} onClick={() => onDecide("approve")}>Approve</button>
        <button type="button" className="danger" onClick={() => onDecide("reject")}>Reject</button>
      </div>
    </li>
  )
}

/** The second step of a decision: what is approved or rejected, said once more. */
const DecisionDialog = ({ held, verdict, loaded, busy, error, onConfirm, onCancel }: {
  readonly held: Held
  readonly verdict: "approve" | "reject"
  readonly loaded: Loaded
  readonly busy: boolean
  readonly error: unknown
  readonly onConfirm: () => void
  readonly onCancel: () => void
}) => {
  const opened = loaded.opened.get(held.transaction_id)
  return (
    <ConfirmDialog title={verdict === "approve" ? "Approve this payment?" : "Reject this payment?"}
      confirmLabel={verdict === "approve" ? (busy ? "Approving…" : "Approve and pay") : (busy ? "Rejecting…" : "Reject")}
      danger={verdict === "reject"} busy={busy} onConfirm={onConfirm} onCancel={onCancel}>
      <dl className="detail" data-testid="decision-details">
        <dt>Amount</dt>
        <dd data-testid="decision-amount">{opened === undefined ? <><Encrypted /> (not opened in this page)</> : `${Amount.format(opened.asset, opened.amount)} ${opened.asset}`}</dd>
        <dt>To</dt><dd data-testid="decision-to">{held.to}</dd>
        <dt>Agent</dt><dd>{held.agent}</dd>
        <dt>Memo</dt><dd>{opened === undefined ? <Encrypted /> : opened.memo === "" ? "(none)" : opened.memo}</dd>
      </dl>
      <SpendAgainstLimits held={held} loaded={loaded} />
      <p>{verdict === "approve" ? "Approving signs and submits the payment at once; it cannot be called back." : "Rejecting discards the payment: no funds move."}</p>
      <ErrorNote error={error} />
    </ConfirmDialog>
  )
}

export const Approvals = ({ keyPair, navigate }: PageProps) => {
  const [nowMs, setNowMs] = useState(() => Date.now())
  const [deciding, setDeciding] = useState<{ readonly held: Held; readonly verdict: "approve" | "reject" } | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [decided, setDecided] = useState<string | undefined>(undefined)
  useEffect(() => {
    const timer = setInterval(() => setNowMs(Date.now()), 30_000)
    return () => clearInterval(timer)
  }, [])
  const pending = useLoad(() => loadApprovals(keyPair), [keyPair])
  const confirm = async () => {
    if (deciding === undefined || pending.value === undefined) return
    const { held, verdict } = deciding
    // The dialog offers Approve only after the card did; checked again where the request is made.
    if (verdict === "approve" && approveBlocked(pending.value.opened.get(held.transaction_id), keyPair === undefined) !== undefined) return
    setBusy(true)
    setError(undefined)
    try {
      const answer = await call<PpsTypes.HeldTransaction>("POST", `/v1/agents/transactions/${encodeURIComponent(held.transaction_id)}/${verdict}`, {})
      const opened = pending.value.opened.get(held.transaction_id)
      const what = opened === undefined ? "" : ` ${Amount.format(opened.asset, opened.amount)} ${opened.asset}`
      setDecided(answer.status === "approved"
        ? `Approved: ${held.agent} pays${what} to ${held.to}${answer.transfer_id === null ? "" : ` (transfer ${answer.transfer_id}, ${answer.transfer_status ?? "pending"})`}.`
        : `Rejected: ${held.agent}'s payment${what} to ${held.to} will not be made.`)
      setDeciding(undefined)
      pending.reload()
    } catch (caught) {
      setError(caught)
      // Decided elsewhere or past its window: what the list shows is no longer true.
      const code = problemOf(caught).code
      if (code === "transaction_not_found" || code === "transaction_expired") pending.reload()
    } finally {
      setBusy(false)
    }
  }
  const loaded = pending.value
  return (
    <Page title="Approvals">
      {decided !== undefined && <p className="success" role="status">{decided}</p>}
      {pending.loading && <Loading what="held transactions" />}
      <ErrorNote error={pending.error} />
      {loaded !== undefined && (loaded.held.length === 0 ? <Empty>Nothing waits for your approval.</Empty> : (
        <ul className="stack" aria-label="Held transactions">
          {loaded.held.map((held) => (
            <HeldCard key={held.transaction_id} held={held} loaded={loaded} keyLocked={keyPair === undefined} nowMs={nowMs} navigate={navigate}
              onDecide={(verdict) => { setError(undefined); setDecided(undefined); setDeciding({ held, verdict }) }} />
          ))}
        </ul>
      ))}
      {deciding !== undefined && loaded !== undefined && (
        <DecisionDialog held={deciding.held} verdict={deciding.verdict} loaded={loaded} busy={busy} error={error}
          onConfirm={() => void confirm()} onCancel={() => setDeciding(undefined)} />
      )}
    </Page>
  )
}
