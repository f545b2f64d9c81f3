/**
 * Approvals (D26-D28): agents' transfers held above their threshold, each with
 * its amount opened here, approve or reject, and the time left.
 */
import { Amount } from "@pps/sdk"
import { useEffect, useState } from "react"
import type { PageProps } from "../App.tsx"
import { call, ppsFor } from "../api.ts"
import { Empty, Encrypted, ErrorNote, Loading, Page, timeLeft, useLoad } from "../ui.tsx"

interface Held {
  readonly transaction_id: string
  readonly agent: string
  readonly to: string
  readonly requested_at: string
  readonly expires_at: string
}

export const Approvals = ({ keyPair }: PageProps) => {
  const [nowMs, setNowMs] = useState(() => Date.now())
  const [error, setError] = useState<unknown>(undefined)
  const [decided, setDecided] = useState<string | undefined>(undefined)
  useEffect(() => {
    const timer = setInterval(() => setNowMs(Date.now()), 30_000)
    return () => clearInterval(timer)
  }, [])
  const pending = useLoad(async () => {
    const listed = await call<{ readonly pending: ReadonlyArray<Held> }>("GET", "/v1/agents/transactions/pending")
    const amounts = new Map<string, string>()
    if (keyPair !== undefined) {
      const pps = ppsFor(keyPair)
      for (const held of listed.pending) {
        const opened = await pps.approvals.open(held.transaction_id).catch(() => undefined)
        if (opened !== undefined) amounts.set(held.transaction_id, `${Amount.format(opened.asset, opened.amount)} ${opened.asset}`)
      }
    }
    return { held: listed.pending, amounts }
  }, [keyPair])
  const decide = async (held: Held, verdict: "approve" | "reject") => {
    setError(undefined)
    try {
      const answer = await call<{ readonly status: string }>("POST", `/v1/agents/transactions/${encodeURIComponent(held.transaction_id)}/${verdict}`, {})
      setDecided(`${held.agent} → ${held.to}: ${answer.status}.`)
      pending.reload()
    } catch (caught) {
      setError(caught)
    }
  }
  return (
    <Page title="Approvals">
      {decided !== undefined && <p className="success" role="status">{decided}</p>}
      <ErrorNote error={error} />
      {pending.loading && <Loading what="held transactions" />}
      <ErrorNote error={pending.error} />
      {pending.value !== undefined && (pending.value.held.length === 0 ? <Empty>Nothing waits for your approval.</Empty> : (
        <ul className="stack" aria-label="Held transactions">
          {pending.value.held.map((held) => (
            <li key={held.transaction_id} className="panel" data-testid={`held-${held.transaction_id}`}>
              <p><strong>{held.agent}</strong> wants to pay <strong>{held.to}</strong></p>
              <p className="figure" data-testid="held-amount">{pending.value?.amounts.get(held.transaction_id) ?? <Encrypted />}</p>
              <p className="muted">Requested {new Date(held.requested_at).toLocaleString()} · {timeLeft(held.expires_at, nowMs)}</p>
              <div className="row">
                <button type="button" onClick={() => void decide(held, "approve")}>Approve</button>
                <button type="button" className="danger" onClick={() => void decide(held, "reject")}>Reject</button>
              </div>
            </li>
          ))}
        </ul>
      ))}
    </Page>
  )
}
