/**
 * Goal: the dashboard works end to end for a person in a real browser against a
 * real server (child process: embedded PGlite, anvil and guardian), and no
 * amount or memo leaves the page in clear.
 *
 * Chromium (Debian's) with a virtual WebAuthn authenticator: enroll a passkey
 * through the operator's invite link, sign out and back in, import the key file
 * `pps keygen` writes, read the balance, send a transfer sealed in the page and
 * read its amount and memo back, create an API key (shown once) and use it from
 * outside, revoke it (the next call is 401), subscribe a local webhook receiver
 * and replay a delivery, approve a held agent transaction after reading its
 * amount, issue an agent's key on the Agents page (shown once) and revoke it, refund a received
 * transfer from its page after a review (D43), replace the encryption key keeping the balance (D55).
 * Every request the page makes is recorded: none carries the canary amounts,
 * memos, the key file's secret or an API key. Every page is checked with
 * axe-core (no serious or critical violation) and under its CSP (no violation
 * reported).
 *
 * Nothing approved or sent unseen (issue 46): Approve is disabled while the key
 * is locked and enabled once the amount is opened; approve and reject confirm
 * with amount, recipient and the agent's spend today; a send is reviewed first,
 * and a review confirmed again after the network failed pays once. Refusals
 * show at their field in a person's words; times read the same in list and
 * detail under two browser time zones; an unknown route shows a 404 page; and
 * the browser's console shows no error but the failed loads the tests provoke.
 */
import { Pps, type PpsTypes } from "@pps/sdk"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ServerProcess } from "../../sdk/test/support/server.ts"
import { type Receiver, startReceiver } from "../../server/test/support/webhooks-receiver.ts"
import { type Account, desktop, type Harness, phone, startHarness } from "./support/harness.ts"

/** Canary values: each must appear in the page, and in no request the page makes. */
const sentAmount = "7.654321"
const sentMemo = "canary-memo-5f1e9a"
const heldAmount = "3.141592"
const heldMemo = "canary-held-77c2"
const refundAmount = "1.357913"
const refundMemo = "canary-refund-3d8b"
const passphrase = "correct horse battery staple"

let harness: Harness
let server: ServerProcess
let origin: string
let receiver: Receiver
let alice: Account
let bob: Account
let browser: Browser
let context: BrowserContext
let page: Page

const checkAccessibility = (name: string) => harness.checkAccessibility(name)
const shoot = (name: string, on?: Page) => harness.shoot(name, on)
const visit = (label: string, heading: string, name: string) => harness.visit(label, heading, name)
const provoke = (why: string, text: RegExp, url: RegExp) => harness.provoke(why, text, url)
const admin = (...args: Array<string>) => harness.admin(...args)

/** A second browser context signed in with the main one's session cookie (no passkey needed), in a time zone of its own. */
const contextIn = async (timezoneId: string) => {
  const other = await browser.newContext({ viewport: desktop, timezoneId })
  await other.addCookies(await context.cookies())
  const opened = await other.newPage()
  harness.watchConsole(opened)
  return { context: other, page: opened }
}

/** What the page says when a step fails: its alerts. */
const alerts = () => page.getByRole("alert").allTextContents()

beforeAll(async () => {
  harness = await startHarness({ WEBHOOK_ALLOW_INSECURE_LOOPBACK: "true", WEBHOOK_ALLOWED_PRIVATE_CIDRS: "127.0.0.0/8" })
  ;({ server, origin, alice, bob, browser, context, page } = harness)
  receiver = await startReceiver(undefined)
}, 240_000)

afterAll(async () => {
  await receiver?.close()
  await harness?.stop()
}, 60_000)

