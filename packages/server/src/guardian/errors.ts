/**
 * The errors of the server's guardian connection.
 *
 * @since 0.1.0
 */
import { Data } from "effect"

/**
 * The guardian cannot be reached, started or configured.
 *
 * @since 0.1.0
 * @category errors
 */
export class GuardianUnavailable extends Data.TaggedError("GuardianUnavailable")<{ readonly message: string }> {}
