/**
 * What every room of the runtime shares: the table layout and its keys, the selection, the errors the
 * package raises and how it reads DynamoDB's, the client's tokens and retry rules, telemetry, and strict
 * mode's ledger. Nothing here imports another room.
 *
 * Invariants kept here: an item is live exactly when it is selected and not soft-deleted (selection.ts);
 * every counter item a resource item implies has keys DynamoDB accepts (key-limits.ts); in strict mode a
 * unit of best-effort is given back at most once per item life (strict-ledger.ts).
 */
export * from "./config";
export * from "./errors";
export { describeError, isRefusal, isRetryable } from "./aws-errors";
export { isLive, isSelected, liveConditionExpression, selectionConditionExpression, type ItemSelection } from "./selection";
export { METRIC_NAMES, type LineSink } from "./telemetry";
export { tokenTime } from "./tokens";
