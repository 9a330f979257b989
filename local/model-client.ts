/**
 * A client that makes exactly the writes of the counting model's API calls, in the model's order, one
 * step at a time: every best-effort write bumps `hc_version`, sets `hc_written_at` and `hc_heal`; tokens are
 * UUIDv7; a call abandons a write it could not send within its deadline. Tests and the benchmark use it to
 * hold a call between two of its writes (`pause`) and to race healing against traffic.
 *
 *   strict create:       reserve -> put -> (release if "exists")
 *   strict delete:       touch -> soft delete -> release
 *   utilization delete:  decrement -> soft delete
 *   utilization create:  put -> increment
 */
import {
    ConditionalCheckFailedException,
    GetItemCommand,
    PutItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
    type UpdateItemCommandInput,
    type UpdateItemCommandOutput,
} from "@aws-sdk/client-dynamodb";
import type { FinalizeRequestMiddleware } from "@smithy/types";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey, countersTable, healShard, type CounterTableConfig } from "../runtime/config";
import { isRetryable } from "../runtime/counting";
import { withRetries } from "../runtime/retry";
import { uuidv7 } from "../runtime/tokens";

export type ModelMode = "strict" | "utilization";

/** Where a call can be held: after the named write. */
export type Step = "reserve" | "put" | "touch" | "soft-delete" | "decrement";

export interface ModelClientOptions {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
    readonly mode: ModelMode;
    /** No write is sent later than this after the call began. @default 10000 */
    readonly deadlineMs?: number;
    readonly now?: () => number;
    /** Called after each write; the call waits for the promise (a test holds the call here). */
    readonly pause?: (step: Step, key: string, id: string) => Promise<void> | void;
    /** @default 4 */
    readonly attempts?: number;
}

export interface CallResult {
    readonly created?: boolean;
    readonly deleted?: boolean;
    readonly reason?: "limit" | "exists" | "missing" | "unavailable";
    /** Writes the call gave up because its deadline had passed, or that failed and were absorbed. */
    readonly abandoned: number;
}

class SingleAttemptError extends Error {
    constructor(readonly original: unknown) {
        super("single attempt failed");
        this.name = "SingleAttemptError";
    }
}

export class ModelClient {
    readonly mode: ModelMode;
    private readonly deadlineMs: number;
    private readonly now: () => number;
    private readonly attempts: number;

    constructor(private readonly options: ModelClientOptions) {
        this.mode = options.mode;
        this.deadlineMs = options.deadlineMs ?? 10_000;
        this.now = options.now ?? Date.now;
        this.attempts = options.attempts ?? 4;
    }

    /** Creates `id` under `key`, below `limit` when given. */
    async create(key: string, id: string, limit?: number): Promise<CallResult> {
        const start = this.now();
        const token = uuidv7(start);
        if (this.mode === "strict") {
            const reserved = await this.reserve(key, limit);
            if (reserved !== "reserved") {
                return { created: false, reason: reserved, abandoned: 0 };
            }
            await this.hold("reserve", key, id);
            if (this.late(start)) {
                return { created: false, reason: "unavailable", abandoned: 1 }; // the slot is held back
            }
            let put: "mine" | "taken";
            try {
                put = await this.put(key, id, token);
            } catch {
                return { created: false, reason: "unavailable", abandoned: 0 }; // may have committed: keep the slot
            }
            if (put === "taken") {
                await this.hold("put", key, id);
                const released = !this.late(start) && (await this.bestEffort(key, -1, true));
                return { created: false, reason: "exists", abandoned: released ? 0 : 1 };
            }
            return { created: true, abandoned: 0 };
        }
        let put: "mine" | "taken";
        try {
            put = await this.put(key, id, token);
        } catch {
            return { created: false, reason: "unavailable", abandoned: 0 };
        }
        if (put === "taken") {
            return { created: false, reason: "exists", abandoned: 0 };
        }
        await this.hold("put", key, id);
        const incremented = !this.late(start) && (await this.bestEffort(key, 1, true));
        return { created: true, abandoned: incremented ? 0 : 1 };
    }

    /** Soft-deletes `id` under `key`. */
    async delete(key: string, id: string): Promise<CallResult> {
        const { config, dynamodb } = this.options;
        const read = await withRetries(
            () => dynamodb.send(new GetItemCommand({ TableName: config.tableName, Key: this.itemKey(key, id), ConsistentRead: true })),
            isRetryable,
            this.attempts,
        );
        const item = read.Item;
        if (item === undefined || item[config.deletedAttribute]?.BOOL === true) {
            return { deleted: false, reason: "missing", abandoned: 0 };
        }
        const life = item[config.tokenAttribute]?.S;
        const start = this.now();
        const first = this.mode === "strict" ? "touch" : "decrement";
        // The first write of a delete is safe to repeat in both modes (a touch changes no count; an extra
        // decrement only undercounts).
        try {
            await withRetries(() => this.sendBestEffort(key, this.mode === "strict" ? 0 : -1, false), isRetryable, this.attempts);
        } catch {
            return { deleted: false, reason: "unavailable", abandoned: 0 };
        }
        await this.hold(first, key, id);
        if (this.late(start)) {
            return { deleted: false, reason: "unavailable", abandoned: 1 };
        }
        let outcome: "mine" | "taken" | "gone";
        try {
            outcome = await this.softDelete(key, id, life);
        } catch {
            return { deleted: false, reason: "unavailable", abandoned: 0 };
        }
        if (this.mode === "strict" && outcome === "mine") {
            await this.hold("soft-delete", key, id);
            const released = !this.late(start) && (await this.bestEffort(key, -1, true));
            return { deleted: true, abandoned: released ? 0 : 1 };
        }
        return { deleted: outcome === "mine", abandoned: 0 };
    }

