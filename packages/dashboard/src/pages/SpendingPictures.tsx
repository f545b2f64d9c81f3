/**
 * An agent's spending as pictures (issue 46, item 7): today's USDG against its daily limit as a
 * bar, and the last 30 days as a small column chart, both from amounts opened in this page
 * (`spending.ts`). Drawn in SVG attributes (no inline style, which the page's CSP refuses); each
 * picture has a text equivalent, and the chart's figures are in a table for assistive technology.
 */
import { amountText, limitUnits } from "../opened.ts"
import type { AgentSpending } from "../spending.ts"

const usdg = (units: bigint) => amountText("USDG", units)

/** `part / whole` as a whole percent, for a label (`whole` 0: 0 %, or 100 % once anything is spent). */
const percent = (part: bigint, whole: bigint): number =>
  whole === 0n ? (part === 0n ? 0 : 100) : Number((part * 100n) / whole)

const barWidth = 300
const barHeight = 16

/** Today against the daily limit; past the limit the bar is full and red. */
const TodayBar = ({ spent, limit, day, timeZone }: { readonly spent: bigint; readonly limit: bigint; readonly day: string; readonly timeZone: string }) => {
  const share = percent(spent, limit)
  const width = Math.min(barWidth, Math.round((barWidth * Math.min(share, 100)) / 100))
  const label = `Today (${day}, ${timeZone}): ${usdg(spent)} of ${usdg(limit)} a day, ${share} %`
  return (
    <div className="spend-today">
      <p data-testid="spent-today">{label}</p>
      <svg className="bar" role="img" aria-label={label} viewBox={`0 0 ${barWidth} ${barHeight}`} width={barWidth} height={barHeight} data-testid="spent-bar" data-share={share}>
        <rect className="bar-track" x="0" y="0" width={barWidth} height={barHeight} rx="4" />
        <rect className={share > 100 ? "bar-fill bar-over" : share >= 80 ? "bar-fill bar-near" : "bar-fill"} x="0" y="0" width={width} height={barHeight} rx="4" />
      </svg>
    </div>
  )
}

const chartWidth = 300
const chartHeight = 60

/** The last days' totals as columns, scaled to the largest day (or the daily limit, if higher). */
const DaysChart = ({ days, limit }: { readonly days: AgentSpending["days"]; readonly limit: bigint }) => {
  const largest = days.reduce((max, day) => (day.amount > max ? day.amount : max), limit)
  const column = chartWidth / Math.max(1, days.length)
  const total = days.reduce((sum, day) => sum + day.amount, 0n)
  const count = days.reduce((sum, day) => sum + day.count, 0)
  const caption = `Last ${days.length} days: ${usdg(total)} in ${count} transfer${count === 1 ? "" : "s"}`
  const limitY = chartHeight - Number((limit * BigInt(chartHeight)) / (largest === 0n ? 1n : largest))
  return (
    <figure className="spend-chart">
      <svg role="img" aria-label={caption} viewBox={`0 0 ${chartWidth} ${chartHeight}`} width={chartWidth} height={chartHeight} data-testid="spent-chart">
        <rect className="chart-track" x="0" y="0" width={chartWidth} height={chartHeight} />
        <line className="chart-limit" x1="0" x2={chartWidth} y1={limitY} y2={limitY} />
        {days.map((day, index) => {
          const height = largest === 0n ? 0 : Math.max(day.amount > 0n ? 2 : 0, Number((day.amount * BigInt(chartHeight)) / largest))
          return <rect key={day.day} className="chart-column" x={index * column + 1} y={chartHeight - height} width={Math.max(1, column - 2)} height={height} data-day={day.day} data-amount={day.amount.toString()} />
        })}
      </svg>
      <figcaption><span data-testid="spent-30-days">{caption}</span><span className="muted"> (a column a day; the dashed line is the daily limit)</span></figcaption>
      <table className="visually-hidden">
        <caption>Sent per day</caption>
        <thead><tr><th scope="col">Day</th><th scope="col">Sent</th></tr></thead>
        <tbody>{days.filter((day) => day.count > 0).map((day) => <tr key={day.day}><td>{day.day}</td><td>{usdg(day.amount)}</td></tr>)}</tbody>
      </table>
    </figure>
  )
}

export const SpendingPictures = ({ handle, figures }: {
  readonly handle: string
  readonly figures: { readonly policy: { readonly daily_limit_usdg: number; readonly time_zone?: string }; readonly spent: AgentSpending | undefined } | undefined
}) => {
  if (figures === undefined || figures.spent === undefined) return <p data-testid={`spent-${handle}`}>Spending unavailable.</p>
  const { spent, policy } = figures
  const limit = limitUnits(policy.daily_limit_usdg)
  return (
    <div className="spending" data-testid={`spent-${handle}`}>
      <TodayBar spent={spent.today.amount} limit={limit} day={spent.today.day} timeZone={spent.today.timeZone} />
      <DaysChart days={spent.days} limit={limit} />
      {!spent.today.complete && <p className="muted">Some of the agent's transfers could not be read or opened: the figures are at least these.</p>}
    </div>
  )
}
