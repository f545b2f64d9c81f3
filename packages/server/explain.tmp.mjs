import { PreparedStatementPGlite } from "/work/main/packages/guardian/src/EmbeddedDatabase.ts"
const proto = PreparedStatementPGlite.prototype; const orig = proto.query
const seen = new Map()
const targets = (process.env.EXPLAIN_MATCH ?? "json_to_recordset").split("|")
proto.query = async function (text, params, opts) {
  const t = targets.find((m) => String(text).includes(m))
  if (t !== undefined) {
    const n = (seen.get(t) ?? 0) + 1; seen.set(t, n)
    if (n === 100 && process.env.DO_ANALYZE) { const t0 = performance.now(); await this.exec('ANALYZE'); process.stderr.write(`ANALYZE took ${(performance.now()-t0).toFixed(1)} ms\n`) }
    if (n === 150 || n === 250) {
      try {
        await this.transaction(async (tx) => {
          const r = await tx.query("EXPLAIN (ANALYZE, BUFFERS) " + text, params)
          process.stderr.write(`---- ${t} #${n}\n` + r.rows.map((row) => row["QUERY PLAN"]).join("\n") + "\n")
          await tx.rollback()
        })
      } catch (e) { process.stderr.write("explain failed " + e + "\n") }
    }
  }
  return orig.call(this, text, params, opts)
}
