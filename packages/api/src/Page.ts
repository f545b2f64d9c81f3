/**
 * Pagination (D16, reused by D34): one envelope and one set of limits for every
 * list that pages.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * D16's default page size.
 *
 * @since 0.1.0
 * @category constants
 */
export const pageLimitDefault = 20

/**
 * D16's largest page size.
 *
 * @since 0.1.0
 * @category constants
 */
export const pageLimitMax = 100

/**
 * The largest page offset: beyond it a JS number no longer counts rows exactly,
 * and PostgreSQL's OFFSET (a bigint) would refuse what the driver sends.
 *
 * @since 0.1.0
 * @category constants
 */
export const pageOffsetMax = Number.MAX_SAFE_INTEGER

/**
 * The `limit` query parameter of a list (D16): an integer from 1 to `pageLimitMax`,
 * sent as text, decoded to a number (so typed clients pass a number).
 *
 * @since 0.4.0
 * @category schemas
 */
export const PageLimitQuery = Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: pageLimitMax }))
  .annotate({ description: `Entries per page, 1-${pageLimitMax} (default ${pageLimitDefault}).` })

/**
 * The `offset` query parameter of a list (D16): entries to skip, an integer from 0.
 *
 * @since 0.4.0
 * @category schemas
 */
export const PageOffsetQuery = Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 0, maximum: pageOffsetMax }))
  .annotate({ description: "Entries to skip (default 0)." })

/**
 * `{"data":[...],"limit","offset","has_more"}` of the given entries.
 *
 * @since 0.1.0
 * @category models
 */
export const Page = <S extends Schema.Top>(entry: S) =>
  Schema.Struct({
    data: Schema.Array(entry).annotate({ description: "This page's entries." }),
    limit: Schema.Int.annotate({ description: "The page size asked for (or the default)." }),
    offset: Schema.Int.annotate({ description: "Entries skipped before this page." }),
    has_more: Schema.Boolean.annotate({ description: "Whether entries follow this page (ask again with offset + limit)." })
  })

/**
 * D16's envelope from rows read one past the page (`limit + 1`, so a further row says that
 * another page follows).
 *
 * @since 0.11.0
 * @category constructors
 */
export const pageOf = <A>(
  rows: ReadonlyArray<A>,
  page: { readonly limit: number; readonly offset: number }
): { readonly data: ReadonlyArray<A>; readonly limit: number; readonly offset: number; readonly has_more: boolean } => ({
  data: rows.slice(0, page.limit),
  limit: page.limit,
  offset: page.offset,
  has_more: rows.length > page.limit
})
