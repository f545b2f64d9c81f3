/**
 * The one way code here turns a failure into a defect: by naming the invariant that the failure
 * would break.
 *
 * Why: an operating error (a database that does not answer, a guardian restarting, a chain node
 * timing out) is handled: typed, mapped to a SPEC code or to 503 `service_unavailable`. Only a
 * programmer error, a state the code's own rules make impossible, may end the request with a
 * defect (TigerBeetle's rule: assertions are for programmer errors). Every such place says which
 * rule it asserts, so the log of a 500 names the broken rule, and the places can be listed
 * (docs/architecture.md, "Operating errors and invariants"): `grep -rn "Invariant\." packages/server/src packages/guardian/src`.
 *
 * @since 0.5.0
 */
import { Data, Effect, Option } from "effect"

/**
 * A broken invariant: the code's own rules were violated. Always a defect, never a typed error.
 *
 * @since 0.5.0
 * @category errors
 */
export class InvariantViolation extends Data.TaggedError("InvariantViolation")<{
  /** The rule, as a sentence that holds when the code is right. */
  readonly invariant: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `invariant broken: ${this.invariant}`
  }
}

/**
 * Dies with {@link InvariantViolation} when `self` fails: its failure can only mean `invariant`
 * does not hold.
 *
 * @since 0.5.0
 * @category combinators
 */
export const orDie = (invariant: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, never, R> =>
  Effect.catch(self, (cause) => Effect.die(new InvariantViolation({ invariant, cause })))

/**
 * The value of an `Option` that `invariant` says is present; dies with {@link InvariantViolation}
 * when it is not.
 *
 * @since 0.5.0
 * @category combinators
 */
export const some = (invariant: string) => <A>(option: Option.Option<A>): Effect.Effect<A> =>
  Option.isSome(option) ? Effect.succeed(option.value) : Effect.die(new InvariantViolation({ invariant }))

/**
 * Dies with {@link InvariantViolation} unless `condition` holds.
 *
 * @since 0.5.0
 * @category combinators
 */
export const check = (condition: boolean, invariant: string): Effect.Effect<void> =>
  condition ? Effect.void : Effect.die(new InvariantViolation({ invariant }))
