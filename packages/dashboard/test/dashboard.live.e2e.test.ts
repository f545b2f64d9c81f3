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
import * as fs from "node:fs"
import * as http from "node:http"
import * as zlib from "node:zlib"
import { Pps } from "@pps/sdk"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { transferOf } from "../../sdk/test/support/created.ts"
import { anvilRpcUrl, chainRpc } from "../../sdk/test/support/server.ts"
import { desktop, type Harness, phone, startHarness } from "./support/harness.ts"

const passphrase = "a passphrase for the live tests"
const explorer = "https://explorer.example/tx/{tx_hash}"
const liveAmount = "2.718281"
const liveMemo = "canary-live-31c9"
/** Written by the other party, and a formula to a spreadsheet: the export keeps it text. */
const incomingMemo = "=canary-incoming-8d2e"
const agentMemo = "canary-agent-4b7a"

let harness: Harness
let origin: string
let browser: Browser
let page: Page
/** The agent the reconciliation test makes, and its key, for the pictures' test. */
let agentId: string
let agentKey: string
let agentSent: { readonly transfer_id: string }

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

/** The cells of one CSV line (RFC 4180: quoted cells may hold commas and doubled quotes). */
const csvCells = (line: string): Array<string> =>
  [...line.matchAll(/(?:^|,)("(?:[^"]|"")*"|[^,]*)/g)].map((match) => {
    const cell = match[1] ?? ""
    return cell.startsWith("\"") ? cell.slice(1, -1).replaceAll("\"\"", "\"") : cell
  })

