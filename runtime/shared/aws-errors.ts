/**
 * How this package reads DynamoDB's errors: a request refused as written (never worth repeating), an
 * error worth repeating (throttling, contention, 5xx, a dropped connection), and a short description
 * for logs. The client, the consumer, healing and backfill all decide by these predicates, so a
 * `ValidationError` is never retried as contention anywhere.
 */
import type { CancellationReason, DynamoDBServiceException } from "@aws-sdk/client-dynamodb";

/** The cancellation reason (and error name prefix) of a request DynamoDB refuses as written. */
export const VALIDATION_ERROR = "ValidationError";

/** Whether DynamoDB refused the request as written (ValidationException, or a cancellation for ValidationError). */
export function isRefusal(error: unknown): boolean {
    if (!(error instanceof Error)) {
        return false;
    }
    if (error.name === "ValidationException") {
        return true;
    }
    const reasons = (error as { CancellationReasons?: readonly CancellationReason[] }).CancellationReasons;
    return Array.isArray(reasons) && reasons.some((r) => r?.Code === VALIDATION_ERROR);
}

/**
 * A refusal because the write would take the item past DynamoDB's 400 KB: "Item size to update has exceeded the
 * maximum allowed size" (UpdateItem), "Item size has exceeded the maximum allowed size" (PutItem). The client meets it
 * on an item another writer grew after the client created it (runtime/client/client.ts, `delete`).
 */
export function isItemTooLarge(error: unknown): boolean {
    return (
        error instanceof Error &&
        error.name === "ValidationException" &&
        /item size (to update )?has exceeded the maximum allowed size/i.test(error.message)
    );
}

/**
 * A refusal for meeting a transaction (a 400, TransactionConflictException): the request wrote nothing, so it may be
 * sent again whatever the write, or dropped when it was only bookkeeping.
 */
export function isTransactionConflict(error: unknown): boolean {
    return (error as Error | undefined)?.name === "TransactionConflictException";
}

/** DynamoDB's throttling errors: a request over its table's or partition's throughput, refused before it is served. */
const THROTTLING_ERRORS = ["ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"];

/**
 * A write refused on a table with multi-region strong consistency because a concurrent write to the same item won
 * (a 400 that wrote nothing). The counters table is never such a table (the component refuses it); a user's table
 * that is one is refused too, but a write the refusal reaches is handled as any other refusal that wrote nothing.
 */
export const REPLICATED_WRITE_CONFLICT = "ReplicatedWriteConflictException";

/**
 * A refusal that certainly wrote nothing: meeting a transaction, throttling, or a replicated write conflict. A write
 * committed at most once may be sent again after one.
 */
export function isUnwritten(error: unknown): boolean {
    const name = (error as Error | undefined)?.name ?? "";
    return isTransactionConflict(error) || THROTTLING_ERRORS.includes(name) || name === REPLICATED_WRITE_CONFLICT;
}

/** Errors worth retrying within the invocation: throttling, conflicts and 5xx after the SDK's own retries. */
export function isRetryable(error: unknown): boolean {
    if (!(error instanceof Error) || isRefusal(error)) {
        return false;
    }
    const e = error as DynamoDBServiceException;
    if (e.$retryable) {
        return true;
    }
    const status = e.$metadata?.httpStatusCode ?? 0;
    if (status >= 500 || status === 429) {
        return true;
    }
    return (
        [
            "TransactionConflictException",
            "TransactionCanceledException",
            "TransactionInProgressException",
            ...THROTTLING_ERRORS,
            REPLICATED_WRITE_CONFLICT,
            "InternalServerError",
            "ServiceUnavailable",
            "TimeoutError",
        ].includes(e.name) || ["ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT"].includes((e as { code?: string }).code ?? "")
    );
}

export function describeError(error: unknown): Record<string, unknown> {
    if (error instanceof Error) {
        const e = error as DynamoDBServiceException;
        return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode };
    }
    return { value: String(error) };
}
