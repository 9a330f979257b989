/**
 * The API-side client: creates and soft-deletes resources, keeps best-effort, reads `max(best-effort, eventual)` and
 * enforces limits. It raises only the errors of its contract (docs/client.md).
 *
 * Two modes, one per counter (the component's `counterMode`, carried by `clientConfig`):
 * - `utilization` (default): best-effort <= the live client lives; limits checked on max(best-effort, eventual)
 *   before creating, so concurrent tryCreate calls can pass a limit by as many as raced (create.ts, delete.ts).
 * - `strict`: live client lives <= best-effort <= limit, for keys written only through tryCreate.
 *
 * Every write of a call is sent within `deadlineMs` of the call's start (runtime/shared/retry.ts); the ledger and the
 * tombstones rest on it (runtime/heal/heal-window.ts). A call whose best-effort writes may have left the count off its
 * items lists the key on the heal index (call.ts).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { resolveClientOptions, type ClientOptionFields } from "./options";
import { checkId, checkItemSize, checkKey, checkLimit, marshalAttributes } from "./arguments";
import { ResourceWriter, type ResourceItem } from "./puts";
import { BestEffortWriter, type BestEffortFailure } from "./units";
import { runCall, type ClientParts } from "./call";
import { createStrict, createUtilization, type TryCreateResult } from "./create";
import { deleteStrict, deleteUtilization, type DeleteResult } from "./delete";
import { readKeyCounters, type RegionCounters } from "./read";
import { readLimits, resolveLimit, writeDefaultLimit, writeKeyLimit, type ResolvedLimit } from "../limits/limits";
import { readUsage, type UsageDay } from "../limits/usage";
import { Metrics, stdoutSink, type LineSink } from "../shared/telemetry";
import type { CounterMode, ItemSelection } from "../shared/config";
import { InvalidArgumentError } from "../shared/errors";

export type { BestEffortFailure } from "./units";
export type { TryCreateResult } from "./create";
export type { DeleteResult } from "./delete";
export type { CounterMode } from "../shared/config";
export type { RegionCounters } from "./read";
export type { ResolvedLimit } from "../limits/limits";
export type { UsageDay } from "../limits/usage";

export interface CounterValue {
    /** The best-effort counter (with regions: summed over regions). */
    readonly bestEffort: number;
    /** The eventual counter, exact once the stream has drained (with regions: summed over regions). */
    readonly eventual: number;
    /** max(bestEffort, eventual), what limits are enforced on; with regions, the sum over regions of each one's max. */
    readonly value: number;
    /** With regions: each member's counters, sorted by region, as the local replica shows them. */
    readonly regions?: readonly RegionCounters[];
}

export interface CreateResult {
    /** True when this call created the item; false when another item holds the id (or, strict, no slot). */
    readonly created: boolean;
}

/** The client's EMF metrics: absorbed failures by operation, and "unavailable" answers. */
export const CLIENT_METRIC_NAMES = [
    "IncrementFailures",
    "DecrementFailures",
    "ReserveFailures",
    "ReleaseFailures",
    "ReadFailures",
    "UnclaimFailures",
    "PutFailures",
    "DueFailures",
    "Unavailable",
] as const;
export type ClientMetricName = (typeof CLIENT_METRIC_NAMES)[number];

const FAILURE_METRIC: Record<BestEffortFailure["operation"], ClientMetricName> = {
    increment: "IncrementFailures",
    decrement: "DecrementFailures",
    reserve: "ReserveFailures",
    release: "ReleaseFailures",
    read: "ReadFailures",
    unclaim: "UnclaimFailures",
    put: "PutFailures",
    due: "DueFailures",
};

export interface HybridCounterClientOptions extends ClientOptionFields {
    readonly tableName: string;
    /** The counters table: `clientConfig.countersTableName`, or `tableName` again for the same-table placement. */
    readonly countersTableName?: string;
    /** The DynamoDB client to use: its endpoint, credentials and middleware apply. */
    readonly dynamodb: DynamoDBClient;
    /** The counter's mode: `clientConfig.counterMode`. Given again, it must be the same. @default "utilization" */
    readonly mode?: CounterMode;
    readonly counterMode?: CounterMode;
    /** Which items count. @default { kind: "client" }, or the flat fields' selection (clientConfig's). */
    readonly selection?: ItemSelection;
    /** Attempts per write (the client makes its own retries). @default 10 */
    readonly attempts?: number;
    /** No write of one call is sent later than this after the call began. @default 10000 */
    readonly deadlineMs?: number;
    /** Called for every absorbed failure, for logs or metrics. @default no-op */
    readonly onBestEffortFailure?: (failure: BestEffortFailure) => void;
    /** Writes CloudWatch EMF lines (one per call that had something to report). @default none */
    readonly metrics?: { readonly namespace: string; readonly sink?: LineSink };
}

export class HybridCounterClient {
    readonly mode: CounterMode;
    private readonly parts: ClientParts;
    private readonly reserved: ReadonlySet<string>;
    private readonly headroom: number;
    private readonly metrics: Metrics<ClientMetricName> | undefined;

    /** Throws ConfigurationError naming every bad option. */
    constructor(options: HybridCounterClientOptions) {
        const resolved = resolveClientOptions(options);
        const { config } = resolved;
        this.mode = config.mode;
        this.reserved = resolved.reserved;
        this.headroom = resolved.headroom;
        this.metrics = options.metrics
            ? new Metrics(options.metrics.namespace, "hybrid-counter-client", options.metrics.sink ?? stdoutSink)
            : undefined;
        const report = options.onBestEffortFailure ?? (() => undefined);
        const onFailure = (failure: BestEffortFailure): void => {
            this.metrics?.add(FAILURE_METRIC[failure.operation]);
            report(failure);
        };
        this.parts = {
            config,
            dynamodb: options.dynamodb,
            attempts: resolved.attempts,
            deadlineMs: resolved.deadlineMs,
            onFailure,
            unavailable: () => this.metrics?.add("Unavailable"),
            puts: new ResourceWriter(config, options.dynamodb, resolved.attempts, resolved.deleteTokenAttribute),
            units: new BestEffortWriter(config, options.dynamodb, resolved.attempts, onFailure),
        };
    }

