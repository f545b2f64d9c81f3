/**
 * Goal: the dashboard is light, reachable on a phone, live, and its numbers add up (issue 46,
 * items 2, 3, 6 and 7), against a real server (child process: embedded PGlite, anvil and
 * guardian) in Debian's Chromium. A second file beside dashboard.e2e.test.ts, so the two run
 * on two workers; it shares the harness (test/support/harness.ts), not the server.
 *
 * - The sign-in page's first load is compressed (Brotli, as Chromium asks) and under 200 KB of
 *   script: the page is split, so the SDK and crypto load after sign-in; gzip and identity are
 *   served to clients that ask for them, every copy with `Vary: Accept-Encoding`.
 * - At a phone's width (390 px) tables are cards: nothing cut off, nothing wider than the screen.
 */
import * as http from "node:http"
import * as zlib from "node:zlib"
import { Pps } from "@pps/sdk"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { anvilRpcUrl, chainRpc } from "../../sdk/test/support/server.ts"
import { desktop, type Harness, phone, startHarness } from "./support/harness.ts"

const passphrase = "a passphrase for the live tests"
const explorer = "https://explorer.example/tx/{tx_hash}"
const liveAmount = "2.718281"
const liveMemo = "canary-live-31c9"

let harness: Harness
let origin: string
let browser: Browser
let page: Page

/** One GET with exactly the given `Accept-Encoding` (or none), read raw: status, headers and body bytes as sent. */
const rawGet = (url: string, acceptEncoding: string | undefined) =>
  new Promise<{ readonly headers: http.IncomingHttpHeaders; readonly body: Buffer }>((resolve, reject) => {
    const request = http.get(url, { headers: acceptEncoding === undefined ? {} : { "accept-encoding": acceptEncoding } }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => resolve({ headers: response.headers, body: Buffer.concat(chunks) }))
    })
    request.on("error", reject)
  })

beforeAll(async () => {
  harness = await startHarness({
    // A create answers `pending` soon when the chain is held still, so the page shows it turn confirmed.
    TRANSFER_CREATE_TIMEOUT_MS: "1500",
    CHAIN_EXPLORER_TX_URL_TESTNET: explorer
  })
  ;({ origin, browser, page } = harness)
}, 240_000)

afterAll(async () => {
  await harness?.stop()
}, 60_000)

