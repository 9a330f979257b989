/**
 * Status: what an operator needs to know about a counter key, read from the table.
 *
 * Invariant: reading status never writes. A key is exact when its eventual counter equals its live
 * items and nothing is pending; anything else is reported with the number that is off, so an
 * operator can see which keys need `reconcile`.
 *
 * `itemState` is the only place that knows how the counting model marks an item as counted; the
 * rest (per-key tallies, worst-first ordering) is pure and model-free. The adapters read a key's
 * partition (strongly consistent Query) or the whole table (parallel Scan).
 *
 * A sharded key (`counterShards` N > 1, runtime/shards/layout.ts) has its counter items in N partitions of the
 * counters table: its counters are the sums over them, an item's marker is read in its shard
 * (`markerShard(id, N)`), and the status lists each shard: its best-effort, its eventual partial, the live items
 * best-effort accounts for homed there (`homeShard`; carrying the client's token, or flagged by a strict backfill on
 * their marker: what a heal sets that shard's best-effort to, runtime/heal/heal.ts `healCount`), and apart from them
 * the live items of other writers homed there, which the eventual counter counts and no heal does. A partial alone means nothing
 * (the consumer adds each transaction's delta to a partial of its choice): only the sum is compared with the live
 * items. A "counted" marker outside its id's shard holds a counting reconcile undoes: it is a pending delete.
 */
import { QueryCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
    COUNTER_ATTRIBUTES,
    MARKER_STATE,
    bestEffortSortKey,
    countersTable,
    eventualSortKey,
    markerId,
    markerSortKey,
    type CounterTableConfig,
    type CounterTableLayout,
} from "../shared/config";
import { isLive, isSelected } from "../shared/selection";
import { hasBackfillUnit } from "../shared/strict-ledger";
import { homeShard, markerShard, shardCount, shardOfPartitionKey, shardPartitionKeys } from "../shards/layout";

/** How the counting model sees one resource item, given its marker (undefined: none). */
export type ItemState =
    /** Live and counted by the eventual counter. */
    | "counted"
    /** Live, not yet counted: its creation record has not been applied (or was lost past retention, or it predates the backfill). */
    | "pending-create"
    /** Not live (soft-deleted or gone) but still counted, or soft-deleted and not yet removed. */
    | "pending-delete"
    /** A deleted flag that is not a boolean: the item counts as live, but its writer most likely meant something else. */
    | "malformed"
    /** Not a counted resource (another entity, or not selected), and nothing to settle. */
    | "ignored";

/**
 * The counting model, in one function: an item (or its absence) and its marker. A live item is counted
 * when its marker is "counted"; a marker "counted" whose item is not live, or a soft-deleted item still
 * present, is a deletion to settle.
 */
export function itemState(
    item: Record<string, AttributeValue> | undefined,
    marker: Record<string, AttributeValue> | undefined,
    layout: CounterTableLayout,
): ItemState {
    const counted = marker?.[COUNTER_ATTRIBUTES.state]?.S === MARKER_STATE.counted;
    if (item !== undefined && isSelected(item, layout)) {
        const deleted = item[layout.deletedAttribute];
        if (deleted !== undefined && typeof deleted.BOOL !== "boolean") {
            return "malformed";
        }
        if (isLive(item, layout)) {
            return counted ? "counted" : "pending-create";
        }
        return "pending-delete";
    }
    return counted ? "pending-delete" : "ignored";
}

export interface KeyStatus {
    readonly key: string;
    readonly bestEffort: number;
    readonly eventual: number;
    /** Selected items that exist and are not soft-deleted: the true count. */
    readonly live: number;
    /** Live items whose creation is not counted yet. */
    readonly pendingCreates: number;
    /** Counted items that are no longer live, and soft-deleted items not yet removed. */
    readonly pendingDeletes: number;
    /** Items whose deleted flag is not a boolean. */
    readonly malformed: number;
    /** best-effort above live: slots reserved by strict mode with no item behind them. */
    readonly heldSlots: number;
    /** eventual minus live: 0 when the eventual counter is right. */
    readonly drift: number;
    /** eventual == live and nothing pending or malformed. */
    readonly exact: boolean;
    /** A sharded key only: each shard's counters, shard 0 first. */
    readonly shards?: readonly ShardStatus[];
}

/** One shard of a sharded key. */
export interface ShardStatus {
    readonly shard: number;
    /** The shard's best-effort item: the units of the items homed there. */
    readonly bestEffort: number;
    /** The shard's eventual partial (only the sum over shards counts the key). */
    readonly eventual: number;
    /**
     * Live items best-effort accounts for, homed in this shard: carrying the client's token (homed by it), or without
     * one and flagged by a strict backfill on their marker (homed by their id). What a strict heal sets the shard's
     * best-effort to; a utilization heal leaves out those younger than its quiet window.
     */
    readonly homed: number;
    /** Live items of other writers homed in this shard (no client token, no backfill flag): no heal counts them. */
    readonly others: number;
}

