/**
 * A resource server for the tests: Express with `@x402/express`'s `paymentMiddleware` over the
 * scheme's merchant, on a loopback port. Routes: `/weather` and `/forecast` (the same price,
 * two resources), `/pricier` (another price), `/flaky` (fails on its first request, then
 * serves), `/broken` (always fails), `/expensive` (3 USDG), `/held` (1 USDG), `/canary`
 * (12.345679 USDG), `/free` (unpaid).
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { Pps } from "@pps/sdk"
import { paymentMiddleware } from "@x402/express"
import express from "express"
import { randomBytes } from "node:crypto"
import { Scheme, Server } from "../../src/index.ts"

export interface Shop {
  readonly baseUrl: string
  readonly merchant: Server.Merchant
  /** How many times each route's handler ran. */
  readonly handled: Map<string, number>
  readonly close: () => Promise<void>
}

/** 0.013217 USDG: a price no round number hides, for the chain canary. */
export const weatherPrice = "0.013217"

export const startShop = async (payee: Pps, options: { readonly validitySeconds?: number; readonly maxTimeoutSeconds?: number } = {}): Promise<Shop> => {
  const merchant = Server.merchant({
    payee,
    payTo: "@shop",
    secret: randomBytes(32),
    ...(options.validitySeconds === undefined ? {} : { validitySeconds: options.validitySeconds })
  })
  const maxTimeoutSeconds = options.maxTimeoutSeconds ?? 60
  const accept = (price: string) => ({ accepts: { scheme: Scheme.scheme, network: Scheme.networks.test, payTo: "@shop", price, maxTimeoutSeconds }, mimeType: "application/json" })
  const routes = {
    "GET /weather": accept(`$${weatherPrice}`),
    "GET /forecast": accept(`$${weatherPrice}`),
    "GET /pricier": accept("$0.02"),
    "GET /flaky": accept("$0.011"),
    "GET /broken": accept("$0.012"),
    "GET /expensive": accept("$3"),
    "GET /held": accept("$1"),
    // Eight digits in base units: a shorter number turns up by chance in hex and base64.
    "GET /canary": accept("$12.345679")
  }
  const handled = new Map<string, number>()
  const app = express()
  app.use(paymentMiddleware(routes, merchant.resourceServer))
  const count = (path: string) => {
    const n = (handled.get(path) ?? 0) + 1
    handled.set(path, n)
    return n
  }
  for (const path of ["/weather", "/forecast", "/pricier", "/expensive", "/held", "/canary"]) {
    app.get(path, (_request, response) => {
      count(path)
      response.json({ path, answer: 42 })
    })
  }
  app.get("/flaky", (_request, response) => {
    if (count("/flaky") === 1) response.status(503).json({ error: "the oracle is down" })
    else response.json({ path: "/flaky", answer: 43 })
  })
  app.get("/broken", (_request, response) => {
    count("/broken")
    response.status(500).json({ error: "always down" })
  })
  // Unpaid: the benchmark's baseline for the time a paid request adds.
  app.get("/free", (_request, response) => {
    response.json({ path: "/free", answer: 42 })
  })
  const server = http.createServer(app)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    merchant,
    handled,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
