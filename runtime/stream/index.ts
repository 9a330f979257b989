/**
 * The stream path: the consumer that counts the table's stream into the eventual counters, the redrive that applies
 * what Lambda gave up on, and the fatal queue for what neither can count.
 *
 * Invariant (marks.ts): for every key and stream shard, eventual has applied exactly the key's records up to its mark;
 * each is applied once, by one conditional write per key per batch (plan.ts), and no mark passes a record not applied:
 * records are applied only together with every record after the shard's frontier (progress.ts).
 */
export { createStreamHandler, type StreamEvent, type StreamHandlerDeps, type StreamResponse } from "./consumer";
export { createRedriveHandler, parseBatchInfo, type BatchInfo, type RedriveHandlerDeps } from "./redrive";
export { parseRecord, type ParsedRecord } from "./records";
export { effectsOf, type RecordEffects } from "./effects";
export { fatalMessageBody, sqsFatalQueue, type FatalMessage, type FatalQueue } from "./fatal";
export { readSpan, toLambdaRecord, type Span } from "./reader";
export { FRONTIER_ATTRIBUTE, readFrontier } from "./progress";
