/**
 * The API-side client: creates and soft-deletes resources, keeps the best-effort counter, reads
 * `max(best-effort, eventual)` and enforces limits. It never raises a new kind of error to the API's
 * callers (see the per-method contracts below).
 *
 * Two modes, fixed per counter key (every client writing a key must use the same mode):
 *
 * - `utilization` (default): best-effort is a lower bound of the live items (it may undercount, never
 *   overcounts). Creation increments after the item is written; deletion decrements before the item
 *   is soft-deleted. Limits are checked on `max(best-effort, eventual)` before creating, so a burst of
 *   concurrent creates can briefly exceed the limit; the count never stays wrong.
 *   Invariant: bestEffort <= live.
 *
 * - `strict`: best-effort is an upper bound (it may hold a slot back, never undercounts). A slot is
 *   reserved with a conditional increment before the item is written, and released only after the
 *   soft delete. The limit is never exceeded; a failure can only hold a slot back.
 *   Invariant: live <= bestEffort <= limit (for keys only ever written through tryCreate).
 *
 * Each best-effort write is retried only in its safe direction: an SDK retry of an increment after a
 * "500 after commit" would apply it twice, so writes whose repetition could break the mode's bound
 * are sent exactly once, and their failures are absorbed (they only loosen the bound).
 */
