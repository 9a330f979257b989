/**
 * Operating a deployed counter, as the CLI does it: a key's or a table's status, reconciling many keys,
 * and the fatal queue (list, explain, replay, delete once settled).
 *
 * Invariant: an operation here changes counts only through the stream path's and healing's own
 * functions (the redrive, reconcileKey), so it keeps their invariants; a fatal message is deleted only
 * once what it names is settled.
 */
export {
    itemState,
    keyStatus,
    readKeyStatus,
    readTableStatus,
    summarize,
    worstFirst,
    type KeyStatus,
    type ShardStatus,
    type TableStatus,
} from "./status";
export { keysToReconcile, reconcileAll, reconcileKeys, type ReconcileKeysOptions, type ReconcileKeysResult } from "./reconcile-all";
export {
    deleteFatal,
    explainFatalMessage,
    listFatal,
    redriveToFirstDlq,
    replayFatal,
    showFatal,
    type Explanation,
    type FatalEntry,
    type FatalKind,
    type Remedy,
} from "./fatal-ops";
