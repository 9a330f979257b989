/**
 * Which late put attempts the consumer counted. A put attempt held past its call (history.ts, `late`) that lands after
 * its life was removed is one the consumer removes when the id's marker names the life (runtime/stream/markers.ts);
 * when the marker does not, the consumer counts it as a new life (docs/limits.md), and it is a live item from then on.
 * The marker may not name it because another client life of the id was put since (run.ts sees that from the puts), or
 * because the batch that showed the life ended with another writer's replacement of its item, so its marker write
 * carried no life: seen here, from the transaction that counted the attempt's INSERT.
 */
import { GetItemCommand, type DynamoDBClient, type TransactWriteItemsCommandInput } from "@aws-sdk/client-dynamodb";
import { queryPartition } from "../../runtime/heal/partition";
import { COUNTER_ATTRIBUTES, MARKER_STATE, countersTable, markerSortKey } from "../../runtime/shared/config";
import { isLive } from "../../runtime/shared/selection";
import { markerShard, shardOfPartitionKey, shardPartitionKey } from "../../runtime/shards/layout";
import { shardsOf, type FuzzSystem } from "./adapter";
import type { StreamMapping } from "./mapping";
import type { Released } from "./scheduler";

/**
 * The lives whose INSERT a served transaction counted, where that INSERT is not the life's first in the stream: a late
 * attempt of the life, counted as new.
 */
export function countedLateInserts(
    request: Released,
    system: FuzzSystem,
    mapping: Pick<StreamMapping, "firstInsertOf" | "ordinal">,
): Array<{ key: string; life: string }> {
    if (request.command !== "TransactWriteItemsCommand" || !request.served || request.outcome?.error !== undefined) {
        return [];
    }
    const { config } = system;
    const actions = (request.input as unknown as TransactWriteItemsCommandInput).TransactItems ?? [];
    return actions.flatMap((action) => {
        const values = action.Update?.ExpressionAttributeValues;
        const life = values?.[":insertedLife"]?.S;
        const seq = values?.[":insertedSeq"]?.S;
        const partition = action.Update?.Key?.[config.partitionKey]?.S;
        if (life === undefined || seq === undefined || partition === undefined || values?.[":target"]?.S !== "counted") {
            return [];
        }
        const first = mapping.firstInsertOf(config.tokenAttribute, life);
        const place = mapping.ordinal(seq);
        return first !== undefined && place !== undefined && place > first
            ? [{ key: shardOfPartitionKey(partition, shardsOf(system)).key, life }]
            : [];
    });
}

/**
 * The late put attempts among `tokens` that are live in `key`'s partition and that a heal may count (docs/limits.md):
 * the ones the settler's reconcile, run before its heal, cannot recognise and purge. It recognises one whose marker
 * shows its life counted and then uncounted by stream records (the consumer has read the removal); it recognises none
 * under an attribute selection, where a marker does not tell a removed life from one moved out of the selection.
 */
export async function lateItemsAHealMayCount(
    reader: DynamoDBClient,
    system: FuzzSystem,
    key: string,
    tokens: ReadonlySet<string> | undefined,
): Promise<string[]> {
    if (tokens === undefined || tokens.size === 0) {
        return [];
    }
    const { config } = system;
    const items = await queryPartition(reader, { tableName: config.tableName, partitionKey: config.partitionKey, key });
    const late = items.filter((item) => isLive(item, config) && tokens.has(item[config.tokenAttribute]?.S ?? ""));
    const counted: string[] = [];
    for (const item of late) {
        const token = item[config.tokenAttribute]!.S!;
        const id = item[config.sortKey]!.S!;
        const { Item: marker } = await reader.send(
            new GetItemCommand({
                TableName: countersTable(config),
                Key: {
                    [config.partitionKey]: { S: shardPartitionKey(key, markerShard(id, shardsOf(system))) },
                    [config.sortKey]: { S: markerSortKey(config, id) },
                },
                ConsistentRead: true,
            }),
        );
        const removalRead =
            marker?.[COUNTER_ATTRIBUTES.life]?.S === token &&
            marker[COUNTER_ATTRIBUTES.lifeSeq]?.S !== undefined &&
            marker[COUNTER_ATTRIBUTES.state]?.S === MARKER_STATE.uncounted;
        if (config.selection.kind === "attribute" || !removalRead) {
            counted.push(token);
        }
    }
    return counted;
}
