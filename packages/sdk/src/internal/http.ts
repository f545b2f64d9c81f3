/**
 * One authenticated JSON request to the API, failing with the SDK's two errors.
 *
 * @since 0.1.0
 */
import { type Client, type ErrorObject, TransportError } from "../Client.ts"
import * as Errors from "../Errors.ts"

/** A success answer: the body as received and parsed. */
export interface JsonAnswer {
  readonly status: number
  readonly text: string
  readonly json: unknown
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The D1 error object of a body, when the body is one. */
export const errorObjectOf = (text: string): ErrorObject | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  if (!isRecord(parsed) || !isRecord(parsed["error"])) return undefined
  const error = parsed["error"]
  const code = error["code"]
  const message = error["message"]
  if (typeof code !== "string" || typeof message !== "string") return undefined
  const optional = (name: "param" | "reason" | "request_id") =>
    typeof error[name] === "string" ? { [name]: error[name] } : {}
  return { code, message, ...optional("param"), ...optional("reason"), ...optional("request_id") }
}

/**
 * Sends `method path` with the client's bearer key; a 2xx answer resolves with
 * its parsed JSON body, anything else rejects with `ApiError`.
 */
export const request = async (
  client: Client,
  method: "GET" | "PUT" | "POST" | "PATCH" | "DELETE",
  path: string,
  options: { readonly body?: unknown; readonly headers?: Readonly<Record<string, string>> } = {}
): Promise<JsonAnswer> => {
  const url = `${client.baseUrl}${path}`
  let response: Response
  let text: string
  try {
    response = await client.fetch(url, {
      method,
      headers: {
        authorization: `Bearer ${client.apiKey}`,
        accept: "application/json",
        ...(options.body === undefined ? {} : { "content-type": "application/json" }),
        ...options.headers
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
    })
    text = await response.text()
  } catch (cause) {
    // The URL is safe to show (no key in it); the cause names the network failure.
    throw new TransportError("unreachable", `cannot reach the API at ${client.baseUrl}: ${String(cause)}`, { cause })
  }
  if (response.status < 200 || response.status > 299) throw Errors.fromAnswer(response.status, text, errorObjectOf(text))
  try {
    return { status: response.status, text, json: text === "" ? undefined : JSON.parse(text) }
  } catch (cause) {
    throw new TransportError("malformed_response", `${method} ${path} answered ${response.status} with a body that is not JSON`, {
      cause
    })
  }
}