describe("dashboard in Chromium", () => {
  it("enrolls a passkey from the operator's invite link, signs out, and signs in again with it", async () => {
    const invite = await admin("accounts", "invite", "--account", alice.account_id)
    expect(invite["url"]).toMatch(/\/dashboard\/enroll#invite=[A-Za-z0-9_-]{43}$/)
    const port = new URL(server.baseUrl).port
    await page.goto(invite["url"]!.replace(/^http:\/\/localhost:\d+/, `http://localhost:${port}`))
    await page.getByRole("heading", { name: "Enroll a passkey" }).waitFor()
    // The page names the invite's account, and asks the person to confirm it is theirs first.
    // It shows once the server has answered the invite's ceremony options: the first ceremony
    // after a start loads the WebAuthn verifier (D93), which took over a second in a loaded CI run.
    await expect.poll(() => page.getByTestId("invite-handle").textContent(), { timeout: 20_000 }).toContain("@alice")
    expect(await page.getByRole("button", { name: "Create passkey and sign in" }).isDisabled()).toBe(true)
    await page.getByLabel(/This is my account \(@alice\)/).check()
    await checkAccessibility("enroll")
    await shoot("enroll")
    await page.getByRole("button", { name: "Create passkey and sign in" }).click()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    await expect.poll(() => page.getByText("@alice").count()).toBeGreaterThan(0)

    // The invite is spent.
    const reused = await fetch(`${server.baseUrl}/dashboard/api/enroll/options`, {
      method: "POST",
      headers: { origin, "content-type": "application/json" },
      body: JSON.stringify({ invite: invite["url"]!.split("#invite=")[1] })
    })
    expect(reused.status).toBe(404)

    await visit("Settings", "Settings", "settings-signed-in")
    await page.getByRole("button", { name: "Sign out", exact: true }).click()
    await page.getByRole("heading", { name: "Sign in to Private Payments" }).waitFor()
    await checkAccessibility("sign-in")
    await shoot("sign-in")
    await page.getByRole("button", { name: "Sign in with a passkey" }).click()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
  })

  it("shows 'encrypted' without the key, imports the key file, then shows the balance", async () => {
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    await expect.poll(() => page.getByTestId("balance-USDG").textContent()).toContain("encrypted")
    await visit("Settings", "Settings", "settings")
    await page.getByLabel(/^Passphrase/).fill(passphrase)
    await page.locator("#key-file").setInputFiles(harness.keyFilePath)
    await page.getByRole("button", { name: "Import key file" }).click()
    await expect.poll(() => page.getByTestId("key-status").textContent(), { timeout: 60_000 }).toBe("Unlocked in this tab.")
    await visit("Overview", "Overview", "overview")
    await expect.poll(async () => (await alerts()).join(" ") || await page.getByTestId("balance-USDG").textContent({ timeout: 1_000 }).catch(() => ""), { timeout: 60_000 }).toBe("100")
  })

  it("tells each refused input what is expected, next to its field, trimmed, with the API's code in small type", async () => {
    await visit("Activity", "Activity", "activity")
    /** Fills the form, asks for the review, and reads the error shown at `field` (checked to be that input's description). */
    const refusedAt = async (field: "to" | "amount", to: string, amount: string) => {
      await page.locator("#send-to").fill(to)
      await page.locator("#send-amount").fill(amount)
      await page.getByRole("button", { name: "Review" }).click()
      const error = page.getByTestId(`field-error-${field}`)
      await error.waitFor({ timeout: 60_000 })
      const input = page.locator(`#send-${field}`)
      expect(await input.getAttribute("aria-invalid")).toBe("true")
      expect(await input.getAttribute("aria-describedby")).toBe(await error.getAttribute("id"))
      // At the field: the error follows its input, not the button.
      expect(await input.evaluate((element) => element.nextElementSibling?.getAttribute("data-testid"))).toBe(`field-error-${field}`)
      return (await error.textContent()) ?? ""
    }
    expect(await refusedAt("amount", "@bob", "-1")).toBe("Enter an amount without a minus sign, like 1: it cannot be negative.")
    expect(await refusedAt("amount", "@bob", "1,5")).toBe("Use a dot for decimals and no thousands separators: write 1.5.")
    expect(await refusedAt("amount", "@bob", " 0 ")).toBe("Enter an amount above 0: 0 USDG would send nothing.")
    expect(await refusedAt("amount", "@bob", "1.1234567")).toBe("USDG has at most 6 decimal places: the smallest amount is 0.000001.")
    // A malformed address and an unknown handle are different mistakes, and are told apart.
    expect(await refusedAt("to", " 0x1234 ", "1")).toBe(
      "This is not a whole address: an address is 0x followed by 40 hexadecimal characters, and this one has 4. Paste it again in full."
    )
    // Inputs are trimmed: " 1 " is reviewed as 1; the unknown handle is the API's refusal, in words, code below.
    provoke("a send to an unknown handle", /status of 404/, /\/v1\/transfers\/prepare$/)
    await page.locator("#send-to").fill("  @nobody-here ")
    await page.locator("#send-amount").fill(" 1 ")
    await page.getByRole("button", { name: "Review" }).click()
    expect(await page.getByTestId("review-amount").textContent()).toBe("1 USDG")
    expect(await page.getByTestId("review-to").textContent()).toBe("@nobody-here")
    await page.getByRole("button", { name: "Confirm and send" }).click()
    const unknown = page.getByTestId("field-error-to")
    await unknown.waitFor({ timeout: 60_000 })
    expect(await unknown.textContent()).toMatch(/^No account has the handle @nobody-here\. Check the spelling \(handles look like @bob\), or paste the recipient's 0x address\. code recipient_not_found · req_\w+$/)
    expect(await unknown.locator(".support-code").textContent()).toMatch(/^ code recipient_not_found · req_\w+$/)
    await checkAccessibility("send-field-error")
    await shoot("send-field-error")
  })

  it("reviews a send before paying, and a review confirmed again after the network failed pays once", async () => {
    const bobPps = new Pps({ apiKey: bob.api_key, baseUrl: server.baseUrl, keyPair: harness.bobKey })
    const receivedByBob = async () => {
      const received: Array<PpsTypes.Transfer> = []
      for await (const transfer of bobPps.transfers.list()) received.push(transfer)
      return received
    }
    expect(await receivedByBob()).toHaveLength(0)
    await page.locator("#send-to").fill("@bob")
    await page.locator("#send-amount").fill(sentAmount)
    await page.locator("#send-memo").fill(sentMemo)
    await page.getByRole("button", { name: "Review" }).click()
    // Nothing is sent by asking for the review; it says what would be.
    const review = page.getByTestId("send-review")
    expect(await review.textContent()).toContain(`You are sending ${sentAmount} USDG to @bob`)
    expect(await page.getByTestId("review-memo").textContent()).toBe(sentMemo)
    expect(await review.textContent()).toContain("Confidential")
    expect(await receivedByBob()).toHaveLength(0)
    await checkAccessibility("send-review")
    await shoot("send-review")

    // The server does the transfer, but every answer is lost on the way back (a cut connection).
    let cut = 0
    await page.route(`${origin}/v1/transfers`, async (route) => {
      if (route.request().method() !== "POST") return route.continue()
      await route.fetch()
      cut += 1
      await route.abort("failed")
    })
    provoke("the answers the test cut", /net::ERR_FAILED/, /\/v1\/transfers$/)
    await page.getByRole("button", { name: "Confirm and send" }).click()
    await expect.poll(async () => (await alerts()).join(" "), { timeout: 90_000 }).toContain("No answer came back from the server")
    expect(cut).toBeGreaterThanOrEqual(1)
    // The review stays, to be confirmed again; the server already paid once.
    expect(await page.getByTestId("send-review").count()).toBe(1)
    await page.unroute(`${origin}/v1/transfers`)
    // Confirmed again, twice in a row: the same review, the same key, the first outcome.
    await page.getByRole("button", { name: "Confirm and send" }).dblclick()
    await expect.poll(() => page.locator(".success").textContent(), { timeout: 90_000 })
      .toMatch(new RegExp(`^Sent ${sentAmount.replace(".", "\\.")} USDG to @bob: transfer tr_\\w+ is (confirmed|pending)\\. Open it$`))
    // Paid once: bob received one transfer, and opens exactly what the page sealed.
    const received = await receivedByBob()
    expect(received).toHaveLength(1)
    expect(await bobPps.transfers.decrypt(received[0]!.transfer_id)).toMatchObject({ amount: 7_654_321n, memo: sentMemo })
    // Every create of this review carried one Idempotency-Key; the refused send's review had another.
    const creates = harness.recorded.filter((r) => r.method === "POST" && r.url === `${origin}/v1/transfers`)
    const keys = new Set(creates.map((r) => r.headers["idempotency-key"]))
    expect(creates.length).toBeGreaterThanOrEqual(cut + 1)
    expect(keys.size).toBe(1)
    const prepareKeys = new Set(harness.recorded.filter((r) => r.url === `${origin}/v1/transfers/prepare`).map((r) => r.headers["idempotency-key"]))
    expect(prepareKeys.size).toBe(2)

    // The result links to the transfer, whose detail opens amount and memo.
    await page.getByRole("link", { name: "Open it" }).click()
    await expect.poll(() => page.getByTestId("transfer-amount").textContent(), { timeout: 60_000 }).toBe(`${sentAmount} USDG`)
    expect(await page.getByTestId("transfer-memo").textContent()).toBe(sentMemo)
    expect(await page.getByTestId("transfer-created").getAttribute("title")).toBe(received[0]!.created_at)
    // No explorer is configured for this deployment: the hash is shown, not linked.
    await expect.poll(() => page.getByTestId("tx-hash").evaluate((element) => element.tagName), { timeout: 60_000 }).toBe("CODE")
    await checkAccessibility("transfer-detail")
    await shoot("transfer-detail")
  })

  it("refunds a received transfer from its page after a review, sealed in the page, linked both ways (D43)", async () => {
    const bobPps = new Pps({ apiKey: bob.api_key, baseUrl: server.baseUrl, keyPair: harness.bobKey })
    const paid = await bobPps.transfers.create({ to: "@alice", amount: "2.468024" })
    const original = paid.kind === "transfer" ? paid.transfer.transfer_id : ""
    await visit("Activity", "Activity", "activity")
    await page.locator(`a[href="/dashboard/transfers/${original}"]`).first().click()
    await expect.poll(() => page.getByTestId("transfer-amount").textContent(), { timeout: 60_000 }).toBe("2.468024 USDG")
    await page.getByRole("button", { name: "Refund" }).click()
    // The whole amount is filled in; the holder sends back part of it.
    expect(await page.locator("#refund-amount").inputValue()).toBe("2.468024")
    await page.locator("#refund-amount").fill(refundAmount)
    await page.locator("#refund-memo").fill(refundMemo)
    await page.getByRole("button", { name: "Review" }).click()
    const review = page.getByTestId("send-review")
    expect(await review.textContent()).toContain(`You are sending back ${refundAmount} USDG to @bob`)
    expect(await review.textContent()).toContain(original)
    await checkAccessibility("refund-review")
    await page.getByRole("button", { name: "Confirm and send" }).click()
    await expect.poll(() => page.locator(".success").textContent(), { timeout: 90_000 })
      .toMatch(new RegExp(`^Sent ${refundAmount.replace(".", "\\.")} USDG back to @bob: refund tr_\\w+ is (confirmed|pending)\\. Open it$`))
    // Bob opens what came back, linked to his payment; the page lists it under the original.
    const [refund] = (await bobPps.transfers.get(original)).refunds
    expect(await bobPps.transfers.get(refund!)).toMatchObject({ refund_of: original, direction: "received" })
    expect(await bobPps.transfers.decrypt(refund!)).toMatchObject({ amount: 1_357_913n, memo: refundMemo })
    await expect.poll(() => page.getByTestId("transfer-refunds").textContent(), { timeout: 60_000 }).toBe(refund)
    // The page sent the refund sealed: no amount in its body.
    const refunds = harness.recorded.filter((r) => r.method === "POST" && r.url === `${origin}/v1/transfers/${original}/refund`)
    expect(refunds).toHaveLength(1)
    expect(JSON.parse(refunds[0]!.body)).toHaveProperty("sealed")
  })

  it("creates an API key shown once, which works from outside, and revokes it at once", async () => {
    await visit("API keys", "API keys", "api-keys")
    await page.locator("#key-name").fill("ci-key")
    await page.getByRole("button", { name: "Create key" }).click()
    const value = (await page.getByTestId("secret-value").textContent()) ?? ""
    expect(value).toMatch(/^hc_test_[A-Za-z0-9_-]{43}$/)
    await shoot("api-key-created")
    const me = await fetch(`${server.baseUrl}/v1/accounts/me`, { headers: { authorization: `Bearer ${value}` } })
    expect(me.status).toBe(200)
    expect(await me.json()).toMatchObject({ account_id: alice.account_id })
    await page.getByRole("button", { name: "Done" }).click()
    expect(await page.getByTestId("secret-value").count()).toBe(0)

    page.once("dialog", (dialog) => void dialog.accept())
    await page.getByRole("button", { name: "Revoke ci-key" }).click()
    await expect.poll(() => page.getByTestId("key-ci-key").textContent()).toContain("revoked")
    const after = await fetch(`${server.baseUrl}/v1/accounts/me`, { headers: { authorization: `Bearer ${value}` } })
    expect(after.status).toBe(401)
  })

  it("subscribes a local receiver, then replays a delivery to it from the log", async () => {
    await visit("Webhooks", "Webhooks", "webhooks")
    await page.locator("#webhook-url").fill(`${receiver.url}/hook`)
    await page.getByRole("button", { name: "Create subscription" }).click()
    expect(await page.getByTestId("secret-value").textContent()).toMatch(/^whsec_/)
    await page.getByRole("button", { name: "Done" }).click()

    // An event to deliver: a transfer by API from alice's own key.
    const pps = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: harness.aliceKey })
    await pps.transfers.create({ to: "@bob", amount: "1" })
    await expect.poll(() => receiver.requests.length, { timeout: 60_000 }).toBeGreaterThanOrEqual(1)
    const firstEventId = receiver.requests[0]!.headers["x-service-event-id"]

    await page.getByRole("button", { name: "Deliveries" }).click()
    await page.getByRole("button", { name: /^Replay transfer.confirmed/ }).first().waitFor({ timeout: 30_000 })
    await checkAccessibility("webhook-deliveries")
    await shoot("webhook-deliveries")
    await page.getByRole("button", { name: /^Replay transfer.confirmed/ }).first().click()
    await expect.poll(() => page.locator(".success").first().textContent()).toMatch(/^Replay queued as dlv_/)
    await expect.poll(() => receiver.requests.length, { timeout: 60_000 }).toBeGreaterThanOrEqual(2)
    expect(receiver.requests.at(-1)!.headers["x-service-event-id"]).toBe(firstEventId)
  })

  it("approves a held agent transaction after showing its amount, opened in the page", async () => {
    const pps = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: harness.aliceKey })
    const agent = await pps.agents.create({ name: "shop-bot", spend_policy: { daily_limit_usdg: 50, per_transaction_limit_usdg: 20, hitl_threshold_usdg: 1 } })
    await pps.transfers.create({ to: agent.handle, amount: "10" })
    const agentKey = await server.issueKey(agent.account_id, "bot")
    const bot = new Pps({ apiKey: agentKey.api_key, baseUrl: server.baseUrl, senderKey: harness.aliceKey.publicKey })
    expect(await bot.transfers.create({ to: "@bob", amount: heldAmount, memo: heldMemo })).toMatchObject({ kind: "held", held: { status: "pending_approval" } })

    // A reload locks the key: the amount cannot be opened, so Approve is not offered.
    await page.reload()
    await page.getByRole("heading", { level: 1 }).waitFor()
    await visit("Approvals", "Approvals", "approvals-key-locked")
    const approve = page.getByRole("button", { name: "Approve", exact: true })
    expect(await page.getByTestId("held-amount").textContent()).toBe("encrypted")
    expect(await approve.isDisabled()).toBe(true)
    expect(await page.getByTestId("approve-hint").textContent()).toBe(
      "Approving needs the amount opened in this page: unlock your encryption key in Settings first. Go to Settings"
    )
    // Reject stays possible (no money moves), and its confirmation says what is not known.
    await page.getByRole("button", { name: "Reject", exact: true }).click()
    const dialog = page.getByRole("dialog", { name: "Reject this payment?" })
    await dialog.waitFor()
    expect(await dialog.getByTestId("decision-amount").textContent()).toBe("encrypted (not opened in this page)")
    expect(await dialog.getByTestId("decision-to").textContent()).toBe("@bob")
    expect(await dialog.getByTestId("held-spend").textContent()).toContain("Sent today: encrypted")
    await dialog.getByRole("button", { name: "Cancel" }).click()
    await dialog.waitFor({ state: "hidden" })

    // Unlocked: the amount is opened, and Approve asks once more with amount, recipient and the day's spending.
    await page.getByRole("link", { name: "Go to Settings" }).click()
    await page.getByLabel(/^Passphrase/).fill(passphrase)
    await page.getByRole("button", { name: "Unlock", exact: true }).click()
    await expect.poll(() => page.getByTestId("key-status").textContent(), { timeout: 60_000 }).toBe("Unlocked in this tab.")
    await visit("Approvals", "Approvals", "approvals")
    await expect.poll(() => page.getByTestId("held-amount").textContent(), { timeout: 60_000 }).toBe(`${heldAmount} USDG`)
    expect(await approve.isDisabled()).toBe(false)
    await approve.click()
    const approveDialog = page.getByRole("dialog", { name: "Approve this payment?" })
    await approveDialog.waitFor()
    expect(await approveDialog.getByTestId("decision-amount").textContent()).toBe(`${heldAmount} USDG`)
    expect(await approveDialog.getByTestId("decision-to").textContent()).toBe("@bob")
    expect(await approveDialog.getByTestId("held-spend").textContent()).toBe(
      `Limits: 20 USDG per transfer, 50 USDG a day (the day in UTC).Sent today: 0 USDG in 0 transfers; with this one ${heldAmount} USDG of 50 USDG.`
    )
    await checkAccessibility("approve-confirm")
    await shoot("approve-confirm")
    await approveDialog.getByRole("button", { name: "Approve and pay" }).click()
    await expect.poll(() => page.locator(".success").textContent(), { timeout: 90_000 })
      .toMatch(new RegExp(`^Approved: @alice/shop-bot pays ${heldAmount.replace(".", "\\.")} USDG to @bob \\(transfer tr_\\w+, (pending|confirmed)\\)\\. Open the transfer$`))
    await expect.poll(() => page.getByText("Nothing waits for your approval.").count()).toBe(1)
    // The result links to the transfer the approval made.
    expect(await page.getByRole("link", { name: "Open the transfer" }).getAttribute("href")).toMatch(/^\/dashboard\/transfers\/tr_\w+$/)

    // A second held transfer: its confirmation counts what the agent already sent today; rejected, nothing moves.
    expect(await bot.transfers.create({ to: "@bob", amount: "2" })).toMatchObject({ kind: "held" })
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Overview" }).click()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    await visit("Approvals", "Approvals", "approvals")
    await expect.poll(() => page.getByTestId("held-amount").textContent(), { timeout: 60_000 }).toBe("2 USDG")
    await page.getByRole("button", { name: "Reject", exact: true }).click()
    const rejectDialog = page.getByRole("dialog", { name: "Reject this payment?" })
    expect(await rejectDialog.getByTestId("decision-amount").textContent()).toBe("2 USDG")
    expect(await rejectDialog.getByTestId("held-spend").textContent()).toContain(`Sent today: ${heldAmount} USDG in 1 transfer; with this one 5.141592 USDG of 50 USDG.`)
    await rejectDialog.getByRole("button", { name: "Reject", exact: true }).click()
    await expect.poll(() => page.locator(".success").textContent(), { timeout: 60_000 }).toBe("Rejected: @alice/shop-bot's payment 2 USDG to @bob will not be made.")
    // The agent's spending, opened with the owner's key in the page.
    await visit("Agents", "Agents", "agents")
    const spent = page.getByTestId("spent-@alice/shop-bot")
    await expect.poll(() => spent.getByTestId("spent-30-days").textContent({ timeout: 1_000 }).catch(() => ""), { timeout: 60_000 })
      .toBe(`Last 30 days: ${heldAmount} USDG in 1 transfer`)
    expect(await spent.getByTestId("spent-today").textContent()).toMatch(new RegExp(`^Today \\(\\d{4}-\\d\\d-\\d\\d, UTC\\): ${heldAmount.replace(".", "\\.")} USDG of 50 USDG a day, 6 %$`))
  })

  it("issues an agent's key on the Agents page (shown once), which works from outside, and revokes it at once", async () => {
    await visit("Agents", "Agents", "agents")
    const agentItem = page.locator("li", { hasText: "@alice/shop-bot" })
    await agentItem.getByRole("button", { name: "API keys" }).click()
    // The key the operator issued before is listed, never its value.
    await expect.poll(() => agentItem.getByTestId("agent-key-bot").count(), { timeout: 30_000 }).toBe(1)
    await agentItem.getByLabel("Key name").fill("page-key")
    await agentItem.getByRole("button", { name: "Create key" }).click()
    const value = (await agentItem.getByTestId("secret-value").textContent({ timeout: 60_000 })) ?? ""
    expect(value).toMatch(/^hc_test_[A-Za-z0-9_-]{43}$/)
    // Beside it, the owner's wallet address an agent pins to check its owner's key against the chain.
    const aliceRecord = (await (await fetch(`${server.baseUrl}/v1/accounts/me`, { headers: { authorization: `Bearer ${alice.api_key}` } })).json()) as { public_key: string }
    expect(await agentItem.getByTestId("owner-address").textContent()).toContain(aliceRecord.public_key)
    await checkAccessibility("agent-key-created")
    await shoot("agent-key-created")
    // The key acts for the agent: it reads its own policy (D42).
    const asAgent = { authorization: `Bearer ${value}` }
    const me = await fetch(`${server.baseUrl}/v1/accounts/me`, { headers: asAgent })
    const agentId = ((await me.json()) as { account_id: string; handle: string }).account_id
    expect((await fetch(`${server.baseUrl}/v1/agents/${agentId}/spend-policy`, { headers: asAgent })).status).toBe(200)
    await agentItem.getByRole("button", { name: "Done" }).click()
    expect(await agentItem.getByTestId("secret-value").count()).toBe(0)

    page.once("dialog", (dialog) => void dialog.accept())
    await agentItem.getByRole("button", { name: "Revoke page-key" }).click()
    await expect.poll(() => agentItem.getByTestId("agent-key-page-key").textContent()).toContain("revoked")
    expect((await fetch(`${server.baseUrl}/v1/accounts/me`, { headers: asAgent })).status).toBe(401)
  })

  it("shows the API's policy refusals next to the field they name, in words saying what is expected", async () => {
    await visit("Agents", "Agents", "agents")
    provoke("agent policies the API refuses", /status of 400/, /\/v1\/accounts\/me\/agents$/)
    /** Submits, and waits for `expected` under the field `key` (the API's code in small type after it). */
    const refusedAt = async (key: "daily" | "perTransaction", param: string, expected: string) => {
      await page.getByRole("button", { name: "Create agent" }).click()
      const error = page.locator(`#new-agent-${key}-error`)
      const words = async () => (await error.count()) === 0 ? "" : ((await error.textContent()) ?? "").replace(/ code invalid_policy · req_\w+$/, "")
      await expect.poll(words, { timeout: 30_000 }).toBe(expected)
      expect(await error.getAttribute("data-testid")).toBe(`field-error-${param}`)
      expect(await error.locator(".support-code").textContent()).toMatch(/^ code invalid_policy · req_\w+$/)
      expect(await page.locator(`#new-agent-${key}`).getAttribute("aria-invalid")).toBe("true")
    }
    await page.locator("#new-agent-name").fill(" second-bot ")
    await page.locator("#new-agent-daily").fill("1,5")
    await refusedAt("daily", "daily_limit_usdg", "Use a dot for decimals and no thousands separators: write 1.5.")
    await page.locator("#new-agent-daily").fill("-1")
    await refusedAt("daily", "daily_limit_usdg", "Enter the daily limit without a minus sign, like 1: it cannot be negative.")
    await page.locator("#new-agent-daily").fill("10")
    await page.locator("#new-agent-perTransaction").fill("20")
    await refusedAt("perTransaction", "per_transaction_limit_usdg", "The per-transaction limit cannot be above the daily limit (10 USDG): lower it, or raise the daily limit.")
    await shoot("agents-field-error")
  })

  it("shows every time in one labelled zone, the same in list and detail, under two browser time zones, and one the holder chooses", async () => {
    const seen: Array<string> = []
    for (const [timezoneId, zoneName] of [["America/Los_Angeles", /P[SD]T$/], ["Asia/Tokyo", /GMT\+9$/]] as const) {
      const other = await contextIn(timezoneId)
      await other.page.goto(`${origin}/dashboard/transfers`)
      expect(await other.page.getByTestId("time-zone").textContent()).toBe(`Times in ${timezoneId}`)
      const row = other.page.getByTestId("transfer-row-time").first()
      await row.waitFor({ timeout: 60_000 })
      const listed = { text: (await row.textContent()) ?? "", iso: (await row.getAttribute("title")) ?? "" }
      expect(listed.text).toMatch(zoneName)
      expect(listed.iso).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      await row.click()
      const created = other.page.getByTestId("transfer-created")
      await created.waitFor({ timeout: 60_000 })
      expect({ text: await created.textContent(), iso: await created.getAttribute("title") }).toEqual(listed)
      seen.push(listed.text)

      if (timezoneId === "Asia/Tokyo") {
        // The holder's choice, kept in this browser: every time follows it, after a reload too.
        await other.page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Settings" }).click()
        await other.page.locator("#time-zone-choice").selectOption("UTC")
        expect(await other.page.getByTestId("time-zone").textContent()).toBe("Times in UTC")
        await other.page.reload()
        await other.page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Activity" }).click()
        const inUtc = other.page.getByTestId("transfer-row-time").first()
        await inUtc.waitFor({ timeout: 60_000 })
        expect(await inUtc.textContent()).toMatch(/UTC$/)
        expect(await inUtc.getAttribute("title")).toBe(listed.iso)
      }

      // An address the page does not have: a 404 page, not the overview.
      await other.page.goto(`${origin}/dashboard/nope`)
      await other.page.getByRole("heading", { level: 1, name: "Page not found" }).waitFor()
      await expect.poll(() => other.page.title()).toBe("Page not found · Private Payments")
      expect(await other.page.getByRole("link", { name: "Overview", exact: true }).getAttribute("aria-current")).toBe(null)
      if (timezoneId === "Asia/Tokyo") await shoot("not-found", other.page)
      await other.page.getByRole("link", { name: "Go to the overview" }).click()
      await other.page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
      await other.context.close()
    }
    // The same moment, written for each zone.
    expect(seen[0]).not.toBe(seen[1])
  })

  it("protects the key with the passkey's PRF instead of a passphrase, and unlocks it with the passkey after a reload", async () => {
    await visit("Settings", "Settings", "settings")
    page.once("dialog", (dialog) => void dialog.accept())
    await page.getByRole("button", { name: "Remove key from this browser" }).click()
    await expect.poll(() => page.getByTestId("key-status").textContent()).toBe("Not in this browser.")
    await page.getByLabel(/^Protect the key with my passkey/).check()
    await page.locator("#key-file").setInputFiles(harness.keyFilePath)
    await page.getByRole("button", { name: "Import key file" }).click()
    await expect.poll(async () => (await alerts()).join(" ") || await page.getByTestId("key-status").textContent(), { timeout: 60_000 }).toBe("Unlocked in this tab.")

    // A reload forgets the key in memory; the session cookie stays.
    await page.reload()
    await visit("Settings", "Settings", "settings-key-locked")
    await expect.poll(() => page.getByTestId("key-status").textContent()).toBe("Stored in this browser under a passkey, locked.")
    await page.getByRole("button", { name: "Unlock with passkey" }).click()
    await expect.poll(() => page.getByTestId("key-status").textContent(), { timeout: 60_000 }).toBe("Unlocked in this tab.")
    await visit("Overview", "Overview", "overview-later")
    // 100 granted, less 7.654321 sent from the page, 1 sent by API, 10 to the agent; plus 2.468024
    // from Bob, less the 1.357913 refunded to him.
    await expect.poll(() => page.getByTestId("balance-USDG").textContent(), { timeout: 60_000 }).toBe("82.45579")

    // On a phone's width the navigation folds above the page, and stays accessible.
    await page.setViewportSize(phone)
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Activity", exact: true }).click()
    // With the key unlocked the list shows amounts, opened in the page.
    await expect.poll(() => page.getByRole("cell", { name: `\u2212${sentAmount} USDG` }).count(), { timeout: 60_000 }).toBe(1)
    await checkAccessibility("transfers at a phone's width")
    // Nothing wider than the screen, and no cell cut off: each row is a card.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(phone.width)
    expect(await page.locator("table.data td").evaluateAll((cells) => cells.filter((cell) => cell.getBoundingClientRect().right > 390).length)).toBe(0)
  })

  it("replaces the encryption key from Settings after a passkey confirmation, and the balance reads with the new key (D55)", async () => {
    await visit("Settings", "Settings", "settings-before-replace")
    const before = await page.getByText(/^Registered key:/).textContent()
    page.once("dialog", (dialog) => void dialog.accept())
    await page.getByRole("button", { name: "Replace the key (keeps the balance)" }).click()
    await expect.poll(async () => (await alerts()).join(" ") || await page.getByRole("status").textContent().catch(() => ""), { timeout: 120_000 })
      .toMatch(/^A new key was made here and registered/)
    await expect.poll(() => page.getByTestId("key-status").textContent()).toBe("Unlocked in this tab.")
    // Another key is registered, and the new key file is offered once.
    await expect.poll(() => page.getByText(/^Registered key:/).textContent()).not.toBe(before)
    await page.getByTestId("key-file-next-step").waitFor()
    await checkAccessibility("settings after a key replacement")
    // The balance is kept, opened with the new key.
    await visit("Overview", "Overview", "overview-after-replace")
    await expect.poll(() => page.getByTestId("balance-USDG").textContent(), { timeout: 60_000 }).toBe("82.45579")
    // Left on another page than the Overview, which the next test navigates to.
    await visit("Activity", "Activity", "activity-after-replace")
  })

  it("when the session ends elsewhere, the next request's 401 drops the unlocked key and shows sign-in", async () => {
    await page.setViewportSize(desktop)
    await expect.poll(() => page.getByTestId("key-state").textContent()).toBe("Key unlocked")
    // "Sign out everywhere" from another tab of the same browser (its cookie, its CSRF token).
    const current = await page.request.get(`${origin}/dashboard/api/session`)
    const { csrf_token } = (await current.json()) as { csrf_token: string }
    const out = await page.request.post(`${origin}/dashboard/api/sign-out-everywhere`, { headers: { origin, "x-csrf-token": csrf_token }, data: {} })
    provoke("the page's requests after its session ended elsewhere", /status of 401/, /\/v1\//)
    expect(out.status()).toBe(200)
    // The page does not know yet; its next request is refused, and it lets go of everything.
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Overview", exact: true }).click()
    await page.getByRole("button", { name: "Sign in with a passkey" }).waitFor({ timeout: 30_000 })
    expect(await page.getByTestId("key-state").count()).toBe(0)
    // Signing in again finds the key locked: it was dropped, not kept in memory.
    await page.getByRole("button", { name: "Sign in with a passkey" }).click()
    await expect.poll(() => page.getByTestId("key-state").textContent(), { timeout: 30_000 }).toBe("Key locked")
  })

  it("sent no amount, memo, secret key or API key in any request, broke no CSP rule, has no serious accessibility violation, and logged no console error", () => {
    expect(harness.recorded.length).toBeGreaterThan(20)
    // The page did send transfers: the checks look at real sealed traffic.
    expect(harness.recorded.some((r) => r.method === "POST" && r.url.endsWith("/v1/transfers"))).toBe(true)
    // The sign-in page's probe and the favicon are no longer among the console's errors.
    harness.finalChecks([sentAmount, "7654321", sentMemo, heldAmount, "3141592", heldMemo, refundAmount, "1357913", refundMemo, passphrase])
  })
})
