/** Balances (opened here with the holder's key) and the latest transfers. */
import type { PageProps } from "../App.tsx"
import { call } from "../api.ts"
import { ppsFor } from "../pps.ts"
import { Empty, Encrypted, ErrorNote, Loading, Page, useLoad } from "../ui.tsx"
import { openAmounts, type TransferPage, TransferTable } from "./Transfers.tsx"

interface Flags {
  readonly balances: ReadonlyArray<{ readonly asset: string; readonly non_zero: boolean }>
}

export const Overview = ({ keyPair, navigate }: PageProps) => {
  const balances = useLoad(async () => {
    if (keyPair === undefined) {
      const flags = await call<Flags>("GET", "/v1/accounts/me/balances")
      return flags.balances.map((b) => ({ asset: b.asset, amount: undefined, nonZero: b.non_zero }))
    }
    const read = await ppsFor(keyPair).balances.read()
    return read.balances.map((b) => ({ asset: b.asset, amount: b.amount, nonZero: b.amount !== "0" }))
  }, [keyPair])
  const recent = useLoad(async () => {
    const page = await call<TransferPage>("GET", "/v1/transfers?limit=5")
    return { page, amounts: await openAmounts(keyPair, page.data) }
  }, [keyPair])
  return (
    <Page title="Overview">
      <h2>Balances</h2>
      {balances.loading && <Loading what="balances" />}
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
      {recent.loading && <Loading what="transfers" />}
      <ErrorNote error={recent.error} />
      {recent.value !== undefined && (recent.value.page.data.length === 0
        ? <Empty>No transfers yet. Send one from Transfers.</Empty>
        : <TransferTable transfers={recent.value.page.data} amounts={recent.value.amounts} navigate={navigate} />)}
    </Page>
  )
}
