/**
 * hybrid-counter/runtime: the API-side client and the Lambda handlers. Plain TypeScript, no Pulumi.
 *
 * One folder per capability, each with the invariant it keeps at the top of its index.ts:
 * client/ (the API's calls and best-effort), stream/ (the consumer, the redrive, the fatal queue),
 * heal/ (healing, reconciliation, the settler), backfill/ (adopting a table with data), ops/ (what the
 * CLI runs), shared/ (layout, selection, errors, tokens, strict mode's ledger), shards/ (a hot key's counting
 * spread over partitions), regions/ (counting per region on a global table), lambda/ (the handlers' entry points).
 */
export * from "./shared/config";
export * from "./shared/errors";
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
export * from "./stream";
export { isLive, isSelected, liveConditionExpression, selectionConditionExpression, type ItemSelection } from "./shared/selection";
export { METRIC_NAMES, type LineSink } from "./shared/telemetry";
export * from "./heal";
export * from "./backfill";
export { tokenTime } from "./shared/tokens";
export { DEFAULT_REGION_ATTRIBUTE, baseQuota, homeRegion, ownerOf, parseRegions, regionsProblems } from "./regions";
export { homeShard, markerShard, shardOfPartitionKey, shardPartitionKey, readKeyCounters, type KeyCounters } from "./shards";
