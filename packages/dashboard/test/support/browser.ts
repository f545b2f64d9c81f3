/**
 * Chromium from Debian's package, driven by playwright-core (nothing is
 * downloaded): the binary is found on PATH (`.ci/run` installs it when
 * missing), launched headless with a fresh profile.
 */
import { execFileSync } from "node:child_process"
import { type Browser, chromium } from "playwright-core"

export const chromiumPath = (): string => {
  const found = execFileSync("sh", ["-c", "command -v chromium || command -v chromium-browser || true"]).toString().trim()
  if (found === "") throw new Error("chromium is not installed: apt-get install -y chromium (.ci/run does this)")
  return found
}

export const launchChromium = async (): Promise<{ readonly browser: Browser; readonly close: () => Promise<void> }> => {
  const browser = await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      // Playwright gives every launch a fresh temporary profile (it refuses --user-data-dir here).
      "--disable-sync"
    ]
  })
  return {
    browser,
    close: () => browser.close()
  }
}
