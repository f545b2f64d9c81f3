/**
 * The benchmark's receiver, in its own process (so its TLS work does not share
 * the server's CPU): HTTPS on loopback answering 200, reporting arrivals over
 * IPC. The CA directory comes from PPS_BENCH_CA_DIR.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { startReceiver } from "../test/support/webhooks-receiver.ts"

const dir = process.env["PPS_BENCH_CA_DIR"]!
const receiver = await startReceiver({
  dir,
  caFile: path.join(dir, "ca.pem"),
  serverKey: fs.readFileSync(path.join(dir, "server.key"), "utf8"),
  serverCert: fs.readFileSync(path.join(dir, "server.pem"), "utf8")
})
process.on("message", (message: unknown) => {
  if (message === "count") process.send!({ count: receiver.requests.length })
  if (message === "report") {
    process.send!({
      arrivals: receiver.requests.map((request) => [String(request.headers["x-service-event-id"]), request.receivedAtMs])
    })
  }
  if (message === "reset") receiver.requests.length = 0
  if (message === "stop") void receiver.close().then(() => process.exit(0))
})
process.send!({ url: receiver.url })
