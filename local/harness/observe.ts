/** Observes one counter key: both counters, and its items in the user's table. */
import { QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../../runtime/shared/config";
import { readKeyCounters } from "../../runtime/client/read";
import { isCounted, isLive, isSelected, isSoftDeleted } from "../../runtime/shared/selection";
import { numberOf } from "../../runtime/shared/keys";
import { homeShard, shardCount } from "../../runtime/shards/layout";

export interface KeySnapshot {
    readonly bestEffort: number;
    readonly eventual: number;
    /** Items the selection counts that are live (selected, owned, not soft-deleted): the true count. */
    readonly live: number;
    /** Live items carrying the counter's counted flag: what eventual counts once the stream has drained. */
    readonly counted: number;
    /** Selected items that are soft-deleted and not yet removed (tombstones). */
    readonly softDeleted: number;
}

/** A snapshot with what only some checks need. */
export interface KeyObservation extends KeySnapshot {
    /** Of `live`, the items the client wrote (they carry its token): the ones best-effort covers. */
    readonly clientLive: number;
    /** Query pages it took. */
    readonly pages: number;
    /** Per shard of the key's best-effort (one entry when unsharded): its count, and the live items homed there. */
    readonly shards: ReadonlyArray<{ readonly bestEffort: number; readonly live: number }>;
}

/**
 * Reads a key with strongly consistent Queries: its counters first (one Query per shard, runtime/client/read.ts), then
 * its partition of the user's table. The two reads are two instants: a call of the key in flight between them may
 * show (local/harness/calls.ts says by how much).
 */
export async function snapshotKey(reader: DynamoDBClient, config: CounterConfig, key: string): Promise<KeyObservation> {
    const counters = await readKeyCounters(reader, config, key);
    const shards = Array.from({ length: shardCount(config) }, (_, shard) => ({
        bestEffort: numberOf(counters.shards[shard], config.countAttribute),
        live: 0,
    }));
    let live = 0;
    let counted = 0;
    let softDeleted = 0;
    let clientLive = 0;
    let pages = shards.length;
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await reader.send(
            new QueryCommand({
                TableName: config.tableName,
                KeyConditionExpression: "#pk = :pk",
                ExpressionAttributeNames: { "#pk": config.partitionKey },
                ExpressionAttributeValues: { ":pk": { S: key } },
                ConsistentRead: true,
                ...(start === undefined ? {} : { ExclusiveStartKey: start }),
            }),
        );
        pages++;
        for (const item of page.Items ?? []) {
            if (isLive(item, config)) {
                live++;
                counted += isCounted(item, config) ? 1 : 0;
                clientLive += item[config.tokenAttribute]?.S === undefined ? 0 : 1;
                shards[homeShard(item[config.sortKey]?.S ?? "", shards.length)]!.live++;
            } else if (isSelected(item, config) && isSoftDeleted(item, config)) {
                softDeleted++;
            }
        }
        start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return { bestEffort: counters.bestEffort, eventual: counters.eventual, live, counted, softDeleted, clientLive, pages, shards };
}
