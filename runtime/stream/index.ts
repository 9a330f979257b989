/**
 * The stream path: the consumer that counts the table's stream records into the eventual counter, the
 * redrive that re-reads dead-lettered batches, and the fatal queue for what neither can count.
 *
 * Invariant (markers.ts): each record is counted exactly once, because the eventual counter's change and
 * the item's marker commit in one transaction; eventual == the markers in state "counted". A put attempt
 * that lands after its life was removed is removed, not counted (markers.ts). A record that
 * can never be counted (an unmarkable id, an item too large to share a transaction) is parked alone in
 * the fatal queue, never its batch.
 */
export { createStreamHandler, type StreamHandlerDeps } from "./consumer";
export { createRedriveHandler, parseBatchInfo, type RedriveHandlerDeps } from "./redrive";
export { countRecords, planBatch, type CountOutcome } from "./counting";
export { classifyRecord, type MembershipChange } from "./records";
export { fatalMessageBody, type FatalMessage, type FatalQueue } from "./fatal";
export { readRange, toLambdaRecord, type SequenceRange } from "./stream-reader";
export { chunkIntents, refineIntent, transactionActions, type ItemIntent } from "./markers";