    private late(start: number): boolean {
        return this.now() - start > this.deadlineMs;
    }

    private async hold(step: Step, key: string, id: string): Promise<void> {
        await this.options.pause?.(step, key, id);
    }

    private async reserve(key: string, limit: number | undefined): Promise<"reserved" | "limit" | "unavailable"> {
        try {
            // Retrying a reserve is safe in strict mode: a repeat only holds a slot back.
            await withRetries(() => this.sendBestEffort(key, 1, false, limit), isRetryable, this.attempts);
            return "reserved";
        } catch (error) {
            return error instanceof ConditionalCheckFailedException ? "limit" : "unavailable";
        }
    }

    /** A single-attempt best-effort write; false when it failed (absorbed). */
    private async bestEffort(key: string, delta: number, single: boolean): Promise<boolean> {
        try {
            await this.sendBestEffort(key, delta, single);
            return true;
        } catch {
            return false;
        }
    }

    private async sendBestEffort(key: string, delta: number, single: boolean, limit?: number): Promise<void> {
        const { config, dynamodb } = this.options;
        const command = new UpdateItemCommand({
            TableName: countersTable(config),
            Key: { [config.partitionKey]: { S: key }, [config.sortKey]: { S: bestEffortSortKey(config) } },
            UpdateExpression: "ADD #count :delta, #version :one SET #writtenAt = :now, #heal = :shard",
            ConditionExpression: limit === undefined ? undefined : "attribute_not_exists(#count) OR #count < :limit",
            ExpressionAttributeNames: {
                "#count": config.countAttribute,
                "#version": A.version,
                "#writtenAt": A.writtenAt,
                "#heal": A.healShard,
            },
            ExpressionAttributeValues: {
                ":delta": { N: String(delta) },
                ":one": { N: "1" },
                ":now": { N: String(this.now()) },
                ":shard": { S: healShard(key) },
                ...(limit === undefined ? {} : { ":limit": { N: String(limit) } }),
            },
        });
        if (single) {
            const middleware: FinalizeRequestMiddleware<UpdateItemCommandInput, UpdateItemCommandOutput> = (next) => async (args) => {
                try {
                    return await next(args);
                } catch (error) {
                    throw new SingleAttemptError(error);
                }
            };
            command.middlewareStack.addRelativeTo(middleware, {
                relation: "after",
                toMiddleware: "retryMiddleware",
                name: "modelSingleAttempt",
            });
        }
        await dynamodb.send(command);
    }

    private async put(key: string, id: string, token: string): Promise<"mine" | "taken"> {
        const { config, dynamodb } = this.options;
        return withRetries(
            async () => {
                try {
                    await dynamodb.send(
                        new PutItemCommand({
                            TableName: config.tableName,
                            Item: { ...this.itemKey(key, id), [config.tokenAttribute]: { S: token } },
                            ConditionExpression: "attribute_not_exists(#pk)",
                            ExpressionAttributeNames: { "#pk": config.partitionKey },
                            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                        }),
                    );
                    return "mine";
                } catch (error) {
                    if (error instanceof ConditionalCheckFailedException) {
                        return error.Item?.[config.tokenAttribute]?.S === token ? "mine" : "taken";
                    }
                    throw error;
                }
            },
            isRetryable,
            this.attempts,
        );
    }

    private async softDelete(key: string, id: string, life: string | undefined): Promise<"mine" | "taken" | "gone"> {
        const { config, dynamodb } = this.options;
        const token = uuidv7(this.now());
        const deleteToken = `${config.tokenAttribute}_delete`;
        return withRetries(
            async () => {
                try {
                    await dynamodb.send(
                        new UpdateItemCommand({
                            TableName: config.tableName,
                            Key: this.itemKey(key, id),
                            UpdateExpression: "SET #deleted = :true, #deleteToken = :token",
                            ConditionExpression:
                                "attribute_exists(#pk) AND (attribute_not_exists(#deleted) OR #deleted = :false) AND " +
                                (life === undefined ? "attribute_not_exists(#life)" : "#life = :life"),
                            ExpressionAttributeNames: {
                                "#pk": config.partitionKey,
                                "#deleted": config.deletedAttribute,
                                "#deleteToken": deleteToken,
                                "#life": config.tokenAttribute,
                            },
                            ExpressionAttributeValues: {
                                ":true": { BOOL: true },
                                ":false": { BOOL: false },
                                ":token": { S: token },
                                ...(life === undefined ? {} : { ":life": { S: life } }),
                            },
                            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                        }),
                    );
                    return "mine";
                } catch (error) {
                    if (error instanceof ConditionalCheckFailedException) {
                        const item = error.Item;
                        if (item?.[deleteToken]?.S === token) {
                            return "mine";
                        }
                        return item === undefined || item[config.tokenAttribute]?.S !== life ? "gone" : "taken";
                    }
                    throw error;
                }
            },
            isRetryable,
            this.attempts,
        );
    }

    private itemKey(key: string, id: string): Record<string, AttributeValue> {
        return { [this.options.config.partitionKey]: { S: key }, [this.options.config.sortKey]: { S: id } };
    }
}
