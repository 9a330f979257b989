/**
 * The best-effort counter item, written only by the API-side client and never inside a transaction
 * (so the hot path never meets a TransactionConflict).
 *
 * Each write is retried only in its mode's safe direction. A write whose repetition could break the
 * mode's bound (an increment in utilization mode, a release in strict mode: applied twice after a
 * "500 after commit" they would overcount or free a slot still in use) is sent exactly once, with the
 * SDK's retries turned off for it, and its failure is absorbed: it only loosens the bound.
 */
import {
    ConditionalCheckFailedException,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
    type UpdateItemCommandInput,
    type UpdateItemCommandOutput,
} from "@aws-sdk/client-dynamodb";
import type { FinalizeRequestMiddleware } from "@smithy/types";
import { bestEffortSortKey, type CounterTableConfig } from "./config";
import { isRetryable } from "./counting";
import { withRetries } from "./retry";

/** A best-effort write that failed and was absorbed (the count stays on its safe side). */
export interface BestEffortFailure {
    readonly key: string;
    readonly operation: "increment" | "decrement" | "reserve" | "release";
    readonly error: unknown;
}

export type Reservation = { outcome: "reserved"; value: number } | { outcome: "limit"; value: number } | { outcome: "failed" };

/** Wraps an error so that the SDK's retry strategy does not retry the attempt that raised it. */
class SingleAttemptError extends Error {
    constructor(readonly original: unknown) {
        super("single attempt failed");
        this.name = "SingleAttemptError";
    }
}

export class BestEffortCounter {
    constructor(
        private readonly config: CounterTableConfig,
        private readonly dynamodb: DynamoDBClient,
        private readonly attempts: number,
        private readonly onFailure: (failure: BestEffortFailure) => void,
    ) {}

    /** Strict mode: reserves one slot, below `limit` when given. Retries are safe: an extra slot is held back. */
    async reserve(key: string, limit: number | undefined): Promise<Reservation> {
        try {
            const value = await withRetries(() => this.write(key, 1, limit), isRetryable, this.attempts);
            return { outcome: "reserved", value };
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                return { outcome: "limit", value: Number(error.Item?.[this.config.countAttribute]?.N ?? limit ?? 0) };
            }
            this.onFailure({ key, operation: "reserve", error });
            return { outcome: "failed" };
        }
    }

    /** Utilization mode's decrement before a soft delete: safe to retry (a repeat only undercounts). */
    async decrement(key: string): Promise<void> {
        await withRetries(() => this.write(key, -1), isRetryable, this.attempts);
    }

    /** A write sent exactly once (no SDK retry); failures are absorbed and reported. */
    async once(key: string, delta: 1 | -1, operation: BestEffortFailure["operation"]): Promise<void> {
        try {
            await this.write(key, delta, undefined, true);
        } catch (error) {
            this.onFailure({ key, operation, error: error instanceof SingleAttemptError ? error.original : error });
        }
    }

    /** ADDs `delta` to the best-effort item, optionally only while it is below `limit`. Returns the new value. */
    private async write(key: string, delta: number, limit?: number, singleAttempt = false): Promise<number> {
        const { tableName, countAttribute } = this.config;
        const command = new UpdateItemCommand({
            TableName: tableName,
            Key: this.key(key),
            UpdateExpression: "ADD #count :delta",
            ConditionExpression: limit === undefined ? undefined : "attribute_not_exists(#count) OR #count < :limit",
            ExpressionAttributeNames: { "#count": countAttribute },
            ExpressionAttributeValues: {
                ":delta": { N: String(delta) },
                ...(limit === undefined ? {} : { ":limit": { N: String(limit) } }),
            },
            ReturnValues: "UPDATED_NEW",
            ReturnValuesOnConditionCheckFailure: limit === undefined ? undefined : "ALL_OLD",
        });
        if (singleAttempt) {
            // Runs inside the SDK's retry loop; the wrapped error carries no retryable trait, status or cause.
            const single: FinalizeRequestMiddleware<UpdateItemCommandInput, UpdateItemCommandOutput> = (next) => async (args) => {
                try {
                    return await next(args);
                } catch (error) {
                    throw new SingleAttemptError(error);
                }
            };
            command.middlewareStack.addRelativeTo(single, {
                relation: "after",
                toMiddleware: "retryMiddleware",
                name: "hybridCounterSingleAttempt",
            });
        }
        const response = await this.dynamodb.send(command);
        return Number(response.Attributes?.[countAttribute]?.N ?? "0");
    }

    private key(key: string): Record<string, AttributeValue> {
        return { [this.config.partitionKey]: { S: key }, [this.config.sortKey]: { S: bestEffortSortKey(this.config) } };
    }
}
