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
import { QueryCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { BestEffortCounter, type BestEffortFailure } from "./best-effort";
import { checkId, checkKey, checkLimit, marshalAttributes, resolveClientOptions, type CounterMode } from "./client-validation";
import { bestEffortSortKey, eventualSortKey, type CounterTableConfig, type CounterTableLayout } from "./config";
import { isRetryable } from "./counting";
import { ResourceWriter, type ResourceItem } from "./resource-writes";
import { withRetries } from "./retry";

export type { BestEffortFailure } from "./best-effort";
export type { CounterMode } from "./client-validation";

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

export class HybridCounterClient {
    readonly mode: CounterMode;
    private readonly config: CounterTableConfig;
    private readonly dynamodb: DynamoDBClient;
    private readonly attempts: number;
    private readonly reserved: ReadonlySet<string>;
    private readonly resources: ResourceWriter;
    private readonly bestEffort: BestEffortCounter;

    /** Throws ConfigurationError naming every bad option. */
    constructor(options: HybridCounterClientOptions) {
        const resolved = resolveClientOptions(options);
        this.config = resolved.config;
        this.mode = resolved.mode;
        this.attempts = resolved.attempts;
        this.reserved = resolved.reserved;
        this.dynamodb = options.dynamodb;
        this.resources = new ResourceWriter(this.config, this.dynamodb, this.attempts, resolved.deleteTokenAttribute);
        this.bestEffort = new BestEffortCounter(
            this.config,
            this.dynamodb,
            this.attempts,
            options.onBestEffortFailure ?? (() => undefined),
        );
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
            const reservation = await this.bestEffort.reserve(key, undefined);
            if (reservation.outcome !== "reserved") {
                // Without a reservation the upper bound would break: nothing is written.
                return { created: false };
            }
            return { created: await this.putOrRelease(key, item) };
        }
        const created = await this.resources.put(item);
        if (created) {
            await this.bestEffort.once(key, 1, "increment");
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
            const reservation = await this.bestEffort.reserve(key, limit);
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
            current = await withRetries(() => this.count(key), isRetryable, this.attempts);
        } catch {
            return { created: false, count: null, reason: "unavailable" };
        }
        if (current.value >= limit) {
            return { created: false, count: current.value, reason: "limit" };
        }
        const created = await this.resources.put(item);
        if (!created) {
            return { created: false, count: current.value, reason: "exists" };
        }
        await this.bestEffort.once(key, 1, "increment");
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
        checkKey(key);
        checkId(id, this.config.counterPrefix);
        // Touch the counter only for an item that is live, so deleting a missing id changes nothing.
        const createToken = await this.resources.liveToken(key, id);
        if (createToken === undefined) {
            return { deleted: false };
        }
        if (this.mode === "utilization") {
            await this.bestEffort.decrement(key);
        }
        const outcome = await this.resources.softDelete(key, id, createToken);
        // "gone": live a moment ago and removed now. Either this call's soft delete committed and the
        // consumer already removed the item before an SDK retry could see it, or a concurrent delete
        // did both. Never compensate: in utilization mode a decrement too many only undercounts, and in
        // strict mode a release not sent only holds a slot back, while guessing wrong would break the bound.
        if (this.mode === "strict" && outcome === "mine") {
            await this.bestEffort.once(key, -1, "release");
        }
        return { deleted: outcome !== "taken" };
    }

    /**
     * Reads both counters in one strongly consistent Query.
     * Throws: InvalidArgumentError; the read's DynamoDB error, unchanged (this is a read the caller adds).
     */
    async count(key: string): Promise<CounterValue> {
        checkKey(key);
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

    // --- helpers ---------------------------------------------------------------------------------

    private resourceItem(key: string, id: string, attributes: Record<string, unknown> | undefined): ResourceItem {
        checkKey(key);
        checkId(id, this.config.counterPrefix);
        return this.resources.item(key, id, marshalAttributes(attributes, this.reserved));
    }

    /** Strict mode: puts the reserved item; gives the slot back when nothing was created. */
    private async putOrRelease(key: string, item: ResourceItem): Promise<boolean> {
        // A put that throws may still have committed (a lost response): keep the slot, which can only hold
        // capacity back. Only a put answered "another item has this id" certainly wrote nothing.
        const created = await this.resources.put(item);
        if (!created) {
            await this.bestEffort.once(key, -1, "release");
        }
        return created;
    }
}
