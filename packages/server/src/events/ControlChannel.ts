/**
 * A node-to-node control channel on the event bus's NATS connection: small
 * messages every node must see at once (today: a revoked API key), on core
 * NATS subjects `<NATS_SUBJECT_PREFIX>_control.<topic>`. These lie outside the
 * JetStream stream's `<prefix>.>` on purpose: a control message is for the
 * nodes connected now, not a record to replay.
 *
 * Core NATS delivers at most once and only to subscribers connected when the
 * message passes, so a subscriber is also told when it may have missed
 * messages (`onUnreliable`: the connection dropped, went stale, closed, or the
 * subscription failed or was slow enough to drop messages) and when it is
 * reliable again (`onReliable`: connected, and its subscription registered on
 * the server, checked by a round trip after each (re)connect). Whoever keeps
 * state derived from the messages must drop it on `onUnreliable`.
 *
 * @since 0.5.0
 */
import type { NatsConnection, Status, Subscription } from "@nats-io/transport-node"
import { Data, Effect, type Scope } from "effect"

/**
 * The control message did not reach the NATS server (not connected within the wait).
 *
 * @since 0.5.0
 * @category errors
 */
export class ControlChannelError extends Data.TaggedError("ControlChannelError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/**
 * @since 0.5.0
 * @category models
 */
export interface ControlSubscriber {
  readonly onMessage: (payload: string) => void
  readonly onUnreliable: (why: string) => void
  readonly onReliable: () => void
}

/**
 * @since 0.5.0
 * @category models
 */
export interface ControlChannel {
  /**
   * Publishes and waits (up to `waitMs`) for the server to have taken the
   * message: the server has then handed it to every subscriber's connection.
   * On a timeout the client still holds the message and sends it on reconnect.
   */
  readonly publish: (topic: string, payload: string, waitMs: number) => Effect.Effect<void, ControlChannelError>
  /** Subscribes for the life of the scope; `onReliable` is first called once the subscription is registered. */
  readonly subscribe: (topic: string, subscriber: ControlSubscriber) => Effect.Effect<void, never, Scope.Scope>
}

/**
 * @since 0.5.0
 * @category constructors
 */
export const makeControlChannel = (connection: NatsConnection, subjectPrefix: string): ControlChannel => {
  const subjectOf = (topic: string) => `${subjectPrefix}_control.${topic}`
  const encoder = new TextEncoder()
  const confirmed = (waitMs: number) =>
    Effect.tryPromise({
      try: () => connection.flush(),
      catch: (cause) => new ControlChannelError({ message: "NATS did not confirm the control message", cause })
    }).pipe(
      Effect.timeoutOrElse({
        duration: waitMs,
        orElse: () => Effect.fail(new ControlChannelError({ message: `NATS did not confirm within ${waitMs} ms` }))
      })
    )
  return {
    publish: (topic, payload, waitMs) =>
      Effect.try({
        try: () => connection.publish(subjectOf(topic), encoder.encode(payload)),
        catch: (cause) => new ControlChannelError({ message: "cannot publish the control message", cause })
      }).pipe(Effect.andThen(confirmed(waitMs)), Effect.withSpan("ControlChannel.publish")),
    subscribe: (topic, subscriber) =>
      Effect.gen(function*() {
        // Listen to the status before subscribing, so no disconnect can pass unseen in between.
        const statuses = connection.status()
        let failed = false
        const subscription: Subscription = yield* Effect.acquireRelease(
          Effect.sync(() =>
            connection.subscribe(subjectOf(topic), {
              callback: (error, message) => {
                if (error !== null) {
                  failed = true
                  subscriber.onUnreliable(`subscription failed: ${error.message}`)
                } else subscriber.onMessage(message.string())
              }
            })
          ),
          (sub) => Effect.sync(() => sub.unsubscribe())
        )
        // A round trip after SUB: once the server answers, it has registered the subscription.
        const becomeReliable = () => {
          connection.flush().then(
            () => {
              if (!failed && !subscription.isClosed() && !connection.isClosed()) subscriber.onReliable()
            },
            (cause: unknown) => subscriber.onUnreliable(`flush after connect failed: ${String(cause)}`)
          )
        }
        const onStatus = (status: Status) => {
          switch (status.type) {
            case "disconnect":
            case "staleConnection":
            case "close":
            case "forceReconnect":
              subscriber.onUnreliable(`NATS ${status.type}`)
              return
            case "slowConsumer":
              if (status.sub !== subscription) return
              // Messages may have been dropped; the subscriber is still registered.
              subscriber.onUnreliable("NATS slow consumer")
              if (!failed) becomeReliable()
              return
            case "reconnect":
              becomeReliable()
              return
            default:
              return
          }
        }
        yield* Effect.forkScoped(
          Effect.promise(async () => {
            for await (const status of statuses) onStatus(status)
          })
        )
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            const iterator = statuses as { stop?: () => void }
            iterator.stop?.()
          })
        )
        becomeReliable()
      })
  }
}
