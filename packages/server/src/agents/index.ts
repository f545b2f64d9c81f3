/**
 * Agent accounts, spend policies and human approval of held agent transactions
 * (SPEC "Agents and spend policies", D21-D29).
 *
 * @since 0.1.0
 */

/** @since 0.9.0 */
export * as AgentKeys from "./AgentKeys.ts"

/** @since 0.1.0 */
export * as AgentStore from "./AgentStore.ts"

/** @since 0.1.0 */
export * as AgentTransactionStore from "./AgentTransactionStore.ts"

/** @since 0.1.0 */
export * as Agents from "./Agents.ts"

/** @since 0.1.0 */
export * as Approvals from "./Approvals.ts"

/** @since 0.1.0 */
export * as Domain from "@pps/api/Agents"

/** @since 0.1.0 */
export * as Http from "./http.ts"
