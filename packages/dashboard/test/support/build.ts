/**
 * Builds the page (`vite build` into dist/, which the server reads at start)
 * before the dashboard's tests: a fresh clone has no dist/, and a test must not
 * run against a build someone made by hand.
 */
import { build } from "vite"

export default async function setup(): Promise<void> {
  await build({ root: new URL("../..", import.meta.url).pathname, logLevel: "warn", configFile: new URL("../../vite.config.ts", import.meta.url).pathname })
}
