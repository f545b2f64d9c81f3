/**
 * What `pps x402 fetch` hands the confidential x402 scheme's package (`@pps/x402`, D57), and how
 * the command finds it: by name, when the command runs. The SDK does not depend on it, so an
 * application that imports `@pps/sdk` installs and loads none of x402; `@pps/x402` implements
 * `Entry` (its `cliEntry`).
 *
 * @since 0.11.0
 */
import type { Pps } from "../Pps.ts"
import { loadNamed } from "./namedPackage.ts"

/**
 * One paid GET: the payer's client, the URL, the most it may cost (a decimal in USDG) and the
 * network of the key's mode.
 *
 * @since 0.11.0
 * @category models
 */
export interface FetchRequest {
  readonly pps: Pps
  readonly url: string
  readonly max: string
  readonly mode: "test" | "live"
}

/**
 * The answer: its status and body, and the transfer that paid for it (none when it was free).
 *
 * @since 0.11.0
 * @category models
 */
export interface FetchAnswer {
  readonly status: number
  readonly contentType: string
  readonly body: string
  readonly transferId: string | undefined
}

/**
 * What `@pps/x402` exports for the command.
 *
 * @since 0.11.0
 * @category models
 */
export interface Entry {
  readonly cliFetch: (request: FetchRequest) => Promise<FetchAnswer>
}

/**
 * The package's name, as `pps` imports it.
 *
 * @since 0.11.0
 * @category constants
 */
export const packageName: string = "@pps/x402"

/**
 * The package is not installed beside the SDK (or is a version without the entry).
 *
 * @since 0.11.0
 * @category errors
 */
export class X402Missing extends Error {
  override readonly name = "X402Missing"
}

const isEntry = (value: unknown): value is Entry =>
  typeof value === "object" && value !== null && "cliFetch" in value && typeof value.cliFetch === "function"

/**
 * Loads `@pps/x402` by name.
 *
 * @since 0.11.0
 * @category constructors
 */
export const load = (): Promise<Entry> =>
  loadNamed(packageName, isEntry, (reason) =>
    new X402Missing(
      reason === "notInstalled"
        ? `x402 payments are the package ${packageName}, not installed next to @pps/sdk: npm install ${packageName}`
        : `${packageName} does not export cliFetch(request): install the version that goes with this @pps/sdk`
    ))
