/**
 * Reading status from the tables (the tallies are status.ts's): one key's partitions by strongly consistent Queries,
 * or every key by a parallel Scan of the user's table and the counters table.
 *
 * Invariant: reads only. A table-wide figure of a table being written is a moment per page, not one moment.
 */
import { ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { KEY_SEPARATOR, shardOfPartitionKey, shardPartitionKey, stringOf } from "../shared/keys";
import { shardCount } from "../shards/layout";
import { parseCounterSortKey, queryCounterItems } from "../client/read";
import { readItems } from "../heal/heal";
import { emptyRows, keyStatus, summarize, type KeyRows, type KeyStatus, type TableStatus } from "./status";

type Item = Record<string, AttributeValue>;

export interface StatusOptions {
    readonly config: CounterConfig;
    readonly dynamodb: DynamoDBClient;
    /** The clock young and old lives are told apart by (epoch ms). @default Date.now */
    readonly now?: () => number;
}

function queryCounters(options: StatusOptions, partition: string): Promise<Item[]> {
    return queryCounterItems(options.dynamodb, options.config, partition);
}

/**
 * One key's status: its items and every shard's counter partition, strongly consistent. With regions, each member
 * region's figures and their sums, as the local replica shows them.
 */
export async function readKeyStatus(key: string, options: StatusOptions): Promise<KeyStatus> {
    const { config } = options;
    const shards = shardCount(config);
    const [items, ...counters] = await Promise.all([
        readItems(key, options),
        ...Array.from({ length: shards }, (_, shard) => queryCounters(options, shardPartitionKey(key, shard))),
    ]);
    const rows: KeyRows = { items, counters: new Map(counters.map((found, shard) => [shard, found])) };
    return keyStatus(key, rows, config, (options.now ?? Date.now)(), true);
}

/** Where a scanned row belongs: a key's item, a key's counter item in a shard, or nowhere (counter-wide items). */
export function rowOf(
    item: Item,
    fromCounters: boolean,
    config: CounterConfig,
): { key: string; kind: "item" } | { key: string; kind: "counter"; shard: number } | undefined {
    const partition = stringOf(item, config.partitionKey);
    const sortKey = stringOf(item, config.sortKey);
    if (partition === undefined || sortKey === undefined) {
        return undefined;
    }
    if (!sortKey.startsWith(config.counterPrefix)) {
        return fromCounters && config.countersTableName !== config.tableName ? undefined : { key: partition, kind: "item" };
    }
    // A key's best-effort, eventual and limit items; not its usage days, nor the counter-wide items.
    if (!fromCounters || parseCounterSortKey(config.counterPrefix, sortKey) === undefined || partition.endsWith(`${KEY_SEPARATOR}u`)) {
        return undefined;
    }
    const { key, shard } = shardOfPartitionKey(partition);
    return { key, kind: "counter", shard };
}

export interface TableStatusOptions extends StatusOptions {
    /** Parallel Scan segments per table. @default 4 */
    readonly segments?: number;
    /** Keys listed as worst. @default 20 */
    readonly limit?: number;
    /** Called after each page with the items it held. */
    readonly onPage?: (items: number) => void;
    /** Stops between pages (throws the signal's reason). */
    readonly signal?: AbortSignal;
}

/** Every key's status in the region the configuration runs as (a parallel Scan of both tables), worst first. */
export async function readTableStatus(options: TableStatusOptions): Promise<TableStatus> {
    const { config } = options;
    const rowsByKey = new Map<string, KeyRows>();
    const file = (item: Item, fromCounters: boolean) => {
        const row = rowOf(item, fromCounters, config);
        if (row === undefined) {
            return;
        }
        let rows = rowsByKey.get(row.key);
        if (rows === undefined) {
            rows = emptyRows();
            rowsByKey.set(row.key, rows);
        }
        if (row.kind === "item") {
            rows.items.push(item);
            return;
        }
        const shard = rows.counters.get(row.shard) ?? [];
        shard.push(item);
        rows.counters.set(row.shard, shard);
    };
    const tables = config.countersTableName === config.tableName ? [config.tableName] : [config.tableName, config.countersTableName];
    for (const tableName of tables) {
        await scanTable(options, tableName, (item) => file(item, tableName === config.countersTableName));
    }
    const now = (options.now ?? Date.now)();
    return summarize(
        [...rowsByKey].map(([key, rows]) => keyStatus(key, rows, config, now)),
        options.limit ?? 20,
    );
}

/** Scans `tableName` in parallel segments, strongly consistent, handing every item to `each`. */
export async function scanTable(
    options: Pick<TableStatusOptions, "dynamodb" | "segments" | "onPage" | "signal">,
    tableName: string,
    each: (item: Item) => void,
    filter?: { expression: string; names: Record<string, string>; values: Record<string, AttributeValue> },
): Promise<void> {
    const segments = options.segments ?? 4;
    await Promise.all(
        Array.from({ length: segments }, async (_, segment) => {
            let start: Item | undefined;
            do {
                options.signal?.throwIfAborted();
                const page = await options.dynamodb.send(
                    new ScanCommand({
                        TableName: tableName,
                        Segment: segment,
                        TotalSegments: segments,
                        ConsistentRead: true,
                        ...(filter === undefined
                            ? {}
                            : {
                                  FilterExpression: filter.expression,
                                  ExpressionAttributeNames: filter.names,
                                  ExpressionAttributeValues: filter.values,
                              }),
                        ...(start === undefined ? {} : { ExclusiveStartKey: start }),
                    }),
                );
                for (const item of page.Items ?? []) {
                    each(item);
                }
                options.onPage?.(page.Items?.length ?? 0);
                start = page.LastEvaluatedKey;
            } while (start !== undefined);
        }),
    );
}
