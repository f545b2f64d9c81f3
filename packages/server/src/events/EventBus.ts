/**
 * The event bus between the outbox relay and the webhook fan-out.
 *
 * Two implementations with one contract: `publish` returns once the bus holds
 * the events (in-process: once the consumer has handled them; JetStream: once
 * the stream has acknowledged them), and a consumer may see an event more than
 * once, so consumers are idempotent (fan-out is: one delivery per event and
 * subscription, by a unique index).
 *
 * - In-process (embedded mode): `publish` hands the batch straight to the
 *   registered consumer and waits for it. Nothing is buffered in memory, so a
 *   crash loses nothing: the relay marks events published only after this.
 * - NATS JetStream (`NATS_URL`): stream `NATS_STREAM` (default `PPS_EVENTS`) on
 *   subjects `<NATS_SUBJECT_PREFIX>.<mode>.<account_id>`, file storage, kept 7
 *   days. Each message carries ids only and `Nats-Msg-Id` = the event id, so a
 *   republished event inside the 10-minute duplicate window is dropped by the
 *   stream. One durable pull consumer, `<stream>_webhook_fanout`, is shared by
 *   every api node: each message goes to one node, is acked after its fan-out
 *   committed, and is redelivered (to any node) if unacked for 30 s.
 *
 * @since 0.1.0
 */
import { connect, type NatsConnection } from "@nats-io/transport-node"
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  type JetStreamClient,
  jetstreamManager,
  type JsMsg,
  RetentionPolicy,
  StorageType
} from "@nats-io/jetstream"
import { Context, Data, Effect, Layer, Option, Schema, type Scope, Stream } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { type ControlChannel, makeControlChannel } from "./ControlChannel.ts"
import { EventMessage } from "@pps/api/Events"

/**
 * The bus did not take the events (not connected, no consumer, consumer failed).
 *
 * @since 0.1.0
 * @category errors
 */
export class EventBusError extends Data.TaggedError("EventBusError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/**
 * Handles a batch of events; failing means "not handled, deliver again".
 *
 * @since 0.1.0
 * @category models
 */
export type EventHandler = (messages: ReadonlyArray<EventMessage>) => Effect.Effect<void, unknown>

/** JetStream: how long a message may stay unacked before it is redelivered. */
const ackWaitMs = 30_000
/** JetStream: how long the stream drops a repeated Nats-Msg-Id. */
const duplicateWindowMs = 10 * 60_000
/** JetStream: the stream is a transport, not the event log (the events table is). */
const streamMaxAgeMs = 7 * 24 * 60 * 60_000
/** JetStream: messages gathered into one fan-out batch, and how long a batch may wait to fill. */
const consumeBatchMax = 256
const consumeBatchWaitMs = 10
/** NATS: client pings the server this often; two unanswered make the connection stale. */
const natsPingIntervalMs = 10_000
const nanos = (ms: number) => ms * 1_000_000

/**
 * Where the JetStream bus lives.
 *
 * @since 0.8.0
 * @category models
 */
export interface JetStreamOptions {
  readonly url: string
  readonly stream: string
  readonly subjectPrefix: string
}

/** What publishing and consuming run over, built once by the layer. */
interface JetStreamContext {
  readonly options: JetStreamOptions
  readonly durable: string
  readonly js: JetStreamClient
}

const durableOf = (options: JetStreamOptions) => `${options.stream}_webhook_fanout`
const encoder = new TextEncoder()
const decodeMessage = Schema.decodeUnknownOption(Schema.fromJsonString(EventMessage))

/** The connection, drained when the layer's scope closes. */
const connectNats = (options: JetStreamOptions) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => connect({
        servers: options.url,
        name: "pps-server",
        maxReconnectAttempts: -1,
        // A silently dead link is noticed within ~3 pings (stale, then reconnect), well inside
        // API_KEY_CACHE_TTL_MS's default: the control channel's listeners drop their state then.
        pingInterval: natsPingIntervalMs
      }),
      catch: (cause) => new EventBusError({ message: `cannot connect to NATS at ${options.url}`, cause })
    }),
    (nc) => Effect.promise(() => nc.drain()).pipe(Effect.timeoutOption(5_000), Effect.ignore)
  )

/** Creates or updates the stream, and creates the shared durable consumer when missing. */
const ensureStream = (connection: NatsConnection, options: JetStreamOptions) =>
  Effect.gen(function*() {
    const manager = yield* Effect.tryPromise({
      try: () => jetstreamManager(connection),
      catch: (cause) => new EventBusError({ message: "JetStream is not enabled on the NATS server", cause })
    })
    const durable = durableOf(options)
    yield* Effect.tryPromise({
      try: async () => {
        const streamConfig = {
          name: options.stream,
          subjects: [`${options.subjectPrefix}.>`],
          retention: RetentionPolicy.Limits,
          storage: StorageType.File,
          max_age: nanos(streamMaxAgeMs),
          duplicate_window: nanos(duplicateWindowMs)
        }
        const exists = await manager.streams.info(options.stream).then(() => true, () => false)
        if (exists) await manager.streams.update(options.stream, streamConfig)
        else await manager.streams.add(streamConfig)
        const consumerConfig = {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ack_wait: nanos(ackWaitMs),
          max_ack_pending: 10_000,
          filter_subject: `${options.subjectPrefix}.>`
        }
        const consumerExists = await manager.consumers.info(options.stream, durable).then(() => true, () => false)
        if (!consumerExists) await manager.consumers.add(options.stream, consumerConfig)
      },
      catch: (cause) => new EventBusError({ message: `cannot set up stream ${options.stream}`, cause })
    })
  })

