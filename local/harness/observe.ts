/** Observes one counter key: both counters, its markers and its items. */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { queryPartition } from "../../runtime/heal/partition";
import {
    COUNTER_ATTRIBUTES,
    MARKER_STATE,
    bestEffortSortKey,
    eventualSortKey,
    markerId,
    type CounterTableLayout,
} from "../../runtime/shared/config";
import { isLive, isSelected, isSoftDeleted } from "../../runtime/shared/selection";
import { shardPartitionKey } from "../../runtime/shards/layout";

export interface KeySnapshot {
    readonly bestEffort: number;
    readonly eventual: number;
    /** Items the selection counts that are not soft-deleted: the true count. */
    readonly live: number;
    /** Markers whose state is "counted" (the eventual counter's invariant: eventual == counted). */
    readonly counted: number;
    /** Selected items that are soft-deleted and not yet removed. */
    readonly softDeleted: number;
}

/** A snapshot with what only some checks need. */
export interface KeyObservation extends KeySnapshot {
    /** Of `live`, the items the client wrote (they carry its token): the ones best-effort covers. */
    readonly clientLive: number;
    /** Query pages it took. */
    readonly pages: number;
    /** Per shard of the key's counting (one entry when unsharded): its best-effort, eventual partial and counted markers. */
    readonly shards: ReadonlyArray<{ readonly bestEffort: number; readonly eventual: number; readonly counted: number }>;
}

/**
 * Reads a key's partition with strongly consistent Queries: in the user's table, and in the counters
 * table when it is another one. In the same-table placement, when the partition fits one page (1 MB),
 * the counters and the items are one observation; `pages` says how many reads it took. A sharded key's
 * counting is read shard by shard (`counterShards` partitions of the counters table, runtime/shards/layout.ts).
 */
export async function snapshotKey(
    reader: DynamoDBClient,
    tableName: string,
    layout: CounterTableLayout,
    key: string,
    countersTableName: string = tableName,
    counterShards = 1,
): Promise<KeyObservation> {
    let bestEffort = 0;
    let eventual = 0;
    let live = 0;
    let counted = 0;
    let softDeleted = 0;
    let clientLive = 0;
    let pages = 0;
    const shards = Array.from({ length: counterShards }, () => ({ bestEffort: 0, eventual: 0, counted: 0 }));
    // The user's partition, and each shard's partition of the counters table (shard 0 is the key's own).
    const partitions: Array<{ table: string; key: string; shard?: number }> =
        countersTableName === tableName
            ? [{ table: tableName, key, shard: 0 }]
            : [
                  ...shards.map((_, shard) => ({ table: countersTableName, key: shardPartitionKey(key, shard), shard })),
                  { table: tableName, key },
              ];
    // Counts the pages as they are sent.
    const send = <T>(request: () => Promise<T>): Promise<T> => {
        pages++;
        return request();
    };
    for (const partition of partitions) {
        const table = partition.table;
        const items = await queryPartition(reader, { tableName: table, partitionKey: layout.partitionKey, key: partition.key }, { send });
        const shard = partition.shard === undefined ? undefined : shards[partition.shard]!;
        for (const item of items) {
            const sk = item[layout.sortKey]?.S ?? "";
            if (shard !== undefined && sk.startsWith(layout.counterPrefix)) {
                if (sk === bestEffortSortKey(layout)) {
                    shard.bestEffort = Number(item[layout.countAttribute]?.N ?? 0);
                    bestEffort += shard.bestEffort;
                } else if (sk === eventualSortKey(layout)) {
                    shard.eventual = Number(item[layout.countAttribute]?.N ?? 0);
                    eventual += shard.eventual;
                } else if (markerId(layout, sk) !== undefined && item[COUNTER_ATTRIBUTES.state]?.S === MARKER_STATE.counted) {
                    shard.counted++;
                    counted++;
                }
            } else if (table === tableName && partition.key === key) {
                if (isLive(item, layout)) {
                    live++;
                    if (item[layout.tokenAttribute] !== undefined) {
                        clientLive++;
                    }
                } else if (isSelected(item, layout) && isSoftDeleted(item, layout)) {
                    softDeleted++;
                }
            }
        }
    }
    return { bestEffort, eventual, live, counted, softDeleted, clientLive, pages, shards };
}
