/**
 * The settler: one bounded run of healing and settling, as the scheduled function (and the operator's
 * `hybrid-counter heal` without --key) runs it.
 *
 * Invariant: a run only calls healKey and the settle function (reconcileKey) on keys, so it keeps every
 * invariant those keep (each of their writes is conditional; a write that loses a race changes nothing).
 * What the settler adds is coverage within a bounded cost:
 *
 *   - Pending heals: the parties that know a key's best-effort may be off its items set `hc_heal` and
 *     `hc_due_at` on its best-effort item (runtime/shared/best-effort-marks.ts: every strict client write, a
 *     utilization call that ended off its items, the consumer for changes other writers made, a strict
 *     backfill) and a heal removes them, so the sparse GSI "heal-index" (pk `hc_heal` = one of HEAL_SHARDS
 *     shards, sk `hc_due_at`) lists the keys due since their last heal. A run queries it shard by shard, only
 *     entries older than the quiet window (`hc_due_at <= now - Q`, the others would be skipped), the oldest
 *     first across all shards, up to `keyBudget` keys, and settles and heals each: a backlog of B due keys
 *     heals within ceil(B / keyBudget) runs (see dueKeys).
 *   - Keys nobody marked (other writers of the user table, a utilization call that died between its writes,
 *     a mark that could not be written): a bounded audit walks the user table with a
 *     parallel Scan, one page of at most `auditPageSize` items per segment per run, and settles and heals
 *     the keys it meets. When the counters live in a table of their own it walks that one too, for the keys
 *     whose counters outlived their items (the last item deleted by another writer or by TTL after a heal
 *     took the key off the index, its removal's record gone with the stream's retention). Its cursor lives in
 *     the counters table (sk `${counterPrefix}settler#cursor`), so a full pass takes
 *     ceil(items / (segments * pageSize)) runs per table and never one whole-table scan.
 *   - Order: each key is settled before it is healed, and not healed when its settle fails. Reconcile purges a late
 *     put attempt of a removed life that its marker shows removed at reconcile's first read of the key (markers.ts),
 *     so the heal's read of the partition no longer holds it; healed first, the heal would count it, and best-effort
 *     would stay one above the live items until the heal the purge's REMOVE record asks for (heal-due.ts). A late
 *     put whose removal's record the consumer has not read yet (in the first DLQ), or read only after reconcile's
 *     first read, is not recognised by the settle: the heal counts it, and the consumer's removal marks the key
 *     (docs/limits.md).
 *
 * Cost per run is therefore bounded by keyBudget + segments * pageSize keys (each one heal: 1 consistent
 * GetItem + the partition's Query + the markers' Query + 1 conditional write; plus the settle), and is
 * measured: every request the run sends asks for ReturnConsumedCapacity, and the report sums it.
 *
 * A sharded key (`counterShards` N > 1, runtime/shards/layout.ts) has N best-effort items, and each may be on the
 * index: an entry's partition key is a shard's, mapped back to its key (`shardOfPartitionKey`), and the key is
 * healed once, every shard of it (heal.ts), each shard's write removing that shard's entry. Up to N entries name
 * one key, so each index shard is read up to keyBudget * N entries deep, which keeps the fairness argument of
 * dueKeys in keys. The audit meets shards' partition keys in the counters table and maps them back the same way
 * (deduplicated), and leaves out user-table keys a sharded counter cannot hold (shardedKeyProblem): no heal or
 * settle could take them. A heal costs N GetItems and up to N writes (and the markers of the shards it needs).
 * The report's heal figures (healed, corrected, drift, raced, skipped) count best-effort items, one per shard.
 */
