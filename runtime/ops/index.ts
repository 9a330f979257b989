/**
 * Operating a deployed counter, as the CLI does it: a key's or a table's status, reconciling keys whose records were
 * lost, the fatal queue (list, explain, replay, delete once settled), stored limits and usage.
 *
 * Invariant: an operation here changes counts only through the stream path's and reconcile's own writes (the redrive's
 * `redriveRange`, `reconcileKey`, each conditional on what it read), so it keeps their invariants; a fatal message is
 * deleted only once what it names is settled.
 */
export { reconcileKey, type ReconcileOptions, type ReconcileResult } from "./reconcile";
export {
    asRegion,
    keyStatus,
    keysToReconcile,
    summarize,
    tallyRegion,
    worstFirst,
    type KeyRows,
    type KeyStatus,
    type RegionStatus,
    type ShardStatus,
    type StatusCounts,
    type TableStatus,
} from "./status";
export { readKeyStatus, readTableStatus, type StatusOptions, type TableStatusOptions } from "./status-read";
export { reconcileAll, reconcileKeys, type ReconcileKeysOptions, type ReconcileKeysResult } from "./reconcile-all";
export { explainFatalMessage, type Explanation, type FatalKind, type Remedy, type StreamRange } from "./fatal-explain";
export {
    deleteFatal,
    listFatal,
    redriveToFirstDlq,
    reportingFatalQueue,
    showFatal,
    FatalMessageNotFoundError,
    NotSettledError,
    type FatalEntry,
    type RedriveResult,
    type UnparkedMessage,
} from "./fatal-ops";
export { replayFatal, type ReplayOptions, type ReplayOutcome, type ReplayResult } from "./fatal-replay";
export { lastDays, listLimits, readRecentUsage, type RecentUsage, type StoredLimits } from "./limits";
