/**
 * A server node for the crash test, run as its own process: events, webhooks
 * and accounts on the configuration from the environment (embedded PGlite in
 * DATA_DIR). With PPS_TEST_SEED=1 it first creates PPS_TEST_SUBSCRIPTIONS
 * accounts, one subscription each to PPS_TEST_RECEIVER/sub-<n>, and
 * PPS_TEST_EVENTS events per account, then prints "seeded".
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer } from "effect"
import { Accounts } from "../../src/accounts/Accounts.ts"
import { AppConfig } from "../../src/config/AppConfig.ts"
import { Outbox } from "../../src/events/Outbox.ts"
import { Webhooks } from "../../src/webhooks/Webhooks.ts"
import { confirmedEvent, EventsServicesLive } from "./webhooks-services.ts"

const seed = Effect.gen(function*() {
  const accounts = yield* Accounts
  const webhooks = yield* Webhooks
  const outbox = yield* Outbox
  const subscriptions = Number(process.env["PPS_TEST_SUBSCRIPTIONS"] ?? "3")
  const eventsPerAccount = Number(process.env["PPS_TEST_EVENTS"] ?? "10")
  for (let n = 0; n < subscriptions; n++) {
    const account = yield* accounts.create({ handle: `crash-${n}`, type: "personal", kycStatus: "verified" })
    yield* webhooks.create({ accountId: account.accountId, mode: "test" }, {
      url: `${process.env["PPS_TEST_RECEIVER"]}/sub-${n}`,
      events: ["transfer.confirmed"]
    })
    yield* outbox.append(
      Array.from({ length: eventsPerAccount }, (_, i) => confirmedEvent(account.accountId, account.handle, "test", `tr_${n}_${i}`))
    )
  }
  process.stdout.write("seeded\n")
})

const program = Effect.gen(function*() {
  if (process.env["PPS_TEST_SEED"] === "1") yield* seed
  process.stdout.write("ready\n")
  return yield* Effect.never
})

program.pipe(
  Effect.provide(EventsServicesLive.pipe(Layer.provideMerge(AppConfig.layer))),
  Effect.orDie,
  NodeRuntime.runMain
)