import {
    GetItemCommand,
    PutItemCommand,
    QueryCommand,
    ScanCommand,
    UpdateItemCommand,
    ConditionalCheckFailedException,
    type AttributeValue,
    type ConsumedCapacity,
    type DynamoDBClient,
    type ServiceInputTypes,
    type ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import {
    COUNTER_ATTRIBUTES as A,
    HEAL_INDEX_NAME,
    HEAL_SHARDS,
    healShardValue,
    type RegionsConfig,
    bestEffortSortKey,
    countersTable,
    eventualSortKey,
    settlerCursorSortKey,
    type CounterTableLayout,
} from "../shared/config";
import { isTransactionConflict } from "../shared/aws-errors";
import type { FatalQueue } from "../stream/fatal";
import { healKey, type HealOptions, type HealResult, type HealSkipReason, type ShardHealResult } from "./heal";
import { shardCount, shardedKeyProblem, shardOfPartitionKey, shardPartitionKey } from "../shards/layout";
import { reconcileKey, type ReconcileResult } from "./reconcile";
import type { LineSink } from "../shared/telemetry";

export const SETTLER_DEFAULTS = Object.freeze({
    /** Keys taken from the heal index per run. */
    keyBudget: 200,
    /** Parallel Scan segments of the audit. */
    auditSegments: 4,
    /** Items per segment page of the audit, per run. */
    auditPageSize: 100,
    /** Keys healed and settled at once. */
    concurrency: 4,
});

export interface SettleOptions extends HealOptions {
    /** Where reconcile reports items it cannot count. */
    readonly fatal: FatalQueue;
    /** @default SETTLER_DEFAULTS.keyBudget */
    readonly keyBudget?: number;
    /** @default SETTLER_DEFAULTS.auditSegments; 0 turns the audit off */
    readonly auditSegments?: number;
    /** @default SETTLER_DEFAULTS.auditPageSize */
    readonly auditPageSize?: number;
    /** @default SETTLER_DEFAULTS.concurrency */
    readonly concurrency?: number;
    /** Settles one key's stranded items. @default reconcileKey with this run's config, client and fatal queue */
    readonly settleKey?: (key: string) => Promise<ReconcileResult>;
    readonly sink?: LineSink;
}

export interface SettleReport {
    /** Keys handled this run, from the heal index and from the audit. */
    readonly keysFromIndex: number;
    readonly keysFromAudit: number;
    /** Heals written; of them, how many changed the count, and by how much in total (|after - before|). */
    readonly healed: number;
    readonly corrected: number;
    readonly drift: number;
    /** Heals that lost a race with a client write (nothing changed; healed on a later run). */
    readonly raced: number;
    readonly skipped: Partial<Record<HealSkipReason, number>>;
    /** Stranded items reconcile found and committed. */
    readonly settleFound: number;
    readonly settleCounted: number;
    /** Keys whose heal or settle failed or came back incomplete; they stay due. */
    readonly failedKeys: string[];
    /** True when the heal index held more due keys than the budget. */
    readonly budgetExhausted: boolean;
    /** Capacity consumed by the whole run. */
    readonly readUnits: number;
    readonly writeUnits: number;
    /**
     * Of it, what the heals consumed (the rest is the heal index, the audit and the settling of stranded items):
     * all of them, and apart what the heals that healed consumed (`healed`) and what the others did (a key
     * found still busy, a lost race, nothing to heal: `checks`).
     */
    readonly heal: {
        readonly readUnits: number;
        readonly writeUnits: number;
        readonly healed: { readonly readUnits: number; readonly writeUnits: number };
        readonly checks: { readonly count: number; readonly readUnits: number; readonly writeUnits: number };
    };
    readonly audit: { readonly round: number; readonly segmentsDone: number; readonly totalSegments: number };
}

/** One settler run. Throws only when the heal index or the cursor cannot be read at all. */
export async function settle(options: SettleOptions): Promise<SettleReport> {
    const meter = meterCapacity(options.dynamodb);
    try {
        return await settleMetered(options, meter);
    } finally {
        meter.detach();
    }
}

async function settleMetered(options: SettleOptions, meter: Meter): Promise<SettleReport> {
    const { config, dynamodb } = options;
    const now = (options.now ?? Date.now)();
    const budget = options.keyBudget ?? SETTLER_DEFAULTS.keyBudget;
    const shards = shardCount(config);
    const { keys: indexed, exhausted } = await dueKeys(
        dynamodb,
        countersTable(config),
        config,
        now - options.quietWindowMs,
        budget,
        shards,
    );

    const segments = options.auditSegments ?? SETTLER_DEFAULTS.auditSegments;
    const audit =
        segments > 0
            ? await auditStep(dynamodb, config, segments, options.auditPageSize ?? SETTLER_DEFAULTS.auditPageSize)
            : { keys: [], round: 0, segmentsDone: 0, totalSegments: 0 };
    const fromAudit = audit.keys.filter((key) => !indexed.includes(key));

    const settleKey =
        options.settleKey ?? ((key: string) => reconcileKey(key, { config, dynamodb, fatal: options.fatal, sink: options.sink }));
    const heals: HealResult[] = [];
    const failedKeys: string[] = [];
    let settleFound = 0;
    let settleCounted = 0;
    await forEachLimited([...indexed, ...fromAudit], options.concurrency ?? SETTLER_DEFAULTS.concurrency, async (key) => {
        // Settled first: reconcile purges a late put of a removed life that its marker shows (markers.ts), so the heal
        // that follows does not count it as live (counted, it would leave best-effort one above the live items until
        // the heal the purge's mark asks for). A key whose settle failed is not healed in this run, for the same
        // reason: it stays on the heal index (only a heal's write takes it off), or the audit meets it again. A settle
        // ends once what its first read found is settled (reconcile.ts): a late put it could not recognise then is the
        // consumer's to remove, and the removal marks the key, as header (d) of heal.ts describes.
        try {
            const settled = await settleKey(key);
            settleFound += settled.found;
            settleCounted += settled.counted;
            if (settled.incomplete) {
                failedKeys.push(key);
                return;
            }
        } catch {
            failedKeys.push(key);
            return;
        }
        try {
            const heal = await healKey(key, options);
            heals.push(heal);
            if (indexed.includes(key)) {
                for (const shard of shardResults(heal)) {
                    if (shard.reason === "quiet-window" && shard.writtenAt !== undefined) {
                        await deferBusy(dynamodb, config, shardPartitionKey(key, shard.shard), shard.writtenAt);
                    }
                }
            }
        } catch {
            failedKeys.push(key);
        }
    });

    const healed = heals.filter((h) => h.outcome === "healed");
    // Per best-effort item: a sharded key's heal is one per shard.
    const items = heals.flatMap(shardResults);
    const written = items.filter((h) => h.outcome === "healed");
    const skipped: Partial<Record<HealSkipReason, number>> = {};
    for (const h of items) {
        if (h.reason !== undefined) {
            skipped[h.reason] = (skipped[h.reason] ?? 0) + 1;
        }
    }
    return {
        keysFromIndex: indexed.length,
        keysFromAudit: fromAudit.length,
        healed: written.length,
        corrected: written.filter((h) => h.after !== h.before).length,
        drift: written.reduce((sum, h) => sum + Math.abs((h.after ?? 0) - (h.before ?? 0)), 0),
        raced: items.filter((h) => h.outcome === "raced").length,
        skipped,
        settleFound,
        settleCounted,
        failedKeys: failedKeys.sort(),
        budgetExhausted: exhausted,
        readUnits: meter.read,
        writeUnits: meter.write,
        heal: {
            ...capacityOf(heals),
            healed: capacityOf(healed),
            checks: { count: heals.length - healed.length, ...capacityOf(heals.filter((h) => h.outcome !== "healed")) },
        },
        audit: { round: audit.round, segmentsDone: audit.segmentsDone, totalSegments: audit.totalSegments },
    };
}

/** What a heal did to each best-effort item of its key: its shards', or the key's own (shard 0). */
function shardResults(heal: HealResult): ShardHealResult[] {
    if (heal.shards !== undefined) {
        return [...heal.shards];
    }
    const { key: _key, readUnits: _read, ...only } = heal;
    return [{ shard: 0, ...only }];
}

function capacityOf(heals: readonly HealResult[]): { readUnits: number; writeUnits: number } {
    return { readUnits: heals.reduce((n, h) => n + h.readUnits, 0), writeUnits: heals.reduce((n, h) => n + h.writeUnits, 0) };
}

/**
 * The keys the heal index lists as due (`hc_due_at` at or before `cutoff`): the `budget` oldest across every shard.
 * `hc_due_at` is the first client write since the key's last heal (best-effort-marks.ts), moved to its last write
 * when a run finds the key still busy (deferBusy). With `counterShards` above 1 an entry is a shard item's: its
 * partition key is mapped back to its key, and a key's due time is its oldest entry's.
 *
 * Fairness: each shard's oldest `budget` entries are read (one Query per shard, in parallel) and merged by due
 * time, so a run takes the globally oldest due keys. A key that became due after a run has a due time later than
 * every key that run left due (it was not due then; a deferred key's new due time is a write inside the window), so
 * a backlog of B due keys is served before any later arrival and heals within ceil(B / budget) runs, whichever
 * shards the arrivals land in (a key whose heal fails stays listed, at its place). Reading shard by shard in order
 * let steady arrivals in low shards starve the high ones.
 */
export async function dueKeys(
    dynamodb: DynamoDBClient,
    tableName: string,
    layout: CounterTableLayout & { readonly regions?: RegionsConfig },
    cutoff: number,
    budget: number,
    counterShards = 1,
): Promise<{ keys: string[]; exhausted: boolean }> {
    // A key has up to `counterShards` entries: its `budget` oldest keys lie within each index shard's budget * N
    // oldest entries (fewer than `budget` keys are older than any of them, each with at most N entries before it).
    const shards = await Promise.all(
        Array.from({ length: HEAL_SHARDS }, (_, shard) =>
            oldestDue(dynamodb, tableName, layout, healShardValue(shard, layout), cutoff, budget * counterShards, counterShards),
        ),
    );
    return mergeOldest(shards, budget);
}

/**
 * A key the index listed as due but whose last write is inside the window: its due time moves to that write, so
 * that it comes due again when it can be quiet, behind the backlog, instead of taking a slot of every run's budget.
 * Conditional on the entry still being there (a heal since removed it) and moving forward only.
 */
async function deferBusy(
    dynamodb: DynamoDBClient,
    config: CounterTableLayout & { countersTableName?: string; tableName: string },
    partitionKey: string,
    writtenAt: number,
): Promise<void> {
    try {
        await dynamodb.send(
            new UpdateItemCommand({
                TableName: countersTable(config),
                Key: { [config.partitionKey]: { S: partitionKey }, [config.sortKey]: { S: bestEffortSortKey(config) } },
                UpdateExpression: "SET #due = :at",
                ConditionExpression: "attribute_exists(#heal) AND #due < :at",
                ExpressionAttributeNames: { "#due": A.dueAt, "#heal": A.healShard },
                ExpressionAttributeValues: { ":at": { N: String(writtenAt) } },
            }),
        );
    } catch (error) {
        // Not moved: the key's write time passed it (the condition), or a transaction holds its best-effort item (a
        // strict backfill's, a sharded heal's): the entry stays due where it was, and a later run reads the key again.
        if (!(error instanceof ConditionalCheckFailedException) && !isTransactionConflict(error)) {
            throw error;
        }
    }
}

/** One shard's due entries, oldest first, at most `limit`; `more` when the shard holds others. */
export interface ShardDue {
    readonly entries: ReadonlyArray<{ readonly key: string; readonly dueAt: number }>;
    readonly more: boolean;
}

/** Pure: the `budget` oldest keys of the shards' due entries (ties by key; a key at its oldest entry), and whether any due key was left out. */
export function mergeOldest(shards: readonly ShardDue[], budget: number): { keys: string[]; exhausted: boolean } {
    const all = shards.flatMap((s) => s.entries).sort((a, b) => a.dueAt - b.dueAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const keys = new Set<string>();
    for (const { key } of all) {
        if (keys.has(key)) {
            continue; // another shard's entry of a key taken already
        }
        if (keys.size >= budget) {
            return { keys: [...keys], exhausted: true };
        }
        keys.add(key);
    }
    return { keys: [...keys], exhausted: shards.some((s) => s.more) };
}

async function oldestDue(
    dynamodb: DynamoDBClient,
    tableName: string,
    layout: CounterTableLayout,
    shard: string,
    cutoff: number,
    limit: number,
    counterShards: number,
): Promise<ShardDue> {
    const entries: Array<{ key: string; dueAt: number }> = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await dynamodb.send(
            new QueryCommand({
                TableName: tableName,
                IndexName: HEAL_INDEX_NAME,
                KeyConditionExpression: "#heal = :shard AND #due <= :cutoff",
                ExpressionAttributeNames: { "#heal": A.healShard, "#due": A.dueAt },
                ExpressionAttributeValues: { ":shard": { S: shard }, ":cutoff": { N: String(cutoff) } },
                Limit: limit - entries.length,
                ExclusiveStartKey: start,
            }),
        );
        for (const entry of page.Items ?? []) {
            const partitionKey = entry[layout.partitionKey]?.S;
            const dueAt = Number(entry[A.dueAt]?.N);
            if (partitionKey !== undefined && Number.isFinite(dueAt)) {
                entries.push({ key: shardOfPartitionKey(partitionKey, counterShards).key, dueAt });
            }
        }
        start = page.LastEvaluatedKey;
    } while (start !== undefined && entries.length < limit);
    return { entries, more: start !== undefined };
}

// ------------------------------------------------------------------------------------------ audit

/** Where the audit stands: per segment, the key to resume after (null: from the start; "done": finished). */
export interface AuditCursor {
    readonly round: number;
    readonly positions: Array<Record<string, AttributeValue> | null | "done">;
}

/** Pure: the cursor after one page of each unfinished segment; a round that finishes starts the next. */
export function advanceCursor(
    cursor: AuditCursor,
    pages: ReadonlyArray<Record<string, AttributeValue> | undefined | "skipped">,
): AuditCursor {
    const positions = cursor.positions.map((position, i) => {
        const page = pages[i];
        if (position === "done" || page === "skipped") {
            return position;
        }
        return page === undefined ? ("done" as const) : page;
    });
    if (positions.every((p) => p === "done")) {
        return { round: cursor.round + 1, positions: positions.map(() => null) };
    }
    return { round: cursor.round, positions };
}

const CURSOR_ATTRIBUTE = "hc_cursor";

async function auditStep(
    dynamodb: DynamoDBClient,
    config: SettleOptions["config"],
    segments: number,
    pageSize: number,
): Promise<{ keys: string[]; round: number; segmentsDone: number; totalSegments: number }> {
    const counters = countersTable(config);
    const shards = shardCount(config);
    const cursorKey = {
        [config.partitionKey]: { S: `${config.counterPrefix}settler` },
        [config.sortKey]: { S: settlerCursorSortKey(config) },
    };
    const stored = await dynamodb.send(new GetItemCommand({ TableName: counters, Key: cursorKey, ConsistentRead: true }));
    const version = stored.Item?.[A.version]?.N;
    // One position per segment of each audited table: a changed placement, like a changed segment count, starts over.
    const width = segments * auditedTables(config).length;
    let cursor: AuditCursor = { round: 0, positions: Array.from({ length: width }, () => null) };
    const raw = stored.Item?.[CURSOR_ATTRIBUTE]?.S;
    if (raw !== undefined) {
        const parsed = JSON.parse(raw) as AuditCursor;
        // A changed segment count starts a new round: positions of one segmentation mean nothing in another.
        if (parsed.positions.length === width) {
            cursor = parsed;
        }
    }
    const keys = new Set<string>();
    const tables = auditedTables(config);
    const pages = await Promise.all(
        cursor.positions.map(async (position, i) => {
            if (position === "done") {
                return "skipped" as const;
            }
            const page = await dynamodb.send(
                new ScanCommand({
                    TableName: tables[Math.floor(i / segments)],
                    Segment: i % segments,
                    TotalSegments: segments,
                    Limit: pageSize,
                    ProjectionExpression: "#pk, #sk",
                    ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey },
                    ExclusiveStartKey: position ?? undefined,
                }),
            );
            const counterItems = tables[Math.floor(i / segments)] === counters;
            for (const item of page.Items ?? []) {
                const partitionKey = item[config.partitionKey]?.S;
                const sk = item[config.sortKey]?.S;
                if (partitionKey !== undefined && sk !== undefined && auditsKeyOf(config, sk)) {
                    // A counter item's partition key is one of its key's shards'; a user's item's is the key itself.
                    const key = counterItems ? shardOfPartitionKey(partitionKey, shards).key : partitionKey;
                    if (shardedKeyProblem(key, shards) === undefined) {
                        keys.add(key);
                    }
                }
            }
            return page.LastEvaluatedKey;
        }),
    );
    const next = advanceCursor(cursor, pages);
    try {
        await dynamodb.send(
            new PutItemCommand({
                TableName: counters,
                Item: {
                    ...cursorKey,
                    [CURSOR_ATTRIBUTE]: { S: JSON.stringify(next) },
                    [A.version]: { N: String(Number(version ?? 0) + 1) },
                },
                // Two runs at once: the one that read the older cursor does not move it back.
                ConditionExpression: version === undefined ? "attribute_not_exists(#v)" : "#v = :v",
                ExpressionAttributeNames: { "#v": A.version },
                ...(version === undefined ? {} : { ExpressionAttributeValues: { ":v": { N: version } } }),
            }),
        );
    } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) {
            throw error;
        }
    }
    return {
        keys: [...keys].sort(),
        round: next.round,
        segmentsDone: next.positions.filter((p) => p === "done").length,
        totalSegments: width,
    };
}

