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
export { classifyRecord, type CounterEvent } from "./records";
export { fatalMessageBody, type FatalMessage, type FatalQueue } from "./fatal";
export { readRange, toLambdaRecord, type SequenceRange } from "./stream-reader";
export { METRIC_NAMES, type LineSink } from "./telemetry";
export { reconcileKey, type ReconcileOptions, type ReconcileResult } from "./reconcile";
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
export { isLive, isSelected, type ItemSelection } from "./selection";
export { tokenTime } from "./tokens";