const publishJetStream = ({ js, options }: JetStreamContext, messages: ReadonlyArray<EventMessage>) =>
  Effect.tryPromise({
    try: () =>
      Promise.all(messages.map((message) =>
        js.publish(
          `${options.subjectPrefix}.${message.mode}.${message.account_id}`,
          encoder.encode(JSON.stringify(message)),
          { msgID: message.event_id }
        )
      )),
    catch: (cause) => new EventBusError({ message: "JetStream did not acknowledge the events", cause })
  }).pipe(Effect.asVoid, Effect.withSpan("EventBus.publish"))

/** Hands one batch to the handler: acked once handled, redelivered after a second when not. */
const handleBatch = (handler: EventHandler, batch: ReadonlyArray<JsMsg>) => {
  const decoded: Array<EventMessage> = []
  for (const message of batch) {
    const value = decodeMessage(message.string())
    // A message that is not ours cannot become one by retrying: drop it.
    if (Option.isNone(value)) message.term()
    else decoded.push(value.value)
  }
  return handler(decoded).pipe(
    Effect.matchEffect({
      onSuccess: () => Effect.sync(() => batch.forEach((message) => message.ack())),
      onFailure: (error) =>
        Effect.sync(() => batch.forEach((message) => message.nak(1_000))).pipe(
          Effect.andThen(Effect.logWarning("event fan-out failed; redelivering", error))
        )
    })
  )
}

const consumeJetStream = ({ durable, js, options }: JetStreamContext, handler: EventHandler) =>
  Effect.gen(function*() {
    const consumer = yield* Effect.tryPromise({
      try: () => js.consumers.get(options.stream, durable),
      catch: (cause) => new EventBusError({ message: `no consumer ${durable}`, cause })
    })
    const messages = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => consumer.consume({ max_messages: consumeBatchMax * 2 }),
        catch: (cause) => new EventBusError({ message: "cannot consume", cause })
      }),
      (iterator) => Effect.promise(() => iterator.close()).pipe(Effect.timeoutOption(5_000), Effect.ignore)
    )
    yield* Stream.fromAsyncIterable(messages, (cause) => new EventBusError({ message: "consume failed", cause })).pipe(
      Stream.groupedWithin(consumeBatchMax, consumeBatchWaitMs),
      Stream.runForEach((batch) => handleBatch(handler, batch)),
      Effect.catchCause((cause) => Effect.logError("JetStream consumer stopped", cause)),
      Effect.forkScoped
    )
  })

/**
 * @since 0.1.0
 * @category services
 */
export class EventBus extends Context.Service<EventBus, {
  readonly kind: "in-process" | "jetstream"
  readonly publish: (messages: ReadonlyArray<EventMessage>) => Effect.Effect<void, EventBusError>
  /** Starts handing events to `handler` for the life of the scope. */
  readonly consume: (handler: EventHandler) => Effect.Effect<void, EventBusError, Scope.Scope>
  /** Node-to-node control messages on the same NATS connection; None in the embedded mode (one process). */
  readonly control: Option.Option<ControlChannel>
}>()("server/events/EventBus") {
  /**
   * @since 0.1.0
   * @category layers
   */
  static readonly layerInProcess = Layer.sync(EventBus, () => {
    let consumer: EventHandler | undefined
    return EventBus.of({
      kind: "in-process",
      control: Option.none(),
      publish: (messages) =>
        Effect.suspend(() =>
          consumer === undefined
            ? Effect.fail(new EventBusError({ message: "no consumer is registered yet" }))
            : consumer(messages).pipe(
              Effect.mapError((cause) => new EventBusError({ message: "the consumer failed", cause }))
            )
        ),
      consume: (handler) =>
        Effect.acquireRelease(Effect.sync(() => (consumer = handler)), () => Effect.sync(() => (consumer = undefined))).pipe(
          Effect.asVoid
        )
    })
  })

  /**
   * @since 0.1.0
   * @category layers
   */
  static readonly layerJetStream = (options: JetStreamOptions) =>
    Layer.effect(
      EventBus,
      Effect.gen(function*() {
        const connection = yield* connectNats(options)
        yield* ensureStream(connection, options)
        const context: JetStreamContext = {
          options,
          durable: durableOf(options),
          js: jetstream(connection)
        }
        return EventBus.of({
          kind: "jetstream",
          control: Option.some(makeControlChannel(connection, options.subjectPrefix)),
          publish: (messages) => publishJetStream(context, messages),
          consume: (handler) => consumeJetStream(context, handler)
        })
      })
    )

  /**
   * JetStream when `NATS_URL` is set, otherwise in-process.
   *
   * @since 0.1.0
   * @category layers
   */
  static readonly layer = Layer.unwrap(
    Effect.gen(function*() {
      const config = yield* AppConfig
      return Option.match(config.natsUrl, {
        onNone: () => EventBus.layerInProcess,
        onSome: (url) => EventBus.layerJetStream({ url, stream: config.natsStream, subjectPrefix: config.natsSubjectPrefix })
      })
    })
  )
}
