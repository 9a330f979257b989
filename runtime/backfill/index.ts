/**
 * Adoption: the backfill that counts the items a table held before the counter was attached, while the
 * API, other writers and the consumer run, and its Lambda handler that resumes from checkpoints.
 *
 * Invariant (backfill.ts states why it holds): every write is conditional on the marker it read, so an
 * item the consumer or a reconciliation already counted is never counted twice, and in strict mode an
 * item without the client's token gets one unit of best-effort, flagged with the heal epoch it read.
 */
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
export { createBackfillHandler, type BackfillEvent, type BackfillHandlerDeps, type BackfillHandlerResult } from "./handler";
