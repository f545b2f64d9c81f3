/**
 * The connection every `pps` command sends through: the SDK's one retry policy
 * (`internal/retry.ts`, the facade's and `ApiClient`'s too), with each retry told on stderr, and
 * the Idempotency-Key a POST command drew for itself told on stderr as its first request goes
 * out, so a user whose command was cut off (a lost answer, a closed terminal) can run it again
 * with `--idempotency-key` and act once.
 *
 * `PPS_RETRY_BUDGET_MS` sets how long after a request's first failure a retry may still start
 * (default 15 000: longer than a server restart; 0: no retries).
 *
 * @since 0.5.0
 */
import * as Client from "../Client.ts"
import { CommandError } from "../internal/commands.ts"
import * as Retry from "../internal/retry.ts"
import { defaultTimeoutMs } from "../Pps.ts"

/** The largest budget accepted: a retry loop that outlives the user's patience is not one. */
const retryBudgetMsMax = 600_000

/**
 * `PPS_RETRY_BUDGET_MS`, checked: a whole number of milliseconds up to ten minutes.
 *
 * @since 0.5.0
 * @category environment
 */
export const retryBudgetMs = (env: Readonly<Record<string, string | undefined>>): number => {
  const text = env["PPS_RETRY_BUDGET_MS"]
  if (text === undefined || text === "") return Retry.defaults.budgetMs
  if (!/^(0|[1-9][0-9]{0,8})$/.test(text) || Number(text) > retryBudgetMsMax) {
    throw new CommandError(`PPS_RETRY_BUDGET_MS must be whole milliseconds from 0 (no retries) to ${retryBudgetMsMax}, not ${JSON.stringify(text)}`)
  }
  return Number(text)
}

/**
 * The stderr line of a retry: what failed, which retry after how long, and the key it keeps.
 *
 * @since 0.5.0
 * @category formatting
 */
export const retryLine = (retry: Retry.Retry): string => {
  const path = URL.canParse(retry.url) ? new URL(retry.url).pathname : retry.url
  const key = retry.idempotencyKey === undefined ? "" : ` with the same Idempotency-Key ${retry.idempotencyKey}`
  return `pps: ${retry.method} ${path}: ${retry.cause}; retry ${retry.retry} in ${(retry.delayMs / 1000).toFixed(1)} s${key}\n`
}

/**
 * The stderr line of a key drawn by the command: how to repeat the request without acting twice.
 *
 * @since 0.5.0
 * @category formatting
 */
export const keyLine = (key: string): string => `pps: Idempotency-Key ${key} (to repeat this request safely: --idempotency-key ${key})\n`

/**
 * The command's client. `generatedKey`: the POST key the command drew (not the user's), told
 * through `note` (stderr) once, when the first POST leaves; `note` also tells each retry.
 *
 * @since 0.5.0
 * @category constructors
 */
export const make = (options: {
  readonly apiKey: string
  readonly baseUrl: string
  readonly env: Readonly<Record<string, string | undefined>>
  readonly generatedKey: string | undefined
  readonly note: (text: string) => void
}): Client.Client => {
  let untold = options.generatedKey
  const send: Client.Fetch = (url, init) => {
    if (untold !== undefined && (init.method ?? "GET").toUpperCase() === "POST") {
      options.note(keyLine(untold))
      untold = undefined
    }
    return globalThis.fetch(url, init)
  }
  return Client.make({
    apiKey: options.apiKey,
    baseUrl: options.baseUrl,
    fetch: Retry.retryingFetch(send, {
      maxRetries: Retry.defaults.maxRetries,
      budgetMs: retryBudgetMs(options.env),
      attemptTimeoutMs: defaultTimeoutMs,
      baseDelayMs: Retry.defaults.baseDelayMs,
      onRetry: (retry) => options.note(retryLine(retry))
    })
  })
}
