/**
 * The one way code here turns a failure into a defect, naming the invariant it asserts: the
 * shared module `@pps/platform/Invariant` (the server and the guardian use the same one).
 *
 * @since 0.5.0
 */
export * from "@pps/platform/Invariant"
