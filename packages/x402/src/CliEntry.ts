/**
 * What `pps x402 fetch` runs (`@pps/sdk/X402Entry`'s `Entry`): one GET through `paidFetch`,
 * whose per-request and per-session maxima are both `--max`, so one command pays for one
 * request at most.
 *
 * @since 0.1.0
 */
import type * as X402Entry from "@pps/sdk/X402Entry"
import { paidFetch } from "./Client.ts"
import * as Scheme from "./Scheme.ts"

/**
 * One paid GET, as the command line asks for it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const cliFetch = async (request: X402Entry.FetchRequest): Promise<X402Entry.FetchAnswer> => {
  const paid = paidFetch({
    payer: request.pps,
    maxPerRequest: request.max,
    maxPerSession: request.max,
    network: request.mode === "live" ? Scheme.networks.main : Scheme.networks.test
  })
  const response = await paid.fetch(request.url)
  return {
    status: response.status,
    contentType: response.headers.get("content-type") ?? "",
    body: await response.text(),
    transferId: paid.scheme.lastTransferId
  }
}
