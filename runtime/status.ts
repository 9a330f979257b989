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
 */
import { QueryCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { bestEffortSortKey, eventualSortKey, type CounterTableConfig, type CounterTableLayout } from "./config";

/** How the counting model sees one resource item. */
export type ItemState =
    /** Live and counted by the eventual counter. */
    | "counted"
    /** Live, not yet counted: its creation record has not been counted (or was lost past retention). */
    | "pending-create"
    /** Soft-deleted, not yet removed: its deletion has not been counted. */
    | "pending-delete"
    /** A flag the consumer cannot read (not a boolean): it will never be counted automatically. */
    | "malformed";

/**
 * The counting model, in one function: an item is counted when its processed flag is true, pending
 * while the flag is false or the item is soft-deleted, malformed when a flag is not a boolean.
 */
export function itemState(item: Record<string, AttributeValue>, layout: CounterTableLayout): ItemState {
    const processed = item[layout.processedAttribute];
    const deleted = item[layout.deletedAttribute];
    if (processed?.BOOL === undefined || (deleted !== undefined && deleted.BOOL === undefined)) {
        return "malformed";
    }
    if (deleted?.BOOL === true) {
        return "pending-delete";
    }
    return processed.BOOL ? "counted" : "pending-create";
}

export interface KeyStatus {
    readonly key: string;
    readonly bestEffort: number;
    readonly eventual: number;
    /** Items that exist and are not soft-deleted: the true count. */
    readonly live: number;
    /** Live items whose creation is not counted yet. */
    readonly pendingCreates: number;
    /** Soft-deleted items whose deletion is not counted yet. */
    readonly pendingDeletes: number;
    /** Items with a flag that is not a boolean. */
    readonly malformed: number;
    /** best-effort above live: slots reserved by strict mode with no item behind them. */
    readonly heldSlots: number;
    /** eventual minus live: 0 when the eventual counter is right. */
    readonly drift: number;
    /** eventual == live and nothing pending or malformed. */
    readonly exact: boolean;
}

interface Tally {
    bestEffort: number;
    eventual: number;
    live: number;
    pendingCreates: number;
    pendingDeletes: number;
    malformed: number;
}

const emptyTally = (): Tally => ({ bestEffort: 0, eventual: 0, live: 0, pendingCreates: 0, pendingDeletes: 0, malformed: 0 });

/** Adds one item of a key's partition to its tally. Pure. */
export function tallyItem(tally: Tally, item: Record<string, AttributeValue>, layout: CounterTableLayout): void {
    const sk = item[layout.sortKey]?.S;
    if (sk === bestEffortSortKey(layout)) {
        tally.bestEffort = Number(item[layout.countAttribute]?.N ?? 0);
        return;
    }
    if (sk === eventualSortKey(layout)) {
        tally.eventual = Number(item[layout.countAttribute]?.N ?? 0);
        return;
    }
    if (sk === undefined || sk.startsWith(layout.counterPrefix)) {
        return;
    }
    const state = itemState(item, layout);
    if (state === "malformed") {
        tally.malformed++;
        if (item[layout.deletedAttribute]?.BOOL !== true) {
            tally.live++;
        }
        return;
    }
    if (state === "pending-delete") {
        tally.pendingDeletes++;
        return;
    }
    tally.live++;
    if (state === "pending-create") {
        tally.pendingCreates++;
    }
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

/** Reads one key's partition with strongly consistent Queries. */
export async function readKeyStatus(key: string, { config, dynamodb }: StatusOptions): Promise<KeyStatus> {
    const tally = emptyTally();
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await dynamodb.send(
            new QueryCommand({
                TableName: config.tableName,
                ConsistentRead: true,
                KeyConditionExpression: "#pk = :key",
                ExpressionAttributeNames: { "#pk": config.partitionKey },
                ExpressionAttributeValues: { ":key": { S: key } },
                ExclusiveStartKey: start,
            }),
        );
        for (const item of page.Items ?? []) {
            tallyItem(tally, item, config);
        }
        start = page.LastEvaluatedKey;
    } while (start);
    return keyStatus(key, tally);
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
    const tallies = new Map<string, Tally>();
    const segments = options.segments ?? 4;
    await Promise.all(
        Array.from({ length: segments }, async (_, segment) => {
            let start: Record<string, AttributeValue> | undefined;
            do {
                options.signal?.throwIfAborted();
                const page = await dynamodb.send(
                    new ScanCommand({
                        TableName: config.tableName,
                        Segment: segment,
                        TotalSegments: segments,
                        ConsistentRead: true,
                        ExclusiveStartKey: start,
                    }),
                );
                for (const item of page.Items ?? []) {
                    const key = item[config.partitionKey]?.S;
                    if (key === undefined) {
                        continue;
                    }
                    let tally = tallies.get(key);
                    if (!tally) {
                        tally = emptyTally();
                        tallies.set(key, tally);
                    }
                    tallyItem(tally, item, config);
                }
                options.onPage?.(page.Items?.length ?? 0);
                start = page.LastEvaluatedKey;
            } while (start);
        }),
    );
    return summarize(
        [...tallies].map(([key, t]) => keyStatus(key, t)),
        options.limit ?? 20,
    );
}
