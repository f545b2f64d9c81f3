/**
 * Structured JSON logs, one line per entry on stdout, with redaction.
 *
 * No log line may carry an amount, a memo, a secret, an API key, a private key
 * or a proof. Code logs ids and statuses only; this logger is the second line of
 * defence: any annotation or object field whose name suggests such a value is
 * replaced by "[REDACTED]", and any string that looks like an API key, a
 * webhook secret, a bearer token or a 32-byte hex secret is masked wherever it
 * appears, messages and causes included.
 *
 * @since 0.1.0
 */
import { Layer, Logger, References } from "effect"
import type { AppConfigShape } from "../config/AppConfig.ts"

const sensitiveKey =
  /amount|memo|secret|password|passphrase|token|authorization|api_?key|private|pepper|kek|proof|seed|mnemonic|plaintext|balance/i

const sensitiveText: ReadonlyArray<RegExp> = [
  /hc_(test|live)_[A-Za-z0-9_-]+/g,
  /whsec_[A-Za-z0-9+/=_-]+/g,
  /adm_[A-Za-z0-9_-]+/g,
  /Bearer\s+[^\s"']+/gi,
  /0x[0-9a-fA-F]{64}\b/g
]

/**
 * Masks secrets inside free text.
 *
 * @since 0.1.0
 * @category redaction
 */
export const redactText = (text: string): string =>
  sensitiveText.reduce((acc, pattern) => acc.replace(pattern, "[REDACTED]"), text)

/**
 * Redacts a structured value: sensitive keys by name, secrets inside strings.
 *
 * @since 0.1.0
 * @category redaction
 */
export const redact = (value: unknown, depth = 0): unknown => {
  if (depth > 8) return "[TRUNCATED]"
  if (typeof value === "string") return redactText(value)
  if (typeof value === "bigint") return "[REDACTED]"
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1))
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const [key, inner] of Object.entries(value)) {
      out[key] = sensitiveKey.test(key) ? "[REDACTED]" : redact(inner, depth + 1)
    }
    return out
  }
  return value
}

/**
 * One log entry as the JSON line the logger writes (redacted).
 *
 * @since 0.1.0
 * @category loggers
 */
export const formatLogLine = (options: Logger.Options<unknown>): string => {
  const { fiberId: _fiberId, spans: _spans, ...rest } = Logger.formatStructured.log(options)
  return JSON.stringify(redact(rest))
}

/**
 * The logger: Effect's structured format, redacted, as one JSON line on stdout.
 *
 * @since 0.1.0
 * @category loggers
 */
export const redactingJsonLogger = Logger.make(formatLogLine).pipe(Logger.withConsoleLog)

/**
 * Installs the logger and the minimum level.
 *
 * @since 0.1.0
 * @category layers
 */
export const loggingLayer = (level: AppConfigShape["logLevel"]) =>
  Layer.mergeAll(
    Logger.layer([redactingJsonLogger]),
    Layer.succeed(References.MinimumLogLevel, level)
  )
