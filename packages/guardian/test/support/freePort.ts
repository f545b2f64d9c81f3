/**
 * A loopback port for a guardian process a test starts: the repository's one helper
 * (scripts/freePort.ts says why it does not use port 0).
 */
export { freePort } from "../../../../scripts/freePort.ts"