import {
    ConditionalCheckFailedException,
    GetItemCommand,
    PutItemCommand,
    QueryCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
    type UpdateItemCommandInput,
    type UpdateItemCommandOutput,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import type { FinalizeRequestMiddleware } from "@smithy/types";
import { randomUUID } from "node:crypto";
import {
    bestEffortSortKey,
    eventualSortKey,
    layoutProblems,
    ConfigurationError,
    layoutWithDefaults,
    type CounterTableConfig,
    type CounterTableLayout,
} from "./config";
import { isRetryable } from "./counting";
import { InvalidArgumentError } from "./errors";
import { PARTITION_KEY_MAX_BYTES, SORT_KEY_MAX_BYTES } from "./records";

export type CounterMode = "utilization" | "strict";

export interface CounterValue {
    /** The best-effort counter, written by the API right after each create or delete. */
    readonly bestEffort: number;
    /** The eventual counter, written exactly once per record by the stream consumer. */
    readonly eventual: number;
    /** max(bestEffort, eventual): what limits are enforced on. */
    readonly value: number;
}

export interface CreateResult {
    /** True when this call created the item; false when an item with this id already exists. */
    readonly created: boolean;
}

export interface DeleteResult {
    /** True when this call soft-deleted the item; false when it did not exist or was already deleted. */
    readonly deleted: boolean;
}

export interface TryCreateResult {
    readonly created: boolean;
    /**
     * The count the decision was made on, plus one when this call created the item. In strict mode
     * it is the best-effort upper bound. Null only when `reason` is "unavailable".
     */
    readonly count: number | null;
    /** Why nothing was created: the limit is reached, the id exists, or the counter could not be read or reserved. */
    readonly reason?: "limit" | "exists" | "unavailable";
}

/** A best-effort write that failed and was absorbed (the count stays on its safe side). */
export interface BestEffortFailure {
    readonly key: string;
    readonly operation: "increment" | "decrement" | "reserve" | "release";
    readonly error: unknown;
}

export interface HybridCounterClientOptions extends Partial<CounterTableLayout> {
    readonly tableName: string;
    /** The DynamoDB client to use: its endpoint, credentials, retry settings and middleware apply. */
    readonly dynamodb: DynamoDBClient;
    /** @default "utilization" */
    readonly mode?: CounterMode;
    /**
     * Attempts this client makes itself (on top of the SDK's) for writes that are safe to repeat: the
     * resource put and the soft delete (recognised by their token) and safe-direction counter writes.
     * A TransactionConflictException on the soft delete (the consumer is flagging the same item) is
     * retried this way. @default 6
     */
    readonly attempts?: number;
    /** Called for every absorbed best-effort failure, for logs or metrics. @default no-op */
    readonly onBestEffortFailure?: (failure: BestEffortFailure) => void;
}

const DEFAULT_ATTEMPTS = 6;
const BACKOFF_BASE_MS = 10;
const BACKOFF_CAP_MS = 400;

/** Wraps an error so that the SDK's retry strategy does not retry the attempt that raised it. */
class SingleAttemptError extends Error {
    constructor(readonly original: unknown) {
        super("single attempt failed");
        this.name = "SingleAttemptError";
    }
}

export class HybridCounterClient {
    readonly mode: CounterMode;
    private readonly config: CounterTableConfig;
    private readonly dynamodb: DynamoDBClient;
    private readonly attempts: number;
    private readonly onBestEffortFailure: (failure: BestEffortFailure) => void;
    private readonly reserved: ReadonlySet<string>;
    /** Where a soft delete stores its own token: `<tokenAttribute>_delete`. */
    private readonly deleteTokenAttribute: string;

    constructor(options: HybridCounterClientOptions) {
        const problems: string[] = [];
        const layout = layoutWithDefaults(options);
        problems.push(...layoutProblems(layout));
        if (typeof options.tableName !== "string" || options.tableName.length < 3 || options.tableName.length > 255) {
            problems.push("[tableName] must be a table name of 3 to 255 characters");
        }
        if (!options.dynamodb || typeof options.dynamodb.send !== "function") {
            problems.push("[dynamodb] must be a DynamoDBClient");
        }
        const mode = options.mode ?? "utilization";
        if (mode !== "utilization" && mode !== "strict") {
            problems.push(`[mode] must be "utilization" or "strict"`);
        }
        const attempts = options.attempts ?? DEFAULT_ATTEMPTS;
        if (!Number.isInteger(attempts) || attempts < 1 || attempts > 20) {
            problems.push("[attempts] must be an integer from 1 to 20");
        }
        const deleteTokenAttribute = `${layout.tokenAttribute}_delete`;
        const names = [layout.partitionKey, layout.sortKey, layout.processedAttribute, layout.deletedAttribute];
        if (names.includes(deleteTokenAttribute) || Buffer.byteLength(deleteTokenAttribute, "utf8") > 255) {
            problems.push(`[tokenAttribute] must leave "${deleteTokenAttribute}" free for the soft delete's token (at most 255 bytes)`);
        }
        if (problems.length > 0) {
            throw new ConfigurationError(problems);
        }
        this.config = { ...layout, tableName: options.tableName };
        this.deleteTokenAttribute = deleteTokenAttribute;
        this.dynamodb = options.dynamodb;
        this.mode = mode;
        this.attempts = attempts;
        this.onBestEffortFailure = options.onBestEffortFailure ?? (() => undefined);
        this.reserved = new Set([
            layout.partitionKey,
            layout.sortKey,
            layout.processedAttribute,
            layout.deletedAttribute,
            layout.tokenAttribute,
            deleteTokenAttribute,
        ]);
    }

    /**
     * Creates the resource item `id` under counter `key` and counts it.
     *
     * Resolves `{ created: false }` when an item with this id exists (including one soft-deleted and
     * not yet removed by the consumer). A retried call never counts twice.
     *
     * Throws: InvalidArgumentError (before anything is written); otherwise only the error of the
     * resource write itself, unchanged (for example a ValidationException for an item over 400 KB,
     * or a throttling error that outlived every retry). Best-effort counter failures are absorbed.
     * In strict mode create() reserves without a limit; use tryCreate() to enforce one.
     */
    async create(key: string, id: string, attributes?: Record<string, unknown>): Promise<CreateResult> {
        const item = this.resourceItem(key, id, attributes);
        if (this.mode === "strict") {
            const reservation = await this.reserve(key, undefined);
            if (reservation.outcome !== "reserved") {
                // Without a reservation the upper bound would break: nothing is written.
                return { created: false };
            }
            return { created: await this.putOrRelease(key, item) };
        }
        const created = await this.putResource(item);
        if (created) {
            await this.bestEffortOnce(key, 1, "increment");
        }
        return { created };
    }

    /**
     * Creates the item only if the count is below `limit`.
     *
     * utilization: reads max(bestEffort, eventual) and creates when it is below the limit; concurrent
     * callers can briefly exceed the limit by as many as raced.
     * strict: reserves a slot with a conditional increment of best-effort, then creates; never exceeds.
     *
     * Never throws for counter trouble: a counter that cannot be read or reserved answers
     * `{ created: false, reason: "unavailable" }`, shaped like the API's normal "limit reached".
     * Throws: InvalidArgumentError before anything is written; the resource write's own error, unchanged.
     */
    async tryCreate(key: string, id: string, limit: number, attributes?: Record<string, unknown>): Promise<TryCreateResult> {
        const item = this.resourceItem(key, id, attributes);
        checkLimit(limit);
        if (this.mode === "strict") {
            const reservation = await this.reserve(key, limit);
            if (reservation.outcome === "limit") {
                return { created: false, count: reservation.value, reason: "limit" };
            }
            if (reservation.outcome === "failed") {
                return { created: false, count: null, reason: "unavailable" };
            }
            const created = await this.putOrRelease(key, item);
            return created
                ? { created: true, count: reservation.value }
                : { created: false, count: reservation.value - 1, reason: "exists" };
        }
        let current: CounterValue;
        try {
            current = await this.withRetries(() => this.count(key), isRetryable);
        } catch {
            return { created: false, count: null, reason: "unavailable" };
        }
        if (current.value >= limit) {
            return { created: false, count: current.value, reason: "limit" };
        }
        const created = await this.putResource(item);
        if (!created) {
            return { created: false, count: current.value, reason: "exists" };
        }
        await this.bestEffortOnce(key, 1, "increment");
        return { created: true, count: current.value + 1 };
    }

    /**
     * Soft-deletes the item (`deleted = true`); the consumer counts the deletion and removes it.
     *
     * utilization: decrements best-effort first, then soft-deletes (a failure between the two can
     * only undercount). If the decrement fails after every retry, the item is left untouched and the
     * decrement's DynamoDB error is returned, because soft-deleting without it would overcount.
     * strict: soft-deletes first, then releases the slot (a failure can only hold the slot back).
     * Both first read the item (1 RCU), so deleting a missing id never touches the counter.
     *
     * Resolves `{ deleted: false }` when the item does not exist, is already deleted, or a concurrent
     * delete of the same id won.
     * Throws: InvalidArgumentError before anything is written; otherwise only DynamoDB errors of the
     * delete's own writes, unchanged, after a TransactionConflictException has been retried.
     */
    async delete(key: string, id: string): Promise<DeleteResult> {
        this.checkKey(key);
        this.checkId(id);
        // Touch the counter only for an item that is live, so deleting a missing id changes nothing.
        const createToken = await this.liveToken(key, id);
        if (createToken === undefined) {
            return { deleted: false };
        }
        if (this.mode === "utilization") {
            await this.withRetries(() => this.bestEffortWrite(key, -1), isRetryable);
        }
        const outcome = await this.softDelete(key, id, createToken);
        // "gone": live a moment ago and removed now. Either this call's soft delete committed and the
        // consumer already removed the item before an SDK retry could see it, or a concurrent delete
        // did both. Never compensate: in utilization mode a decrement too many only undercounts, and in
        // strict mode a release not sent only holds a slot back, while guessing wrong would break the bound.
        if (this.mode === "strict" && outcome === "mine") {
            await this.bestEffortOnce(key, -1, "release");
        }
        return { deleted: outcome !== "taken" };
    }

    /**
     * Reads both counters in one strongly consistent Query.
     * Throws: InvalidArgumentError; the read's DynamoDB error, unchanged (this is a read the caller adds).
     */
    async count(key: string): Promise<CounterValue> {
        this.checkKey(key);
        const { partitionKey, sortKey, countAttribute, counterPrefix } = this.config;
        const response = await this.dynamodb.send(
            new QueryCommand({
                TableName: this.config.tableName,
                ConsistentRead: true,
                KeyConditionExpression: "#pk = :key AND begins_with(#sk, :prefix)",
                ExpressionAttributeNames: { "#pk": partitionKey, "#sk": sortKey },
                ExpressionAttributeValues: { ":key": { S: key }, ":prefix": { S: counterPrefix } },
            }),
        );
        let bestEffort = 0;
        let eventual = 0;
        for (const item of response.Items ?? []) {
            const value = Number(item[countAttribute]?.N ?? "0");
            if (item[sortKey]?.S === bestEffortSortKey(this.config)) {
                bestEffort = value;
            } else if (item[sortKey]?.S === eventualSortKey(this.config)) {
                eventual = value;
            }
        }
        return { bestEffort, eventual, value: Math.max(bestEffort, eventual) };
    }

    // --- resource writes -------------------------------------------------------------------------

    private resourceItem(key: string, id: string, attributes: Record<string, unknown> | undefined) {
        this.checkKey(key);
        this.checkId(id);
        const { partitionKey, sortKey, processedAttribute, tokenAttribute } = this.config;
        const extra = this.marshalAttributes(attributes);
        const token = randomUUID();
        const item: Record<string, AttributeValue> = {
            ...extra,
            [partitionKey]: { S: key },
            [sortKey]: { S: id },
            [processedAttribute]: { BOOL: false },
            [tokenAttribute]: { S: token },
        };
        return { item, token };
    }

    /** Puts the item if absent. True when this call wrote it, recognised by its token after an SDK retry. */
    private async putResource({ item, token }: { item: Record<string, AttributeValue>; token: string }): Promise<boolean> {
        const { tableName, partitionKey } = this.config;
        const outcome = await this.writeWithToken(
            () =>
                this.dynamodb.send(
                    new PutItemCommand({
                        TableName: tableName,
                        Item: item,
                        ConditionExpression: "attribute_not_exists(#pk)",
                        ExpressionAttributeNames: { "#pk": partitionKey },
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    }),
                ),
            this.config.tokenAttribute,
            token,
        );
        return outcome === "mine";
    }

    /**
     * Sends a conditional write that stores `token`, retrying what is safe to retry. "mine": it
     * committed, possibly on an attempt whose response was lost (the stored token is ours). "taken":
     * the condition failed on an item another write owns. "gone": the condition failed on no item.
     */
    private async writeWithToken(
        send: () => Promise<unknown>,
        tokenAttribute: string,
        token: string,
        lifeToken?: { attribute: string; value: string | null },
    ): Promise<"mine" | "taken" | "gone"> {
        return this.withRetries(async () => {
            try {
                await send();
                return "mine";
            } catch (error) {
                if (error instanceof ConditionalCheckFailedException) {
                    const item = error.Item;
                    if (item === undefined) {
                        return "gone";
                    }
                    if (item[tokenAttribute]?.S === token) {
                        return "mine";
                    }
                    // The id now names a newer item: the one this call aimed at is gone.
                    if (lifeToken !== undefined && (item[lifeToken.attribute]?.S ?? null) !== lifeToken.value) {
                        return "gone";
                    }
                    return "taken";
                }
                throw error;
            }
        }, isRetryable);
    }

    /** Strict mode: puts the reserved item; gives the slot back when nothing was created. */
    private async putOrRelease(key: string, item: { item: Record<string, AttributeValue>; token: string }): Promise<boolean> {
        // A put that throws may still have committed (a lost response): keep the slot, which can only hold
        // capacity back. Only a put answered "another item has this id" certainly wrote nothing.
        const created = await this.putResource(item);
        if (!created) {
            await this.bestEffortOnce(key, -1, "release");
        }
        return created;
    }

    /**
     * Reads the item before a delete. Undefined when it is missing or already deleted; otherwise the
     * creation token that names this life of the id (null for an item written without one).
     */
    private async liveToken(key: string, id: string): Promise<string | null | undefined> {
        const { tableName, deletedAttribute, tokenAttribute } = this.config;
        const response = await this.withRetries(
            () =>
                this.dynamodb.send(
                    new GetItemCommand({
                        TableName: tableName,
                        Key: this.key(key, id),
                        ConsistentRead: true,
                        ProjectionExpression: "#deleted, #token",
                        ExpressionAttributeNames: { "#deleted": deletedAttribute, "#token": tokenAttribute },
                    }),
                ),
            isRetryable,
        );
        if (response.Item === undefined || response.Item[deletedAttribute]?.BOOL === true) {
            return undefined;
        }
        return response.Item[tokenAttribute]?.S ?? null;
    }

    /**
     * Sets `deleted = true` on the life of the id that was read (`createToken`), if it is not deleted.
     * The delete's own token goes to a separate attribute, so the creation token is never overwritten: a
     * retry after a lost response recognises this call's write, and can never soft-delete a newer item
     * that reused the id. See writeWithToken for the outcomes.
     */
    private async softDelete(key: string, id: string, createToken: string | null): Promise<"mine" | "taken" | "gone"> {
        const { tableName, partitionKey, deletedAttribute, tokenAttribute } = this.config;
        const token = randomUUID();
        return this.writeWithToken(
            () =>
                this.dynamodb.send(
                    new UpdateItemCommand({
                        TableName: tableName,
                        Key: this.key(key, id),
                        UpdateExpression: "SET #deleted = :true, #deleteToken = :token",
                        ConditionExpression:
                            "attribute_exists(#pk) AND (attribute_not_exists(#deleted) OR #deleted = :false) AND " +
                            (createToken === null ? "attribute_not_exists(#createToken)" : "#createToken = :createToken"),
                        ExpressionAttributeNames: {
                            "#pk": partitionKey,
                            "#deleted": deletedAttribute,
                            "#deleteToken": this.deleteTokenAttribute,
                            "#createToken": tokenAttribute,
                        },
                        ExpressionAttributeValues: {
                            ":true": { BOOL: true },
                            ":false": { BOOL: false },
                            ":token": { S: token },
                            ...(createToken === null ? {} : { ":createToken": { S: createToken } }),
                        },
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    }),
                ),
            this.deleteTokenAttribute,
            token,
            { attribute: tokenAttribute, value: createToken },
        );
    }

    // --- best-effort counter ---------------------------------------------------------------------

    /** Strict mode: reserves one slot, below `limit` when given. Retries are safe: an extra slot is held back. */
    private async reserve(
        key: string,
        limit: number | undefined,
    ): Promise<{ outcome: "reserved"; value: number } | { outcome: "limit"; value: number } | { outcome: "failed" }> {
        try {
            const value = await this.withRetries(() => this.bestEffortWrite(key, 1, limit), isRetryable);
            return { outcome: "reserved", value };
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                return { outcome: "limit", value: Number(error.Item?.[this.config.countAttribute]?.N ?? limit ?? 0) };
            }
            this.onBestEffortFailure({ key, operation: "reserve", error });
            return { outcome: "failed" };
        }
    }

    /** A best-effort write sent exactly once (no SDK retry); failures are absorbed and reported. */
    private async bestEffortOnce(key: string, delta: 1 | -1, operation: BestEffortFailure["operation"]): Promise<void> {
        try {
            await this.bestEffortWrite(key, delta, undefined, true);
        } catch (error) {
            this.onBestEffortFailure({ key, operation, error: error instanceof SingleAttemptError ? error.original : error });
        }
    }

    /** ADDs `delta` to the best-effort item, optionally only while it is below `limit`. Returns the new value. */
    private async bestEffortWrite(key: string, delta: number, limit?: number, singleAttempt = false): Promise<number> {
        const { tableName, countAttribute } = this.config;
        const command = new UpdateItemCommand({
            TableName: tableName,
            Key: this.key(key, bestEffortSortKey(this.config)),
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
            const singleAttempt: FinalizeRequestMiddleware<UpdateItemCommandInput, UpdateItemCommandOutput> = (next) => async (args) => {
                try {
                    return await next(args);
                } catch (error) {
                    throw new SingleAttemptError(error);
                }
            };
            command.middlewareStack.addRelativeTo(singleAttempt, {
                relation: "after",
                toMiddleware: "retryMiddleware",
                name: "hybridCounterSingleAttempt",
            });
        }
        const response = await this.dynamodb.send(command);
        return Number(response.Attributes?.[countAttribute]?.N ?? "0");
    }

    // --- helpers ---------------------------------------------------------------------------------

    private async withRetries<T>(fn: () => Promise<T>, retryable: (error: unknown) => boolean): Promise<T> {
        for (let attempt = 1; ; attempt++) {
            try {
                return await fn();
            } catch (error) {
                if (attempt >= this.attempts || !retryable(error)) {
                    throw error;
                }
                const delay = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt) * Math.random();
                await new Promise((r) => setTimeout(r, delay));
            }
        }
    }

    private key(key: string, sk: string): Record<string, AttributeValue> {
        return { [this.config.partitionKey]: { S: key }, [this.config.sortKey]: { S: sk } };
    }

    private checkKey(key: unknown): asserts key is string {
        if (typeof key !== "string" || key.length === 0) {
            throw new InvalidArgumentError("key", "must be a non-empty string");
        }
        if (Buffer.byteLength(key, "utf8") > PARTITION_KEY_MAX_BYTES) {
            throw new InvalidArgumentError("key", `must be at most ${PARTITION_KEY_MAX_BYTES} bytes`);
        }
    }

    private checkId(id: unknown): asserts id is string {
        if (typeof id !== "string" || id.length === 0) {
            throw new InvalidArgumentError("id", "must be a non-empty string");
        }
        if (Buffer.byteLength(id, "utf8") > SORT_KEY_MAX_BYTES) {
            throw new InvalidArgumentError("id", `must be at most ${SORT_KEY_MAX_BYTES} bytes`);
        }
        if (id.startsWith(this.config.counterPrefix)) {
            throw new InvalidArgumentError("id", `must not start with the reserved prefix "${this.config.counterPrefix}"`);
        }
    }

    private marshalAttributes(attributes: Record<string, unknown> | undefined): Record<string, AttributeValue> {
        if (attributes === undefined) {
            return {};
        }
        if (attributes === null || typeof attributes !== "object" || Array.isArray(attributes)) {
            throw new InvalidArgumentError("attributes", "must be an object of attribute names to values");
        }
        const out: Record<string, AttributeValue> = {};
        for (const [name, value] of Object.entries(attributes)) {
            if (this.reserved.has(name)) {
                throw new InvalidArgumentError(`attributes.${name}`, "is reserved by the counter and cannot be set");
            }
            if (name.length === 0 || Buffer.byteLength(name, "utf8") > 255) {
                throw new InvalidArgumentError(`attributes.${name}`, "must be a name of 1 to 255 bytes");
            }
            if (value === undefined) {
                continue;
            }
            const unstorable = findUnstorable(value);
            if (unstorable !== undefined) {
                throw new InvalidArgumentError(`attributes.${name}`, `cannot be stored: ${unstorable}`);
            }
            try {
                const marshalled = marshall({ [name]: value }, { removeUndefinedValues: true });
                if (marshalled[name] !== undefined) {
                    out[name] = marshalled[name];
                }
            } catch (error) {
                throw new InvalidArgumentError(`attributes.${name}`, `cannot be stored: ${(error as Error).message}`);
            }
        }
        return out;
    }
}

function checkLimit(limit: unknown): asserts limit is number {
    if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) {
        throw new InvalidArgumentError("limit", "must be a non-negative safe integer");
    }
}

/** A value marshall() would drop without a word (a function or a symbol, at any depth), described. */
function findUnstorable(value: unknown, depth = 0): string | undefined {
    if (typeof value === "function" || typeof value === "symbol") {
        return `a ${typeof value} is not a DynamoDB value`;
    }
    if (depth > 32) {
        return "it is nested deeper than DynamoDB allows (32 levels)";
    }
    if (value !== null && typeof value === "object") {
        const children = value instanceof Map ? [...value.values()] : value instanceof Set ? [...value] : Object.values(value);
        for (const child of children) {
            const found = findUnstorable(child, depth + 1);
            if (found !== undefined) {
                return found;
            }
        }
    }
    return undefined;
}
