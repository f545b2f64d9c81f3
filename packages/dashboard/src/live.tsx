/**
 * Live status: the account's events as they happen (`GET /v1/events/stream`, server-sent
 * events, authenticated by the session cookie like every `/v1` call of the page). One
 * EventSource per tab while signed in; pages subscribe to what concerns them (a transfer's
 * status, a held transaction decided) and refresh that, with no reload. Events carry ids and
 * states, never an amount (D30).
 *
 * The browser resumes a dropped stream by itself with `Last-Event-ID`, so nothing is missed
 * after the first connection; what happened before it is read by the pages' own loads, and
 * each (re)connection is announced to subscribers (`connected`), which refresh once.
 */
import { createContext, type ReactNode, useCallback, useContext, useEffect, useMemo, useRef, useState } from "react"

/** An event as the stream sends it (D30's payload): the fields the page reads. */
export interface LiveEvent {
  readonly id: string
  readonly event: string
  /** The account concerned: the holder's handle, or one of its agents' (`@owner/name`). */
  readonly account: string
  readonly timestamp: string
  readonly transfer_id?: string | null
  readonly transaction_id?: string
  readonly tx_hash?: string | null
}

/** The first wait before opening a refused stream again (the server's `Retry-After` for a full slot), and the longest. */
const refusedRetryFirstMs = 5_000
const refusedRetryMaxMs = 60_000

/** What a subscriber hears: an event, or that the stream (re)connected (something may have been missed before). */
export type LiveSignal = { readonly kind: "event"; readonly event: LiveEvent } | { readonly kind: "connected" }

type Listener = (signal: LiveSignal) => void

/** Whether the stream is up, and how to listen to it. */
export interface Live {
  readonly state: "off" | "connecting" | "live" | "reconnecting"
  readonly subscribe: (listener: Listener) => () => void
}

const LiveContext = createContext<Live>({ state: "off", subscribe: () => () => {} })

/**
 * The events seen in this tab, by transfer: when a transfer was submitted is not part of the
 * Transfer (D13), so a timeline can show it only if this tab heard its `transfer.initiated`.
 */
const seenByTransfer = new Map<string, Array<LiveEvent>>()

/** The events this tab heard about a transfer, oldest first. */
export const seenEvents = (transferId: string): ReadonlyArray<LiveEvent> => seenByTransfer.get(transferId) ?? []

const parse = (data: string): LiveEvent | undefined => {
  try {
    const parsed: unknown = JSON.parse(data)
    return typeof parsed === "object" && parsed !== null && "id" in parsed && "event" in parsed ? parsed as LiveEvent : undefined
  } catch {
    return undefined
  }
}

/**
 * Opens the stream and hands its events to subscribers; closes it when unmounted. The shell
 * mounts it only while signed in, so signing out (or a session ended elsewhere) closes it.
 */
export const LiveProvider = ({ children }: { readonly children: ReactNode }) => {
  const listeners = useRef(new Set<Listener>())
  const [state, setState] = useState<Live["state"]>("connecting")
  useEffect(() => {
    let source: EventSource | undefined
    let types: ReadonlyArray<string> = []
    let closed = false
    let retryMs = refusedRetryFirstMs
    let retry: ReturnType<typeof setTimeout> | undefined
    const tell = (signal: LiveSignal) => {
      for (const listener of listeners.current) listener(signal)
    }
    const onEvent = (message: MessageEvent<string>) => {
      const event = parse(message.data)
      if (event === undefined) return
      if (typeof event.transfer_id === "string") {
        const seen = seenByTransfer.get(event.transfer_id) ?? []
        if (!seen.some((known) => known.id === event.id)) seenByTransfer.set(event.transfer_id, [...seen, event])
      }
      tell({ kind: "event", event })
    }
    const open = () => {
      if (closed || source !== undefined) return
      const opened = new EventSource("/v1/events/stream")
      source = opened
      opened.onopen = () => {
        retryMs = refusedRetryFirstMs
        setState("live")
        tell({ kind: "connected" })
      }
      opened.onerror = () => {
        if (opened.readyState !== EventSource.CLOSED) {
          setState("reconnecting")
          return
        }
        // Refused (429: the session's streams on this node are taken, a reloaded tab's may not be
        // given back yet; 401: the session ended, which the next request also finds): the browser
        // does not retry a refusal, so the page does, a few seconds later, then less often.
        source = undefined
        setState("reconnecting")
        retry = setTimeout(open, retryMs)
        retryMs = Math.min(retryMs * 2, refusedRetryMaxMs)
      }
      // Named events (`event: <type>`) reach only listeners of their type.
      for (const type of types) opened.addEventListener(type, onEvent)
    }
    const close = () => {
      clearTimeout(retry)
      source?.close()
      source = undefined
    }
    // Leaving the page (or entering the back-forward cache) closes the stream at once, so the
    // server gives its slot back now rather than when a write finds the socket gone.
    const onPageHide = () => close()
    const onPageShow = (event: PageTransitionEvent) => {
      if (event.persisted) open()
    }
    globalThis.addEventListener("pagehide", onPageHide)
    globalThis.addEventListener("pageshow", onPageShow)
    // The event types are the contract's (every type D30 names), through the SDK: loaded after
    // sign-in with the pages that need it, not with the sign-in page.
    void import("@pps/sdk").then(({ Webhook }) => {
      types = Webhook.eventTypes
      open()
    }, () => setState("off"))
    return () => {
      closed = true
      close()
      globalThis.removeEventListener("pagehide", onPageHide)
      globalThis.removeEventListener("pageshow", onPageShow)
    }
  }, [])
  const subscribe = useCallback((listener: Listener) => {
    listeners.current.add(listener)
    return () => {
      listeners.current.delete(listener)
    }
  }, [])
  const live = useMemo(() => ({ state, subscribe }), [state, subscribe])
  return <LiveContext.Provider value={live}>{children}</LiveContext.Provider>
}

/** The stream's state, for the header. */
export const useLiveState = (): Live["state"] => useContext(LiveContext).state

/**
 * Calls `onSignal` for every event of the stream (and each reconnection) while the component is
 * shown; `onSignal` may change between renders (the latest one is called).
 */
export const useLive = (onSignal: Listener): void => {
  const { subscribe } = useContext(LiveContext)
  const latest = useRef(onSignal)
  latest.current = onSignal
  useEffect(() => subscribe((signal) => latest.current(signal)), [subscribe])
}

/** Whether a signal should refresh what shows `transferId` (its event, a refund's of it, or a reconnection). */
export const concernsTransfer = (signal: LiveSignal, transferId: string): boolean =>
  signal.kind === "connected" || (signal.event.event.startsWith("transfer.") &&
    // A refund's events (D43) change its original's `refunds` too.
    (signal.event.transfer_id === transferId || ("refund_of" in signal.event && signal.event.refund_of === transferId)))

/** Whether a signal may change the held transactions (an agent transaction's event, or a reconnection). */
export const concernsHeld = (signal: LiveSignal): boolean =>
  signal.kind === "connected" || signal.event.event.startsWith("agent.transaction.")
