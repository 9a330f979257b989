/**
 * Quotas: limits stored per key and per counter, threshold events when a key's count crosses a fraction of its limit,
 * and the usage history per key per day.
 *
 * Invariant: thresholds and usage are the eventual counter's, record by record (thresholds.ts, usage.ts): written by
 * the same conditional write that applies the records, so they are exact under retries and redelivery.
 */
export {
    LIMIT_ATTRIBUTE,
    readLimits,
    resolveLimit,
    writeDefaultLimit,
    writeKeyLimit,
    type LimitSource,
    type ResolvedLimit,
} from "./limits";
export { band, crossings, level, type ThresholdEvent } from "./thresholds";
export { dayOf, readUsage, type UsageDay } from "./usage";
export { snsEventSink } from "./publish";
