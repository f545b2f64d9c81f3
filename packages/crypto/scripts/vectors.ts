/**
 * Writes test/vectors.json from fixed seeds: `pnpm --filter @pps/crypto vectors`.
 * The output is deterministic; test/vectors.test.ts checks the code still reproduces it.
 */
import { writeFileSync } from "node:fs"
import { buildVectors } from "./vectorData.ts"

const target = new URL("../test/vectors.json", import.meta.url)
writeFileSync(target, `${JSON.stringify(buildVectors(), null, 2)}\n`)
console.log(`wrote ${target.pathname}`)
