/**
 * Request decoding failures → 400 `invalid_request` with `param` (D1).
 *
 * The message names the field and what is wrong with it, never the rejected
 * value: a field may be an amount or a memo, and error messages must not carry
 * them.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type * as SchemaIssue from "effect/SchemaIssue"
import { HttpServerResponse } from "effect/http"
import { HttpApiMiddleware } from "effect/http-api"
import { RequestValidation } from "@pps/api/Api"
import { InvalidRequest } from "@pps/api/Errors"
import { notFoundOfIssue } from "@pps/api/PathIds"

interface LeafAt {
  readonly path: ReadonlyArray<PropertyKey>
  readonly tag: SchemaIssue.Leaf["_tag"] | "Filter"
}

/** The first leaf of an issue tree and the path to it. */
const firstLeaf = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey> = []): LeafAt => {
  switch (issue._tag) {
    case "Pointer":
      return firstLeaf(issue.issue, [...path, ...issue.path])
    case "Filter":
      // A failed refinement (a range, a pattern): the value is present but invalid.
      return { path, tag: "Filter" }
    case "Encoding":
      return firstLeaf(issue.issue, path)
    case "Composite":
    case "AnyOf":
      return issue.issues[0] === undefined ? { path, tag: "InvalidValue" } : firstLeaf(issue.issues[0], path)
    default:
      return { path, tag: issue._tag }
  }
}

const sourceNames = { Params: "path parameter", Query: "query parameter", Headers: "header", Payload: "body field" } as const

/**
 * Describes a decoding issue without the rejected value.
 *
 * @since 0.1.0
 * @category constructors
 */
export const describeIssue = (
  kind: keyof typeof sourceNames,
  issue: SchemaIssue.Issue
): { readonly message: string; readonly param?: string } => {
  const leaf = firstLeaf(issue)
  const param = leaf.path.map(String).join(".")
  const where = `${sourceNames[kind]}${param === "" ? "" : ` '${param}'`}`
  const problem = leaf.tag === "MissingKey"
    ? "is required"
    : leaf.tag === "UnexpectedKey"
    ? "is not allowed"
    : leaf.tag === "InvalidType"
    ? "has the wrong type"
    : "is invalid"
  if (kind === "Payload" && param === "") {
    return { message: leaf.tag === "InvalidType" ? "The request body must be a JSON object." : "The request body is not valid JSON." }
  }
  return param === "" ? { message: `The ${where} ${problem}.` } : { message: `The ${where} ${problem}.`, param }
}

/**
 * @since 0.1.0
 * @category layers
 */
export const RequestValidationLive = HttpApiMiddleware.layerSchemaErrorTransform(RequestValidation, (error) => {
  // Body / ResponseHeaders are failures to encode our own response: a defect (500).
  if (error.kind === "Body" || error.kind === "ResponseHeaders") return Effect.die(error)
  // A path id that cannot exist is answered as one that does not (PathIds.ts).
  const notFound = error.kind === "Params" ? notFoundOfIssue(error.cause.issue) : undefined
  if (notFound !== undefined) return Effect.succeed(HttpServerResponse.jsonUnsafe(notFound, { status: 404 }))
  const { message, param } = describeIssue(error.kind, error.cause.issue)
  return Effect.fail(InvalidRequest.of(message, param === undefined ? undefined : { param }))
})
