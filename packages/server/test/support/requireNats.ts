/**
 * Whether the NATS suites run: they need the JetStream server on this machine
 * (127.0.0.1:4222). In CI (`.ci/run` sets PPS_REQUIRE_POSTGRES=1 and starts NATS) an
 * unreachable server fails the run instead of skipping; locally it skips with a warning.
 */
import * as net from "node:net"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"

export const natsUrl = process.env["PPS_TEST_NATS_URL"] ?? "nats://127.0.0.1:4222"

export const natsAvailable = await new Promise<boolean>((resolve) => {
  const url = new URL(natsUrl)
  const socket = net.connect({ host: url.hostname, port: Number(url.port || 4222) })
  const done = (ok: boolean) => {
    socket.destroy()
    resolve(ok)
  }
  socket.setTimeout(1_000, () => done(false))
  socket.once("connect", () => done(true))
  socket.once("error", () => done(false))
})

if (!natsAvailable) {
  if (process.env["PPS_REQUIRE_POSTGRES"] === "1") throw new Error(`NATS is required in CI but ${natsUrl} does not answer`)
  console.warn(`\n*** NATS at ${natsUrl} does not answer: SKIPPING the NATS suites ***\n`)
}

/** Deletes a test's own JetStream stream (its clean-up); nothing to do when NATS is not there. */
export const deleteStream = async (stream: string): Promise<void> => {
  if (!natsAvailable) return
  const nc = await connect({ servers: natsUrl })
  await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false)
  await nc.close()
}