describe("dashboard, light, live and reconciled", () => {
  it("loads the sign-in page with under 200 KB of script, compressed (the SDK and the other pages load after sign-in)", async () => {
    const fresh = await browser.newContext({ viewport: desktop })
    const opened = await fresh.newPage()
    harness.watchConsole(opened)
    const scripts: Array<Promise<{ readonly url: string; readonly encoding: string | undefined; readonly vary: string | undefined; readonly transferred: number }>> = []
    opened.on("response", (response) => {
      if (response.request().resourceType() !== "script") return
      scripts.push((async () => {
        await response.finished()
        const headers = await response.allHeaders()
        return { url: response.url(), encoding: headers["content-encoding"], vary: headers["vary"], transferred: (await response.request().sizes()).responseBodySize }
      })())
    })
    await opened.goto(`${origin}/dashboard/`)
    await opened.getByRole("button", { name: "Sign in with a passkey" }).waitFor()
    await opened.waitForLoadState("networkidle")
    const loaded = await Promise.all(scripts)
    expect(loaded.length).toBeGreaterThan(0)
    for (const script of loaded) {
      expect(script.encoding, script.url).toBe("br")
      expect(script.vary, script.url).toBe("Accept-Encoding")
    }
    const transferred = loaded.reduce((sum, script) => sum + script.transferred, 0)
    process.stderr.write(`sign-in page: ${loaded.length} script(s), ${transferred} bytes transferred\n`)
    expect(transferred).toBeLessThan(200_000)
    await fresh.close()

    // Other clients get what they ask for: gzip, or the bytes as built; the copies open to the same bytes.
    const entry = loaded[0]!.url
    const identity = await rawGet(entry, undefined)
    expect(identity.headers["content-encoding"]).toBeUndefined()
    expect(identity.headers["vary"]).toBe("Accept-Encoding")
    const gzip = await rawGet(entry, "br;q=0, gzip")
    expect(gzip.headers["content-encoding"]).toBe("gzip")
    expect(zlib.gunzipSync(gzip.body).equals(identity.body)).toBe(true)
    const brotli = await rawGet(entry, "gzip, deflate, br")
    expect(brotli.headers["content-encoding"]).toBe("br")
    expect(zlib.brotliDecompressSync(brotli.body).equals(identity.body)).toBe(true)
    expect(brotli.body.length).toBeLessThan(gzip.body.length)
    expect((await rawGet(`${origin}/dashboard/`, "gzip")).headers["content-encoding"]).toBe("gzip")
  })

  it("signs in and opens the key; at a phone's width every table is a stack of cards", async () => {
    await new Pps({ apiKey: harness.alice.api_key, baseUrl: harness.server.baseUrl, keyPair: harness.aliceKey }).transfers.create({ to: "@bob", amount: "1.25" })
    await harness.enroll()
    await harness.importKey(passphrase)
    await page.setViewportSize(phone)
    await harness.visit("Transfers", "Transfers", "transfers")
    await expect.poll(() => page.locator("table.data tbody tr").count(), { timeout: 60_000 }).toBeGreaterThan(0)
    // Each row a card: the header row is out of the flow, every cell is inside the screen and names its column.
    const layout = await page.locator("table.data").first().evaluate((table) => ({
      header: getComputedStyle(table.querySelector("thead")!).position,
      cells: [...table.querySelectorAll("td")].map((cell) => ({ right: cell.getBoundingClientRect().right, label: cell.getAttribute("data-label") }))
    }))
    expect(layout.header).toBe("absolute")
    for (const cell of layout.cells) expect(cell.right).toBeLessThanOrEqual(phone.width)
    expect(layout.cells.map((cell) => cell.label)).toContain("Amount")
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(phone.width)
    await page.setViewportSize(desktop)
  })

  it("shows a pending transfer turn confirmed from the event stream, with no reload; the detail's timeline links the hash and copies ids", async () => {
    const rpc = (method: string, params: ReadonlyArray<unknown>) => chainRpc(anvilRpcUrl(harness.server.dataDir), method, params)
    await harness.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin })
    await harness.visit("Transfers", "Transfers", "transfers")
    expect(await page.getByTestId("live-state").textContent()).toBe("Live")
    // A mark on this document: a reload would drop it.
    await page.evaluate(() => Object.assign(globalThis, { sameDocument: true }))
    // No blocks: the create waits its 1.5 s and answers pending.
    await rpc("evm_setIntervalMining", [0])
    let transferId: string
    try {
      await page.locator("#send-to").fill("@bob")
      await page.locator("#send-amount").fill(liveAmount)
      await page.locator("#send-memo").fill(liveMemo)
      await page.getByRole("button", { name: "Review" }).click()
      await page.getByRole("button", { name: "Confirm and send" }).click()
      await expect.poll(() => page.getByTestId("sent-status").textContent(), { timeout: 60_000 }).toBe("pending")
      await page.getByRole("link", { name: "Open it" }).click()
      transferId = (await page.getByTestId("transfer-id").textContent({ timeout: 60_000 })) ?? ""
      expect(transferId).toMatch(/^tr_\w+$/)
      // Created and submitted; not yet confirmed, so no transaction hash yet (D13's tx_hash comes with the outcome).
      expect(await page.getByTestId("timeline-created").getAttribute("data-state")).toBe("done")
      expect(await page.getByTestId("timeline-submitted").getAttribute("data-state")).toBe("done")
      expect(await page.getByTestId("timeline-confirmed").getAttribute("data-state")).toBe("current")
      expect(await page.getByTestId("transfer-status").textContent()).toBe("pending")
      // A copy button puts the exact id on the clipboard.
      await page.getByRole("button", { name: "Copy transfer id" }).click()
      await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(transferId)
      await harness.checkAccessibility("transfer-detail-pending")
      await harness.shoot("transfer-detail-pending")
    } finally {
      await rpc("evm_setIntervalMining", [1])
    }
    // Blocks again: the stream says confirmed, and the page shows it, in this same document.
    await expect.poll(() => page.getByTestId("transfer-status").textContent(), { timeout: 60_000 }).toBe("confirmed")
    expect(await page.getByTestId("timeline-confirmed").getAttribute("data-state")).toBe("done")
    expect(await page.getByTestId("transfer-confirmed").getAttribute("title")).toMatch(/^\d{4}-\d\d-\d\dT/)
    expect(await page.getByTestId("transfer-amount").textContent()).toBe(`${liveAmount} USDG`)
    expect(await page.evaluate(() => (globalThis as { sameDocument?: boolean }).sameDocument)).toBe(true)
    // The transaction's hash, linked to the explorer the deployment configured, and copied exactly.
    const hash = page.getByTestId("tx-hash")
    const txHash = (await hash.locator("code").textContent()) ?? ""
    expect(txHash).toMatch(/^0x[0-9a-f]{64}$/)
    expect(await hash.getAttribute("href")).toBe(explorer.replace("{tx_hash}", txHash))
    expect(await hash.getAttribute("rel")).toBe("noopener noreferrer")
    await page.getByRole("button", { name: "Copy transaction hash" }).click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(txHash)
    await harness.checkAccessibility("transfer-detail")
    await harness.shoot("transfer-detail")
  })

  it("logged no console error, broke no CSP rule and has no serious accessibility violation", () => {
    harness.finalChecks([passphrase, liveAmount, "2718281", liveMemo])
  })
})
