/**
 * A small HTTP client for tests: real requests over the loopback socket.
 */
import { Effect, Schema } from "effect"

export interface TestResponse {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** Parsed JSON body; tests assert on it with toMatchObject or decode it with a Schema. */
  readonly json: unknown
}

export const send = (
  url: string,
  init: { readonly method?: string; readonly headers?: Record<string, string>; readonly body?: string } = {}
) =>
  Effect.promise(async (): Promise<TestResponse> => {
    const response = await fetch(url, {
      method: init.method ?? "GET",
      ...(init.headers === undefined ? {} : { headers: init.headers }),
      ...(init.body === undefined ? {} : { body: init.body })
    })
    return readResponse(response)
  })

/** A fetch response as tests read it: status, headers, text, and the JSON body when it parses. */
export const readResponse = async (response: Response): Promise<TestResponse> => {
  const text = await response.text()
  let json: unknown = undefined
  try {
    json = text === "" ? undefined : JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

/** A JSON POST with the given extra headers. */
export const postJson = (headers: Record<string, string>, value: unknown) => ({
  method: "POST",
  headers: { ...headers, "content-type": "application/json" },
  body: JSON.stringify(value)
})

/** A JSON PATCH with the given extra headers. */
export const patchJson = (headers: Record<string, string>, value: unknown) => ({
  method: "PATCH",
  headers: { ...headers, "content-type": "application/json" },
  body: JSON.stringify(value)
})

/** The body of an answer of the expected status, decoded by its schema (the status is asserted first). */
export const decodeAnswer = <A>(schema: Schema.Decoder<A>, response: TestResponse, status: number): A => {
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status} ${response.text}`)
  return Schema.decodeUnknownSync(schema)(response.json)
}

/** Creates an account (and its first test key) through the admin API. */
export const createAccount = (
  server: { readonly adminUrl: string; readonly adminToken: string },
  handle: string,
  kyc: string = "verified"
) =>
  send(`${server.adminUrl}/admin/accounts`, {
    method: "POST",
    headers: { ...bearer(server.adminToken), "content-type": "application/json" },
    body: JSON.stringify({ handle, kyc_status: kyc })
  }).pipe(
    Effect.map((response) => {
      if (response.status !== 201) throw new Error(`account creation failed: ${response.status} ${response.text}`)
      return Schema.decodeUnknownSync(CreatedAccount)(response.json)
    })
  )

const CreatedAccount = Schema.Struct({
  account_id: Schema.String,
  handle: Schema.String,
  api_key: Schema.String,
  key_id: Schema.String
})

const Envelope = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String,
    message: Schema.String.check(Schema.isMinLength(1)),
    param: Schema.optionalKey(Schema.String),
    reason: Schema.optionalKey(Schema.String),
    request_id: Schema.String
  })
})

/** The D1 envelope, checked strictly: code, message, request id matching the header. */
export const expectEnvelope = (response: TestResponse, status: number, code: string) => {
  const requestId = response.headers.get("x-request-id")
  const envelope = Schema.decodeUnknownOption(Envelope)(response.json)
  const ok = response.status === status &&
    envelope._tag === "Some" &&
    envelope.value.error.code === code &&
    typeof requestId === "string" && /^req_[0-9A-Z]{26}$/.test(requestId) &&
    envelope.value.error.request_id === requestId
  if (!ok) {
    throw new Error(`expected ${status} ${code} in D1's envelope, got ${response.status} ${response.text} (x-request-id ${requestId})`)
  }
  return envelope.value.error
}
