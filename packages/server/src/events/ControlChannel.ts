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
 * A broadcast can also wait for named nodes to have handled it: every
 * subscriber answers a message on its reply subject with its node id once its
 * `onMessage` has returned, and the sender waits (bounded) for the ids it
 * expects. "The server took it" says the message is on its way; "node X
 * answered" says node X has acted on it.
 *
 * @since 0.5.0
 */
import { createInbox, type NatsConnection, type Status, type Subscription } from "@nats-io/transport-node"
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
   * Publishes and waits (up to `waitMs`) until the server has taken the
   * message and every node named in `awaiting` has handled it (its
   * subscriber's `onMessage` returned). Succeeds with the named nodes that had
   * not answered when the wait ended; fails when the server did not take the
   * message in time (the client still holds it and sends it on reconnect).
   */
  readonly broadcast: (
    topic: string,
    payload: string,
    options: { readonly awaiting: ReadonlyArray<string>; readonly waitMs: number }
  ) => Effect.Effect<{ readonly unanswered: ReadonlyArray<string> }, ControlChannelError>
  /**
   * Subscribes for the life of the scope, answering each message with
   * `answerAs` once the subscriber has handled it; `onReliable` is first called
   * once the subscription is registered.
   */
  readonly subscribe: (topic: string, answerAs: string, subscriber: ControlSubscriber) => Effect.Effect<void, never, Scope.Scope>
}

/** The connection and subject prefix every control step runs over. */
interface ChannelContext {
  readonly connection: NatsConnection
  readonly subjectPrefix: string
}

type Unanswered = { readonly unanswered: ReadonlyArray<string> }

const encoder = new TextEncoder()
const decoder = new TextDecoder()

const subjectOf = (context: ChannelContext, topic: string) => `${context.subjectPrefix}_control.${topic}`

const broadcast = (
  context: ChannelContext,
  topic: string,
  payload: string,
  { awaiting, waitMs }: { readonly awaiting: ReadonlyArray<string>; readonly waitMs: number }
) =>
  Effect.callback<Unanswered, ControlChannelError>((resume) => {
    const { connection } = context
    const waitingFor = new Set(awaiting)
    let taken = false
    let done = false
    let answers: Subscription | undefined
    const finish = (outcome: Effect.Effect<Unanswered, ControlChannelError>) => {
      if (done) return
      done = true
      clearTimeout(timer)
      answers?.unsubscribe()
      resume(outcome)
    }
    const settleIfComplete = () => {
      if (taken && waitingFor.size === 0) finish(Effect.succeed({ unanswered: [] }))
    }
    const timer = setTimeout(() =>
      finish(
        taken
          ? Effect.succeed({ unanswered: [...waitingFor] })
          : Effect.fail(new ControlChannelError({ message: `NATS did not confirm within ${waitMs} ms` }))
      ), waitMs)
    try {
      // The answers' subscription goes out before the message, on the same connection, so
      // the server has registered it before any subscriber can answer.
      const inbox = createInbox()
      answers = connection.subscribe(inbox, {
        callback: (error, message) => {
          if (error !== null) return
          waitingFor.delete(decoder.decode(message.data))
          settleIfComplete()
        }
      })
      connection.publish(subjectOf(context, topic), encoder.encode(payload), { reply: inbox })
    } catch (cause) {
      finish(Effect.fail(new ControlChannelError({ message: "cannot publish the control message", cause })))
      return
    }
    connection.flush().then(
      () => {
        taken = true
        settleIfComplete()
      },
      (cause: unknown) => finish(Effect.fail(new ControlChannelError({ message: "NATS did not confirm the control message", cause })))
    )
    return Effect.sync(() => finish(Effect.succeed({ unanswered: [...waitingFor] })))
  }).pipe(Effect.withSpan("ControlChannel.broadcast"))

/** One subscription's state, shared by its message callback and its status watcher. */
interface Listening {
  readonly connection: NatsConnection
  readonly subscriber: ControlSubscriber
  subscription?: Subscription
  failed: boolean
}

// A round trip after SUB: once the server answers, it has registered the subscription.
const becomeReliable = (listening: Listening) => {
  listening.connection.flush().then(
    () => {
      const { connection, failed, subscriber, subscription } = listening
      if (!failed && subscription?.isClosed() === false && !connection.isClosed()) subscriber.onReliable()
    },
    (cause: unknown) => listening.subscriber.onUnreliable(`flush after connect failed: ${String(cause)}`)
  )
}

const onStatus = (listening: Listening, status: Status) => {
  switch (status.type) {
    case "disconnect":
    case "staleConnection":
    case "close":
    case "forceReconnect":
      listening.subscriber.onUnreliable(`NATS ${status.type}`)
      return
    case "slowConsumer":
      if (status.sub !== listening.subscription) return
      // Messages may have been dropped; the subscriber is still registered.
      listening.subscriber.onUnreliable("NATS slow consumer")
      if (!listening.failed) becomeReliable(listening)
      return
    case "reconnect":
      becomeReliable(listening)
      return
    default:
      return
  }
}

const subscribe = (context: ChannelContext, topic: string, answerAs: string, subscriber: ControlSubscriber) =>
  Effect.gen(function*() {
    const { connection } = context
    // Listen to the status before subscribing, so no disconnect can pass unseen in between.
    const statuses = connection.status()
    const listening: Listening = { connection, subscriber, failed: false }
    listening.subscription = yield* Effect.acquireRelease(
      Effect.sync(() =>
        connection.subscribe(subjectOf(context, topic), {
          callback: (error, message) => {
            if (error !== null) {
              listening.failed = true
              subscriber.onUnreliable(`subscription failed: ${error.message}`)
            } else {
              subscriber.onMessage(message.string())
              // Handled: tell the sender, if it waits for this node.
              if (message.reply !== undefined && message.reply !== "") message.respond(encoder.encode(answerAs))
            }
          }
        })
      ),
      (sub) => Effect.sync(() => sub.unsubscribe())
    )
    yield* Effect.forkScoped(
      Effect.promise(async () => {
        for await (const status of statuses) onStatus(listening, status)
      })
    )
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        const iterator = statuses as { stop?: () => void }
        iterator.stop?.()
      })
    )
    becomeReliable(listening)
  })

/**
 * @since 0.5.0
 * @category constructors
 */
export const makeControlChannel = (connection: NatsConnection, subjectPrefix: string): ControlChannel => {
  const context: ChannelContext = { connection, subjectPrefix }
  return {
    broadcast: (topic, payload, options) => broadcast(context, topic, payload, options),
    subscribe: (topic, answerAs, subscriber) => subscribe(context, topic, answerAs, subscriber)
  }
}
