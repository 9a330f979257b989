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
}

/**
 * Reads a key's partition with strongly consistent Queries: in the user's table, and in the counters
 * table when it is another one. In the same-table placement, when the partition fits one page (1 MB),
 * the counters and the items are one observation; `pages` says how many reads it took.
 */
export async function snapshotKey(
    reader: DynamoDBClient,
    tableName: string,
    layout: CounterTableLayout,
    key: string,
    countersTableName: string = tableName,
): Promise<KeyObservation> {
    let bestEffort = 0;
    let eventual = 0;
    let live = 0;
    let counted = 0;
    let softDeleted = 0;
    let clientLive = 0;
    let pages = 0;
    const tables = countersTableName === tableName ? [tableName] : [countersTableName, tableName];
    // Counts the pages as they are sent.
    const send = <T>(request: () => Promise<T>): Promise<T> => {
        pages++;
        return request();
    };
    for (const table of tables) {
        const items = await queryPartition(reader, { tableName: table, partitionKey: layout.partitionKey, key }, { send });
        for (const item of items) {
            const sk = item[layout.sortKey]?.S ?? "";
            if (table === countersTableName && sk.startsWith(layout.counterPrefix)) {
                if (sk === bestEffortSortKey(layout)) {
                    bestEffort = Number(item[layout.countAttribute]?.N ?? 0);
                } else if (sk === eventualSortKey(layout)) {
                    eventual = Number(item[layout.countAttribute]?.N ?? 0);
                } else if (markerId(layout, sk) !== undefined && item[COUNTER_ATTRIBUTES.state]?.S === MARKER_STATE.counted) {
                    counted++;
                }
            } else if (table === tableName) {
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
    return { bestEffort, eventual, live, counted, softDeleted, clientLive, pages };
}
