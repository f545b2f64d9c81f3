/**
 * A client of the live event stream (`GET /v1/events/stream`) for tests and benchmarks: reads
 * server-sent events over a real socket, noting each event's arrival time, and resumes with
 * `Last-Event-ID` as `pps listen` does (the opening block's cursor counts as the last id).
 */
import { bearer } from "./http.ts"

export interface ReceivedEvent {
  readonly id: string
  readonly event: string
  readonly data: string
  /** `performance.now()` when its block was parsed. */
  readonly receivedAt: number
}

/** One connection: reads until `stop()` says so after an event (or the server ends it). */
export const readConnection = async (options: {
  readonly url: string
  readonly apiKey: string
  readonly lastEventId: string | undefined
  readonly onEvent: (event: ReceivedEvent) => void
  /** Asked after each event: true ends this connection. */
  readonly stop: () => boolean
  /** The opening block's cursor, when the stream starts without one. */
  readonly onCursor?: (cursor: string) => void
  readonly signal?: AbortSignal
}): Promise<void> => {
  const controller = new AbortController()
  const abort = () => controller.abort()
  options.signal?.addEventListener("abort", abort)
  try {
    const response = await fetch(options.url, {
      headers: { ...bearer(options.apiKey), ...(options.lastEventId === undefined ? {} : { "last-event-id": options.lastEventId }) },
      signal: controller.signal
    })
    if (response.status !== 200 || response.body === null) throw new Error(`the stream answered ${response.status}: ${await response.text()}`)
    const reader = response.body.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      buffer += decoder.decode(value, { stream: true })
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const fields = new Map<string, string>()
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue
          const colon = line.indexOf(": ")
          if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 2))
        }
        const id = fields.get("id")
        const event = fields.get("event")
        if (id !== undefined && event === undefined) options.onCursor?.(id)
        if (id === undefined || event === undefined) continue
        options.onEvent({ id, event, data: fields.get("data") ?? "", receivedAt: performance.now() })
        if (options.stop()) return
      }
    }
  } catch (error) {
    if (!controller.signal.aborted) throw error
  } finally {
    options.signal?.removeEventListener("abort", abort)
    controller.abort()
  }
}