beforeAll(async () => {
  harness = await startHarness({
    // A create answers `pending` soon when the chain is held still, so the page shows it turn confirmed.
    TRANSFER_CREATE_TIMEOUT_MS: "1500",
    CHAIN_EXPLORER_TX_URL_TESTNET: explorer,
    // One test holds blocks back itself (`evm_setIntervalMining`), so the node mines on its interval.
    EMBEDDED_CHAIN_MINING: "interval"
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
    await harness.visit("Activity", "Activity", "activity-first")
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

  it("lists transfers both ways, the agents' (marked) and the faucet grant, and shows the list adding up to the balance", async () => {
    const { server, alice, aliceKey, bob, bobKey } = harness
    const alicePps = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: aliceKey })
    const granted = await fetch(`${server.baseUrl}/v1/test/faucet`, {
      method: "POST",
      headers: { authorization: `Bearer ${bob.api_key}`, "content-type": "application/json" },
      body: JSON.stringify({ amount: "10" })
    })
    expect(granted.status).toBe(200)
    // Bob pays alice; alice funds an agent, which pays bob on its own key.
    const incoming = transferOf(await new Pps({ apiKey: bob.api_key, baseUrl: server.baseUrl, keyPair: bobKey }).transfers.create({ to: "@alice", amount: "0.5", memo: incomingMemo }))
    const agent = await alicePps.agents.create({ name: "buyer", spend_policy: { daily_limit_usdg: 20, per_transaction_limit_usdg: 10 } })
    agentId = agent.account_id
    await alicePps.transfers.create({ to: agent.handle, amount: "5" })
    agentKey = (await server.issueKey(agent.account_id, "bot")).api_key
    agentSent = transferOf(await new Pps({ apiKey: agentKey, baseUrl: server.baseUrl, senderKey: aliceKey.publicKey }).transfers.create({ to: "@bob", amount: "1.5", memo: agentMemo }))

    await harness.visit("Activity", "Activity", "activity-reconciled")
    // 100 granted − 1.25 to bob + 0.5 from bob − 5 to the agent: the agent's own 1.5 is its balance's, not alice's.
    const reconciliation = page.getByTestId("reconciliation-USDG")
    // The page was showing the list already: the new transfers' events refresh it, with no reload.
    await expect.poll(() => reconciliation.textContent({ timeout: 1_000 }).catch(() => ""), { timeout: 60_000 }).toContain("Balance 94.25 USDG")
    expect(await reconciliation.getAttribute("data-state")).toBe("matches")
    expect(await page.getByTestId("reconciliation-sum-USDG").textContent()).toBe(
      "The list adds up to 94.25 USDG: 100 USDG from the faucet + 0.5 USDG received − 6.25 USDG sent (confirmed)."
    )
    expect(await reconciliation.textContent()).toContain("It equals the balance.")
    // The grant, bob's payment and the agent's own transfer, marked, are rows of the one list.
    const row = (id: string) => page.getByTestId(`activity-${id}`)
    expect(await row(incoming.transfer_id).getByTestId("activity-amount").textContent()).toBe("+0.5 USDG")
    expect(await row(agentSent.transfer_id).getByTestId("agent-tag").textContent()).toBe("agent @alice/buyer")
    expect(await row(agentSent.transfer_id).getByTestId("activity-amount").textContent()).toBe("\u22121.5 USDG")
    expect(await page.getByRole("cell", { name: "+100 USDG" }).count()).toBe(1)
    // The owner opens its agent's transfer, memo included.
    await row(agentSent.transfer_id).getByTestId("transfer-row-time").click()
    await expect.poll(() => page.getByTestId("transfer-memo").textContent(), { timeout: 60_000 }).toBe(agentMemo)
    await page.getByRole("link", { name: "← Activity" }).click()
    await expect.poll(() => reconciliation.getAttribute("data-state", { timeout: 1_000 }).catch(() => ""), { timeout: 60_000 }).toBe("matches")
    await harness.shoot("activity-reconciled")
  })

  it("searches memos in the page, sorts, bounds dates, exports CSV written in the page, and keeps the view in the address's fragment", async () => {
    const rows = page.locator("table.data tbody tr")
    // The grant, 1.25 to bob, 0.5 from bob, 5 to the agent, and the agent's 1.5 to bob.
    await expect.poll(() => rows.count(), { timeout: 60_000 }).toBe(5)
    // A memo, opened in the page: only bob's payment.
    await page.locator("#activity-search").fill(incomingMemo.toUpperCase())
    await expect.poll(() => rows.count()).toBe(1)
    expect(await rows.first().getByTestId("activity-amount").textContent()).toBe("+0.5 USDG")
    // The view is in the fragment, which no request carries (finalChecks: the memo is in none).
    expect(new URLSearchParams(new URL(page.url()).hash.slice(1)).get("q")).toBe(incomingMemo.toUpperCase())
    // An id; a counterparty.
    await page.locator("#activity-search").fill(agentSent.transfer_id)
    await expect.poll(() => rows.count()).toBe(1)
    await page.locator("#activity-search").fill("@alice/buyer")
    await expect.poll(() => rows.count()).toBe(2)
    await page.locator("#activity-kind").selectOption("agents")
    await expect.poll(() => rows.count()).toBe(1)
    await page.getByRole("button", { name: "Clear" }).click()
    await expect.poll(() => rows.count()).toBe(5)
    // Largest first: the grant; smallest first: bob's 0.5.
    await page.locator("#activity-sort").selectOption("largest")
    expect(await rows.first().getByTestId("activity-amount").textContent()).toBe("+100 USDG")
    await page.locator("#activity-sort").selectOption("smallest")
    expect(await rows.first().getByTestId("activity-amount").textContent()).toBe("+0.5 USDG")
    // Days in the holder's zone: from tomorrow, nothing; today, everything.
    const today = await page.evaluate(() => new Intl.DateTimeFormat("en-CA", { year: "numeric", month: "2-digit", day: "2-digit" }).format(new Date()))
    const tomorrow = new Date(Date.parse(`${today}T12:00:00Z`) + 86_400_000).toISOString().slice(0, 10)
    await page.locator("#activity-from").fill(tomorrow)
    await expect.poll(() => page.getByText("No activity matches.").count()).toBe(1)
    await page.locator("#activity-from").fill(today)
    await page.locator("#activity-to").fill(today)
    await expect.poll(() => rows.count()).toBe(5)

    // The export: written in the page from what it opened, every row of the view, amounts signed.
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export CSV" }).click()])
    expect(download.suggestedFilename()).toMatch(/^activity-alice-\d{4}-\d\d-\d\d\.csv$/)
    expect(download.url()).toMatch(/^blob:/)
    const csv = fs.readFileSync((await download.path())!, "utf8").trimEnd().split("\r\n")
    expect(csv[0]).toBe("created_at_utc,created_at_local,type,agent,direction,counterparty,amount,asset,status,memo,id,tx_hash")
    expect(csv).toHaveLength(6)
    const columns = csv.slice(1).map(csvCells)
    // In the view's order (smallest amount first).
    expect(columns.map((cells) => cells[6])).toEqual(["0.5", "-1.25", "-1.5", "-5", "100"])
    expect(csv.some((line) => line.includes(`,received,@bob,0.5,USDG,confirmed,'${incomingMemo},`))).toBe(true)
    expect(csv.some((line) => line.includes(agentMemo) && line.includes("agent transfer,@alice/buyer,sent,@bob,-1.5,"))).toBe(true)
    // The holder's own rows add up to the balance, in the file too.
    const own = columns.filter((cells) => cells[2] !== "agent transfer").map((cells) => Number(cells[6]))
    expect(own.reduce((sum, value) => sum + value, 0)).toBeCloseTo(94.25, 6)

    // A reload keeps the view (the fragment); the key is locked after it, so the view searches what needs no key.
    await page.locator("#activity-search").fill("@alice/buyer")
    await page.locator("#activity-sort").selectOption("largest")
    await page.reload()
    await page.getByRole("heading", { level: 1, name: "Activity" }).waitFor()
    expect(await page.locator("#activity-search").inputValue()).toBe("@alice/buyer")
    expect(await page.locator("#activity-sort").inputValue()).toBe("largest")
    await expect.poll(() => rows.count(), { timeout: 60_000 }).toBe(2)
    await harness.checkAccessibility("activity after a reload")
    // Unlocked again for what follows.
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Settings", exact: true }).click()
    await page.getByLabel(/^Passphrase/).fill(passphrase)
    await page.getByRole("button", { name: "Unlock", exact: true }).click()
    await expect.poll(() => page.getByTestId("key-status").textContent(), { timeout: 60_000 }).toBe("Unlocked in this tab.")
  })

  it("pictures each agent's spend today against its limit and its last 30 days, and counts held transactions in the navigation, live", async () => {
    const { server, alice } = harness
    await harness.visit("Agents", "Agents", "agents-spending")
    const spent = page.getByTestId("spent-@alice/buyer")
    await expect.poll(() => spent.getByTestId("spent-today").textContent({ timeout: 1_000 }).catch(() => ""), { timeout: 60_000 })
      .toMatch(/^Today \(\d{4}-\d\d-\d\d, UTC\): 1\.5 USDG of 20 USDG a day, 7 %$/)
    expect(await spent.getByTestId("spent-bar").getAttribute("data-share")).toBe("7")
    expect(await spent.getByTestId("spent-30-days").textContent()).toBe("Last 30 days: 1.5 USDG in 1 transfer")
    const columns = spent.locator("[data-testid=spent-chart] rect.chart-column")
    expect(await columns.count()).toBe(30)
    expect(await columns.last().getAttribute("data-amount")).toBe("1500000")
    expect(await columns.first().getAttribute("data-amount")).toBe("0")
    await harness.shoot("agents-spending")

    // Held transactions counted next to Approvals, as they come and go, with no reload.
    const badge = page.getByTestId("pending-approvals")
    expect(await badge.count()).toBe(0)
    const patched = await fetch(`${server.baseUrl}/v1/agents/${agentId}/spend-policy`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${alice.api_key}`, "content-type": "application/json" },
      body: JSON.stringify({ hitl_threshold_usdg: 1 })
    })
    expect(patched.status).toBe(200)
    const held = await new Pps({ apiKey: agentKey, baseUrl: server.baseUrl, senderKey: harness.aliceKey.publicKey }).transfers.create({ to: "@bob", amount: "2" })
    expect(held.kind).toBe("held")
    await expect.poll(() => badge.textContent({ timeout: 1_000 }).catch(() => ""), { timeout: 60_000 }).toBe("1 waiting for approval")
    await harness.checkAccessibility("navigation with a held transaction")
    await harness.visit("Approvals", "Approvals", "approvals-waiting")
    if (held.kind !== "held") return
    const rejected = await fetch(`${server.baseUrl}/v1/agents/transactions/${held.held.transaction_id}/reject`, {
      method: "POST",
      headers: { authorization: `Bearer ${alice.api_key}` }
    })
    expect(rejected.status).toBe(200)
    await expect.poll(() => badge.count(), { timeout: 60_000 }).toBe(0)
    await expect.poll(() => page.getByText("Nothing waits for your approval.").count(), { timeout: 60_000 }).toBe(1)
  })

  it("shows a pending transfer turn confirmed from the event stream, with no reload; the detail's timeline links the hash and copies ids", async () => {
    const rpc = (method: string, params: ReadonlyArray<unknown>) => chainRpc(anvilRpcUrl(harness.server.dataDir), method, params)
    await harness.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin })
    await harness.visit("Activity", "Activity", "activity-live")
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
      await harness.shoot("transfer-timeline-pending")
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
    await harness.checkAccessibility("transfer-timeline")
    await harness.shoot("transfer-timeline")
  })

  it("logged no console error, broke no CSP rule and has no serious accessibility violation", () => {
    harness.finalChecks([passphrase, liveAmount, "2718281", liveMemo, incomingMemo, incomingMemo.toUpperCase(), agentMemo])
  })
})
