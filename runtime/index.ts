/**
 * hybrid-counter/runtime: the API-side client and the Lambda handlers. Plain TypeScript, no Pulumi.
 *
 * One folder per capability, each with the invariant it keeps at the top of its index.ts: client/ (the API's calls
 * and best-effort), stream/ (the consumer, the redrive, the fatal queue), ledger/ (which best-effort units are young),
 * heal/ (healing and the settler), backfill/ (adopting a table with data), limits/ (stored limits, threshold events,
 * usage), ops/ (what the CLI runs), shared/ (configuration, keys, selection, errors, tokens), shards/ (a hot key's
 * best-effort over partitions), regions/ (counting per region on a global table), lambda/ (the handlers' entry points).
 */
export * from "./shared";
export {
    HybridCounterClient,
    CLIENT_METRIC_NAMES,
    type BestEffortFailure,
    type CounterMode,
    type CounterValue,
    type CreateResult,
    type DeleteResult,
    type HybridCounterClientOptions,
    type TryCreateResult,
    type RegionCounters,
    type ResolvedLimit,
    type UsageDay,
} from "./client";
export * from "./stream";
export * from "./heal";
export * from "./backfill";
export * from "./limits";
export * from "./ops";
export { homeShard, shardCount } from "./shards";
export { DEFAULT_REGION_ATTRIBUTE, homeRegion, ownerOf, parseRegions, regionsProblems, regionShare } from "./regions";
export { readKeyCounters, type KeyCounters } from "./client/read";
