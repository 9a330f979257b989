/**
 * What every room of the runtime shares: the configuration and its keys, the selection, the errors the package raises
 * and how it reads DynamoDB's, the client's tokens and retry rules, telemetry. Nothing here imports another room but
 * regions/config (the region-qualified prefix every key carries).
 *
 * Invariant kept here: an item counts exactly when it is live and carries the counter's flag (selection.ts).
 */
export * from "./config";
export * from "./errors";
export { describeError, isRefusal, isRetryable } from "./aws-errors";
export { isCounted, isLive, isSelected, wantsFlag, type ItemImage, type ItemSelection } from "./selection";
export { METRIC_NAMES, type LineSink } from "./telemetry";
export { tokenTime } from "./tokens";
export { keyProblem, idProblem, KEY_MAX_BYTES, PARTITION_KEY_MAX_BYTES, SORT_KEY_MAX_BYTES } from "./keys";