    /**
     * Creates the resource item `id` under `key` and counts it; strict mode reserves without a limit. Resolves
     * `{ created: false }` when another item holds the id. Throws InvalidArgumentError (before anything is written),
     * DeadlineExceededError when the deadline passed before the put could be sent, or the put's own DynamoDB error.
     */
    async create(key: string, id: string, attributes?: Record<string, unknown>): Promise<CreateResult> {
        const resource = this.resourceItem(key, id, attributes);
        const result = await this.call(key, (call) =>
            this.mode === "strict" ? createStrict(call, resource, undefined) : createUtilization(call, resource, "none"),
        );
        return { created: result.created };
    }

    /**
     * Creates `id` under `key` unless the key is at its limit: `limit` when given, else the key's stored limit, else
     * the counter's default, else none. See TryCreateResult. Throws InvalidArgumentError or the put's DynamoDB error.
     */
    async tryCreate(key: string, id: string, limit?: number, attributes?: Record<string, unknown>): Promise<TryCreateResult> {
        if (limit !== undefined) {
            checkLimit(limit);
        }
        const resource = this.resourceItem(key, id, attributes);
        return this.call(key, async (call) => {
            if (this.mode === "utilization") {
                return createUtilization(call, resource, limit);
            }
            const effective = limit ?? resolveLimit(await readLimits(this.parts.dynamodb, this.parts.config, key)).limit;
            return createStrict(call, resource, effective);
        });
    }

    /**
     * Soft-deletes `id` under `key` and moves best-effort. Resolves `{ deleted: false }` when it does not exist, is
     * deleted, or another delete holds it. Throws InvalidArgumentError, DeadlineExceededError, or a DynamoDB error of
     * the delete's own requests (the item is then left live).
     */
    async delete(key: string, id: string): Promise<DeleteResult> {
        checkKey(key);
        checkId(id, this.parts.config.counterPrefix, this.parts.config.selection);
        return this.call(key, async (call) => {
            const state = await this.parts.puts.read(key, id);
            if (state === undefined || state.deleted) {
                return { deleted: false };
            }
            return this.mode === "strict" ? deleteStrict(call, id, state) : deleteUtilization(call, id, state);
        });
    }

    /** Reads both counters: one strongly consistent Query per shard, at once. Throws the read's DynamoDB error. */
    async count(key: string): Promise<CounterValue> {
        checkKey(key);
        const read = await readKeyCounters(this.parts.dynamodb, this.parts.config, key);
        if (read.regions === undefined) {
            return { bestEffort: read.bestEffort, eventual: read.eventual, value: Math.max(read.bestEffort, read.eventual) };
        }
        const sum = (pick: (r: RegionCounters) => number) => read.regions!.reduce((s, r) => s + pick(r), 0);
        return {
            bestEffort: sum((r) => r.bestEffort),
            eventual: sum((r) => r.eventual),
            value: sum((r) => Math.max(r.bestEffort, r.eventual)),
            regions: read.regions,
        };
    }

    /** Stores `limit` as `key`'s limit (null removes it: the key then runs under the default). */
    async setLimit(key: string, limit: number | null): Promise<void> {
        checkKey(key);
        if (limit !== null) {
            checkLimit(limit);
        }
        await writeKeyLimit(this.parts.dynamodb, this.parts.config, key, limit);
    }

    /** Stores the counter's default limit (null removes it). */
    async setDefaultLimit(limit: number | null): Promise<void> {
        if (limit !== null) {
            checkLimit(limit);
        }
        await writeDefaultLimit(this.parts.dynamodb, this.parts.config, limit);
    }

    /** The limit a call without one runs under, and where it comes from ("key", "default" or "none"). */
    async getLimit(key: string): Promise<ResolvedLimit> {
        checkKey(key);
        return resolveLimit(await readLimits(this.parts.dynamodb, this.parts.config, key));
    }

    /** `key`'s usage history, one entry per UTC day from `from` to `to` (YYYY-MM-DD, inclusive) that had any. */
    async usage(key: string, range: { readonly from: string; readonly to: string }): Promise<UsageDay[]> {
        checkKey(key);
        for (const field of ["from", "to"] as const) {
            if (typeof range?.[field] !== "string" || !/^\d{4}-\d{2}-\d{2}$/.test(range[field]) || Number.isNaN(Date.parse(range[field]))) {
                throw new InvalidArgumentError(field, `must be a UTC day as YYYY-MM-DD (got ${JSON.stringify(range?.[field])})`);
            }
        }
        if (range.from > range.to) {
            throw new InvalidArgumentError("from", `must not be after [to] (${range.from} > ${range.to})`);
        }
        return readUsage(this.parts.dynamodb, this.parts.config, key, range.from, range.to);
    }

    private async call<T>(key: string, body: Parameters<typeof runCall<T>>[2]): Promise<T> {
        try {
            return await runCall(this.parts, key, body);
        } finally {
            this.metrics?.flush();
        }
    }

    private resourceItem(key: string, id: string, attributes: Record<string, unknown> | undefined): ResourceItem {
        checkKey(key);
        checkId(id, this.parts.config.counterPrefix, this.parts.config.selection);
        const resource = this.parts.puts.item(key, id, marshalAttributes(attributes, this.reserved));
        checkItemSize(resource.item, this.headroom);
        return resource;
    }
}
