/**
 * Path ids: the schema of an id in a URL path (D3: prefix + ULID), and what a
 * malformed one answers.
 *
 * An id that cannot exist is answered as one that does not: 404 with the code of
 * its resource (`transfer_not_found`, ...), never 400 and never a database error
 * (PostgreSQL refuses a NUL in text, so `GET /v1/transfers/%00` used to be a
 * 500). The schema carries its not-found answer as an annotation on its check,
 * so the server's request-validation transform (packages/server/src/http/RequestValidation.ts) is one rule for
 * every endpoint rather than a check in each handler.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import type * as SchemaIssue from "effect/SchemaIssue"

/**
 * The id prefixes of D3 (and the request id of D2).
 *
 * @since 0.1.0
 * @category models
 */
export type IdPrefix = "acct" | "key" | "tr" | "atx" | "pol" | "wh" | "evt" | "dlv" | "req" | "grant" | "aud"

/**
 * The body of a not-found answer: D1's envelope, without the request id (the
 * envelope middleware adds it).
 *
 * @since 0.1.0
 * @category models
 */
export interface NotFoundBody {
  readonly error: { readonly code: string; readonly message: string; readonly param?: string }
}

/** The annotation key under which a path id's check keeps its not-found answer. */
const notFoundAnnotation = "@pps/api/PathIds/notFound"

/**
 * A path id with the given prefix; a value that is not one answers `notFound()`
 * (one of the catalogue's not-found errors, whose message must not echo the
 * value: it may hold control bytes or be kilobytes long).
 *
 * @since 0.1.0
 * @category schemas
 */
export const pathId = (prefix: IdPrefix, notFound: () => NotFoundBody) =>
  Schema.String.check(
    Schema.isPattern(new RegExp(`^${prefix}_[0-9A-HJKMNP-TV-Z]{26}$`), {
      expected: `an id ${prefix}_<ULID>`,
      [notFoundAnnotation]: notFound
    })
  )

/**
 * The not-found answer of the first path id check that failed in a decoding
 * issue, if the failure is one.
 *
 * @since 0.1.0
 * @category constructors
 */
export const notFoundOfIssue = (issue: SchemaIssue.Issue): NotFoundBody | undefined => {
  switch (issue._tag) {
    case "Filter": {
      const notFound = issue.filter.annotations?.[notFoundAnnotation]
      return typeof notFound === "function" ? (notFound as () => NotFoundBody)() : undefined
    }
    case "Pointer":
    case "Encoding":
      return notFoundOfIssue(issue.issue)
    case "Composite":
    case "AnyOf":
      for (const inner of issue.issues) {
        const found = notFoundOfIssue(inner)
        if (found !== undefined) return found
      }
      return undefined
    default:
      return undefined
  }
}