interface Tally {
    bestEffort: number;
    eventual: number;
    live: number;
    pendingCreates: number;
    pendingDeletes: number;
    malformed: number;
    shards?: ShardStatus[];
}

const emptyTally = (): Tally => ({ bestEffort: 0, eventual: 0, live: 0, pendingCreates: 0, pendingDeletes: 0, malformed: 0 });

/** A key's rows: its items (user table) and its counter items (counters table) per shard, keyed by sort key. */
interface KeyRows {
    readonly items: Map<string, Record<string, AttributeValue>>;
    /** Shard -> its counter items (an unsharded key's are shard 0's). */
    readonly counters: Map<number, Map<string, Record<string, AttributeValue>>>;
}

const emptyRows = (): KeyRows => ({ items: new Map(), counters: new Map() });

/** Files one row read from either table under its key's rows. Counter rows are those under the prefix, in `shard`. */
function file(rows: KeyRows, item: Record<string, AttributeValue>, layout: CounterTableLayout, shard = 0): void {
    const sk = item[layout.sortKey]?.S;
    if (sk === undefined) {
        return;
    }
    if (!sk.startsWith(layout.counterPrefix)) {
        rows.items.set(sk, item);
        return;
    }
    let counters = rows.counters.get(shard);
    if (counters === undefined) {
        counters = new Map();
        rows.counters.set(shard, counters);
    }
    counters.set(sk, item);
}

/** A key's tally from its rows, under its shard count. Pure. */
export function tallyKey(rows: KeyRows, layout: CounterTableLayout, shards = 1): Tally {
    const tally = emptyTally();
    const count = (shard: number, sk: string): number => Number(rows.counters.get(shard)?.get(sk)?.[layout.countAttribute]?.N ?? 0);
    const perShard = Array.from({ length: shards }, (_, shard) => ({
        shard,
        bestEffort: count(shard, bestEffortSortKey(layout)),
        eventual: count(shard, eventualSortKey(layout)),
        homed: 0,
        others: 0,
    }));
    tally.bestEffort = perShard.reduce((sum, s) => sum + s.bestEffort, 0);
    tally.eventual = perShard.reduce((sum, s) => sum + s.eventual, 0);
    const ids = new Set<string>(rows.items.keys());
    for (const [shard, counters] of rows.counters) {
        for (const [sk, marker] of counters) {
            const id = markerId(layout, sk);
            if (id === undefined) {
                continue;
            }
            if (markerShard(id, shards) === shard) {
                ids.add(id);
            } else if (marker[COUNTER_ATTRIBUTES.state]?.S === MARKER_STATE.counted) {
                tally.pendingDeletes++; // counted outside its id's shard: reconcile uncounts it there
            }
        }
    }
    for (const id of ids) {
        const item = rows.items.get(id);
        const home = markerShard(id, shards);
        const marker = rows.counters.get(home)?.get(markerSortKey(layout, id));
        const state = itemState(item, marker, layout);
        if (item !== undefined && isLive(item, layout)) {
            tally.live++;
            const token = item[layout.tokenAttribute]?.S;
            const shard = perShard[homeShard(id, token, shards)]!;
            // Counted as a heal counts (heal.ts `healCount`): the client's token, or a backfill's flag on the marker.
            if (token !== undefined || hasBackfillUnit(marker)) {
                shard.homed++;
            } else {
                shard.others++;
            }
        }
        if (state === "malformed") {
            tally.malformed++;
        } else if (state === "pending-create") {
            tally.pendingCreates++;
        } else if (state === "pending-delete") {
            tally.pendingDeletes++;
        }
    }
    if (shards > 1) {
        tally.shards = perShard;
    }
    return tally;
}

/** A key's status from its tally. Pure. */
export function keyStatus(key: string, t: Tally): KeyStatus {
    const drift = t.eventual - t.live;
    return {
        key,
        ...t,
        heldSlots: Math.max(0, t.bestEffort - t.live),
        drift,
        exact: drift === 0 && t.pendingCreates === 0 && t.pendingDeletes === 0 && t.malformed === 0,
    };
}

/** How far off a key is, for ordering: drift, pending and malformed items, held slots. */
export function severity(s: KeyStatus): number {
    return Math.abs(s.drift) + s.pendingCreates + s.pendingDeletes + 2 * s.malformed + s.heldSlots;
}