/**
 * The tables the audit walks: the user's (a key with items, counted or stranded) and, when the counters live
 * apart, the counters table too (a key whose counters outlived its items: its last item removed by another
 * writer or TTL after the heal index let it go, its removal's record past the stream's retention).
 */
function auditedTables(config: SettleOptions["config"]): string[] {
    const counters = countersTable(config);
    return counters === config.tableName ? [config.tableName] : [config.tableName, counters];
}

/** Whether an item's sort key names a key the audit settles: a resource item, or a key's best-effort or eventual counter. */
function auditsKeyOf(config: SettleOptions["config"], sk: string): boolean {
    return !sk.startsWith(config.counterPrefix) || sk === bestEffortSortKey(config) || sk === eventualSortKey(config);
}

// ------------------------------------------------------------------------------------------ capacity

interface Meter {
    read: number;
    write: number;
    detach(): void;
}

const READ_COMMANDS = new Set(["GetItemCommand", "QueryCommand", "ScanCommand", "BatchGetItemCommand", "TransactGetItemsCommand"]);
let meters = 0;

/**
 * Asks every request of `dynamodb` for its consumed capacity and sums it until detached. Requests other
 * code sends on the same client meanwhile are counted too: give the settler a client of its own.
 */
export function meterCapacity(dynamodb: DynamoDBClient): Meter {
    const name = `hybridCounterCapacityMeter${++meters}`;
    const meter: Meter = {
        read: 0,
        write: 0,
        detach: () => {
            dynamodb.middlewareStack.remove(name);
        },
    };
    // Initialize step: runs once per command, around the SDK's retries, and sees the deserialized output.
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity ??= "TOTAL";
        const result = await next(args);
        const consumed = (result.output as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }).ConsumedCapacity;
        const list = consumed === undefined ? [] : Array.isArray(consumed) ? consumed : [consumed];
        const total = list.reduce((n, c) => n + (c.CapacityUnits ?? 0), 0);
        if (READ_COMMANDS.has(context.commandName ?? "")) {
            meter.read += total;
        } else {
            meter.write += total;
        }
        return result;
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name });
    return meter;
}

async function forEachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
    let next = 0;
    const worker = async () => {
        while (next < items.length) {
            await fn(items[next++]!);
        }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}
