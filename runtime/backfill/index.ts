/**
 * Adoption: the backfill that brings the items a table held before the counter into the count, while the API, other
 * writers and the consumer run, and its Lambda handler that resumes from checkpoints.
 *
 * Invariant (backfill.ts says why it holds): the backfill counts nothing itself; it flags the live items that do not
 * count yet, and the stream counts each flag once.
 */
export {
    BACKFILL_DEFAULTS,
    BackfillError,
    backfill,
    backfillOptionsProblems,
    type BackfillCounts,
    type BackfillOptions,
    type BackfillProgress,
    type BackfillReport,
} from "./backfill";
export { createBackfillHandler, type BackfillEvent, type BackfillHandlerDeps, type BackfillHandlerResult } from "./handler";
export { BACKFILL_ENV, backfillEnvironment, backfillFromEnv, type BackfillSettings } from "./env";