/** Worst keys first; ties by key. Pure. */
export function worstFirst(statuses: readonly KeyStatus[]): KeyStatus[] {
    return [...statuses].sort((a, b) => severity(b) - severity(a) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

export interface StatusOptions {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
}

/**
 * Reads one key's partition in the user's table and every shard's partition in the counters table (one and the same
 * in the same-table placement), with strongly consistent Queries.
 */
export async function readKeyStatus(key: string, { config, dynamodb }: StatusOptions): Promise<KeyStatus> {
    const rows = emptyRows();
    const shards = shardCount(config);
    const counters = countersTable(config);
    const partitions = [
        { tableName: config.tableName, partitionKey: key, shard: 0 },
        ...(counters === config.tableName
            ? []
            : shardPartitionKeys(key, shards).map((partitionKey, shard) => ({ tableName: counters, partitionKey, shard }))),
    ];
    for (const { tableName, partitionKey, shard } of partitions) {
        let start: Record<string, AttributeValue> | undefined;
        do {
            const page = await dynamodb.send(
                new QueryCommand({
                    TableName: tableName,
                    ConsistentRead: true,
                    KeyConditionExpression: "#pk = :key",
                    ExpressionAttributeNames: { "#pk": config.partitionKey },
                    ExpressionAttributeValues: { ":key": { S: partitionKey } },
                    ExclusiveStartKey: start,
                }),
            );
            for (const item of page.Items ?? []) {
                file(rows, item, config, shard);
            }
            start = page.LastEvaluatedKey;
        } while (start);
    }
    return keyStatus(key, tallyKey(rows, config, shards));
}

export interface TableStatus {
    readonly keys: number;
    readonly exactKeys: number;
    readonly totals: Omit<KeyStatus, "key" | "exact">;
    /** Keys that are not exact, worst first, at most `limit`. */
    readonly worst: KeyStatus[];
    /** Every key's status, worst first. */
    readonly all: KeyStatus[];
}

/** Sums statuses into a table-wide summary. Pure. */
export function summarize(statuses: readonly KeyStatus[], limit: number): TableStatus {
    const ordered = worstFirst(statuses);
    const sum = (f: (s: KeyStatus) => number) => statuses.reduce((n, s) => n + f(s), 0);
    return {
        keys: statuses.length,
        exactKeys: statuses.filter((s) => s.exact).length,
        totals: {
            bestEffort: sum((s) => s.bestEffort),
            eventual: sum((s) => s.eventual),
            live: sum((s) => s.live),
            pendingCreates: sum((s) => s.pendingCreates),
            pendingDeletes: sum((s) => s.pendingDeletes),
            malformed: sum((s) => s.malformed),
            heldSlots: sum((s) => s.heldSlots),
            drift: sum((s) => s.drift),
        },
        worst: ordered.filter((s) => !s.exact || s.heldSlots > 0).slice(0, limit),
        all: ordered,
    };
}

/**
 * Reads the whole table with a parallel Scan (not strongly consistent across keys: a table-wide
 * figure of a table being written is a moment per page, not one moment). `onPage` reports progress.
 */
export async function readTableStatus(
    options: StatusOptions & { segments?: number; limit?: number; onPage?: (items: number) => void; signal?: AbortSignal },
): Promise<TableStatus> {
    const { config, dynamodb } = options;
    const rowsByKey = new Map<string, KeyRows>();
    const segments = options.segments ?? 4;
    const shards = shardCount(config);
    const counters = countersTable(config);
    for (const tableName of [...new Set([config.tableName, counters])]) {
        await Promise.all(
            Array.from({ length: segments }, async (_, segment) => {
                let start: Record<string, AttributeValue> | undefined;
                do {
                    options.signal?.throwIfAborted();
                    const page = await dynamodb.send(
                        new ScanCommand({
                            TableName: tableName,
                            Segment: segment,
                            TotalSegments: segments,
                            ConsistentRead: true,
                            ExclusiveStartKey: start,
                        }),
                    );
                    for (const item of page.Items ?? []) {
                        const partitionKey = item[config.partitionKey]?.S;
                        if (partitionKey === undefined) {
                            continue;
                        }
                        // A counters-table partition is one shard of a key; a user's item's partition key is its key.
                        const { key, shard } =
                            tableName === counters ? shardOfPartitionKey(partitionKey, shards) : { key: partitionKey, shard: 0 };
                        let rows = rowsByKey.get(key);
                        if (!rows) {
                            rows = emptyRows();
                            rowsByKey.set(key, rows);
                        }
                        file(rows, item, config, shard);
                    }
                    options.onPage?.(page.Items?.length ?? 0);
                    start = page.LastEvaluatedKey;
                } while (start);
            }),
        );
    }
    const tallies = new Map([...rowsByKey].map(([key, rows]) => [key, tallyKey(rows, config, shards)]));
    return summarize(
        [...tallies].map(([key, t]) => keyStatus(key, t)),
        options.limit ?? 20,
    );
}
