/**
 * The id of the request being served (`req_…`): the envelope middleware draws it, sends it in
 * `X-Request-Id` and provides it here, so a step that records who did what (the audit log, D60)
 * can name the request. Null outside a request.
 *
 * @since 0.11.0
 */
import { Context } from "effect"

/**
 * @since 0.11.0
 * @category references
 */
export const CurrentRequestId = Context.Reference<string | null>("server/http/CurrentRequestId", { defaultValue: () => null })
