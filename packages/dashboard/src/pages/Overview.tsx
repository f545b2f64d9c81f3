/** Balances (opened here with the holder's key) and the latest activity. */
import type { MouseEvent } from "react"
import type { PageProps } from "../App.tsx"
import { loadBalances, loadRecent } from "../activity.ts"
import { useLive } from "../live.tsx"
import { Empty, Encrypted, ErrorNote, Loading, Page, useLoad } from "../ui.tsx"
import { ActivityTable } from "./Activity.tsx"

export const Overview = ({ keyPair, navigate, session }: PageProps) => {
  const balances = useLoad(() => loadBalances(keyPair), [keyPair])
  const recent = useLoad(() => loadRecent(session.handle, session.mode, keyPair, 5), [session.handle, session.mode, keyPair])
  // A transfer confirmed changes the balance and the latest activity.
  useLive((signal) => {
    if (signal.kind === "connected" || signal.event.event.startsWith("transfer.")) {
      balances.refresh()
      recent.refresh()
    }
  })
  const toActivity = (event: MouseEvent<HTMLAnchorElement>) => {
    event.preventDefault()
    navigate("/activity")
  }
  return (
    <Page title="Overview">
      <h2>Balances</h2>
      {balances.loading && balances.value === undefined && <Loading what="balances" />}
      <ErrorNote error={balances.error} />
      {balances.value !== undefined && (
        <ul className="cards" aria-label="Balances">
          {balances.value.map((b) => (
            <li key={b.asset} className="card">
              <span className="label">{b.asset}</span>
              <span className="figure" data-testid={`balance-${b.asset}`}>
                {b.amount !== undefined ? b.amount : <><Encrypted /> {b.nonZero ? "(not zero)" : "(zero)"}</>}
              </span>
            </li>
          ))}
        </ul>
      )}
      <h2>Recent activity</h2>
      {recent.loading && recent.value === undefined && <Loading what="your activity" />}
      <ErrorNote error={recent.error} />
      {recent.value !== undefined && (recent.value.length === 0
        ? <Empty>No activity yet. Send from Activity.</Empty>
        : <ActivityTable entries={recent.value} session={session} navigate={navigate} caption="Recent activity, newest first" />)}
      <p><a href="/dashboard/activity" onClick={toActivity}>All activity, and how it adds up to your balance</a></p>
    </Page>
  )
}
