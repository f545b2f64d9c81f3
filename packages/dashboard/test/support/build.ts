/**
 * Builds the page (`vite build` into dist/, which the server reads at start)
 * before the dashboard's tests: a fresh clone has no dist/, and a test must not
 * run against a build someone made by hand.
 *
 * Built as `npm start` builds it, for production: vitest sets NODE_ENV=test, which
 * Vite would otherwise keep, bundling React's development build (twice the script
 * the sign-in page's weight test measures).
 */
import { build } from "vite"

export default async function setup(): Promise<void> {
  const nodeEnv = process.env["NODE_ENV"]
  process.env["NODE_ENV"] = "production"
  try {
    await build({ root: new URL("../..", import.meta.url).pathname, logLevel: "warn", configFile: new URL("../../vite.config.ts", import.meta.url).pathname })
  } finally {
    if (nodeEnv === undefined) delete process.env["NODE_ENV"]
    else process.env["NODE_ENV"] = nodeEnv
  }
}
