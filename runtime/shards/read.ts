/**
 * Reading a key's two counters across its shards: the only way in, so no reader forgets a shard.
 *
 * Each shard's best-effort item and eventual partial sit next to each other in sort-key order
 * (`best-effort` < `eventual` < `item#...`), so one strongly consistent Query per shard reads both for 1 RCU
 * (both items together under 4 KB). The shards' Queries are sent at once: one round trip, one read unit per shard.
 * The sums are the key's counters: each shard counts the items homed there (layout.ts).
 */
import { QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { bestEffortSortKey, countersTable, eventualSortKey, type CounterTableConfig } from "../shared/config";
import { shardCount, shardPartitionKey } from "./layout";

/** One shard's counter items as read (absent items read as undefined). */
export interface ShardCounters {
    readonly shard: number;
    /** The shard's counters-table partition key. */
    readonly partitionKey: string;
    readonly bestEffort?: Record<string, AttributeValue>;
    readonly eventual?: Record<string, AttributeValue>;
}

/** A key's counters: the sums, and each shard's items. */
export interface KeyCounters {
    readonly bestEffort: number;
    readonly eventual: number;
    readonly shards: readonly ShardCounters[];
}

/** The count a counter item holds (0 for an absent item). */
export function countOf(config: Pick<CounterTableConfig, "countAttribute">, item: Record<string, AttributeValue> | undefined): number {
    return Number(item?.[config.countAttribute]?.N ?? "0");
}

/**
 * Reads every shard's best-effort item and eventual partial of `key`, strongly consistent, one Query per shard
 * sent at once. `attributes` limits what is read of each item (the sort key is always read); all when absent.
 * Throws the first Query's DynamoDB error, unchanged.
 */
export async function readKeyCounters(
    dynamodb: DynamoDBClient,
    config: CounterTableConfig,
    key: string,
    attributes?: readonly string[],
): Promise<KeyCounters> {
    const beSortKey = bestEffortSortKey(config);
    const evSortKey = eventualSortKey(config);
    const names: Record<string, string> = { "#pk": config.partitionKey, "#sk": config.sortKey };
    attributes?.forEach((attribute, i) => (names[`#a${i}`] = attribute));
    const projection = attributes === undefined ? undefined : ["#sk", ...attributes.map((_, i) => `#a${i}`)].join(", ");
    const shards = await Promise.all(
        Array.from({ length: shardCount(config) }, async (_, shard): Promise<ShardCounters> => {
            const partitionKey = shardPartitionKey(key, shard);
            const response = await dynamodb.send(
                new QueryCommand({
                    TableName: countersTable(config),
                    ConsistentRead: true,
                    KeyConditionExpression: "#pk = :key AND #sk BETWEEN :be AND :ev",
                    ExpressionAttributeNames: names,
                    ExpressionAttributeValues: { ":key": { S: partitionKey }, ":be": { S: beSortKey }, ":ev": { S: evSortKey } },
                    ...(projection === undefined ? {} : { ProjectionExpression: projection }),
                }),
            );
            const items = response.Items ?? [];
            return {
                shard,
                partitionKey,
                bestEffort: items.find((item) => item[config.sortKey]?.S === beSortKey),
                eventual: items.find((item) => item[config.sortKey]?.S === evSortKey),
            };
        }),
    );
    return {
        bestEffort: shards.reduce((sum, shard) => sum + countOf(config, shard.bestEffort), 0),
        eventual: shards.reduce((sum, shard) => sum + countOf(config, shard.eventual), 0),
        shards,
    };
}
