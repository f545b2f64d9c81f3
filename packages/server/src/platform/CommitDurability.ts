/**
 * Which commits wait for the disk: the combinators of the guardian package's `CommitDurability`
 * (both processes' stores use them), under the name the server's modules import.
 *
 * @since 0.8.0
 */
import { CommitDurability } from "@pps/guardian"

/**
 * @since 0.9.0
 * @category combinators
 */
export const statementWithoutWaitingForDisk = CommitDurability.statementWithoutWaitingForDisk

/**
 * @since 0.9.0
 * @category combinators
 */
export const unsafeStatementWithoutWaitingForDisk = CommitDurability.unsafeStatementWithoutWaitingForDisk
