/**
 * hybrid-counter/runtime: the API-side client and the Lambda handlers. Plain TypeScript, no Pulumi.
 */
export * from "./config";
export * from "./errors";
export {
    HybridCounterClient,
    type BestEffortFailure,
    type CounterMode,
    type CounterValue,
    type CreateResult,
    type DeleteResult,
    type HybridCounterClientOptions,
    type TryCreateResult,
} from "./client";
export { createStreamHandler, type StreamHandlerDeps } from "./consumer";
export { createRedriveHandler, parseBatchInfo, type RedriveHandlerDeps } from "./redrive";
export { countRecords, planBatch, type CountOutcome } from "./counting";
export { classifyRecord, type MembershipChange } from "./records";
export { isLive, isSelected, liveConditionExpression, selectionConditionExpression } from "./selection";
export { fatalMessageBody, type FatalMessage, type FatalQueue } from "./fatal";
export { readRange, toLambdaRecord, type SequenceRange } from "./stream-reader";
export { METRIC_NAMES, type LineSink } from "./telemetry";
export {
    planReconcile,
    reconcileKey,
    type ReconcileAction,
    type ReconcileOptions,
    type ReconcilePlan,
    type ReconcileResult,
} from "./reconcile";
export { chunkIntents, refineIntent, transactionActions, type ItemIntent } from "./markers";
export {
    BACKFILL_DEFAULTS,
    BackfillError,
    backfill,
    backfillConfig,
    backfillOptionsProblems,
    type BackfillCounts,
    type BackfillOptions,
    type BackfillProgress,
    type BackfillReport,
} from "./backfill";
export { createBackfillHandler, type BackfillEvent, type BackfillHandlerDeps, type BackfillHandlerResult } from "./backfill-handler";
export {
    healKey,
    planHeal,
    readForHeal,
    writeHeal,
    type HealMode,
    type HealOptions,
    type HealPlan,
    type HealResult,
    type HealSkipReason,
} from "./heal";
export { settle, SETTLER_DEFAULTS, type SettleOptions, type SettleReport } from "./settle";
export { SETTLER_ENV, settlerConfigFromEnv, settlerEnvironment, type SettlerConfig } from "./settler-config";
export { type ItemSelection } from "./selection";
export { tokenTime } from "./tokens";
