/**
 * D59 (ext): the operator lets an account's webhook subscriptions deliver to a receiver on
 * loopback (a developer's machine), per mode, and withdraws it; the grant is a row read at each
 * create, update and attempt, so it takes effect without a restart. The service's own ports stay
 * refused whatever the grant (WebhookClient.ts).
 *
 * Apart from the other admin endpoints (its own group and file), as the operator's console grows
 * beside it.
 *
 * @since 0.9.0
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Mode } from "@pps/api/ApiKeys"
import { AccountNotFound } from "@pps/api/Errors"

/**
 * @since 0.9.0
 * @category models
 */
export const LoopbackGrant = Schema.Struct({
  account_id: Schema.String,
  mode: Mode,
  allowed: Schema.Boolean.annotate({ description: "Whether the account's subscriptions of this mode may deliver to loopback." })
}).annotate({ identifier: "LoopbackGrant" })

const accountParams = { account_id: Schema.String }

/**
 * The endpoints; `AdminApi` adds them behind its token check (api.ts).
 *
 * @since 0.9.0
 * @category groups
 */
export class AdminWebhookLoopbackGroup extends HttpApiGroup.make("adminWebhookLoopback")
  .add(
    HttpApiEndpoint.post("setLoopback", "/accounts/:account_id/webhook-loopback", {
      params: accountParams,
      payload: Schema.Struct({ mode: Mode, allowed: Schema.Boolean }),
      success: LoopbackGrant,
      error: AccountNotFound
    }),
    HttpApiEndpoint.get("getLoopback", "/accounts/:account_id/webhook-loopback", {
      params: accountParams,
      success: Schema.Struct({ data: Schema.Array(LoopbackGrant) }),
      error: AccountNotFound
    })
  )
  .prefix("/admin")
{}

