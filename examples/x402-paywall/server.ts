/**
 * A paywall in one file: `GET /answer` sells a JSON answer for PRICE USDG (default 0.013217)
 * with the confidential x402 scheme `pps-sealed` (D57), on `@x402/express`. The payee's API key
 * and key file stay in this process: it opens its own sealed copy of each payment to check it.
 *
 *   PPS_API_KEY=hc_test_... PPS_KEY_FILE=~/.pps/acct_....key PAYEE=@shop npm start
 *
 * Other settings: PPS_BASE_URL (default http://127.0.0.1:8080), PORT (4021), PRICE,
 * X402_SECRET (64 hex characters; default: drawn at start, so 402s issued before a restart are
 * no longer payable).
 */
import { randomBytes } from "node:crypto"
import { KeyFile, Pps } from "@pps/sdk"
import { Scheme, Server } from "@pps/x402"
import { paymentMiddleware } from "@x402/express"
import express from "express"

const required = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "") {
    console.error(`x402-paywall: set ${name} (see README.md)`)
    process.exit(2)
  }
  return value
}

const apiKey = required("PPS_API_KEY")
const payTo = required("PAYEE")
const { keyPair } = KeyFile.read(required("PPS_KEY_FILE"))
const payee = new Pps({ apiKey, baseUrl: process.env["PPS_BASE_URL"] ?? "http://127.0.0.1:8080", keyPair })
const secret = process.env["X402_SECRET"] === undefined ? randomBytes(32) : Buffer.from(process.env["X402_SECRET"], "hex")
const price = process.env["PRICE"] ?? "0.013217"
const port = Number(process.env["PORT"] ?? "4021")

const shop = Server.merchant({ payee, payTo, secret })
const app = express()
app.use(paymentMiddleware({
  "GET /answer": {
    accepts: { scheme: Scheme.scheme, network: Scheme.networkOfApiKey(apiKey), payTo, price: `${price} USDG`, maxTimeoutSeconds: 60 },
    description: "The answer, for a price nobody but you and the shop can read on chain",
    mimeType: "application/json"
  }
}, shop.resourceServer))
app.get("/answer", (_request, response) => {
  response.json({ answer: 42, served_at: new Date().toISOString() })
})
app.listen(port, "127.0.0.1", () => {
  console.error(`x402-paywall: GET http://127.0.0.1:${port}/answer costs ${price} USDG, paid to ${payTo} with ${Scheme.scheme}`)
})
