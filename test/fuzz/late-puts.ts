/**
 * Which late put attempts the consumer counted. A put attempt held past its call (history.ts, `late`) that lands after
 * its life was removed is one the consumer removes when the id's marker names the life (runtime/stream/markers.ts);
 * when the marker does not, the consumer counts it as a new life (docs/limits.md), and it is a live item from then on.
 * The marker may not name it because another client life of the id was put since (run.ts sees that from the puts), or
 * because the batch that showed the life ended with another writer's replacement of its item, so its marker write
 * carried no life: seen here, from the transaction that counted the attempt's INSERT.
 */
import type { TransactWriteItemsCommandInput } from "@aws-sdk/client-dynamodb";
import { shardOfPartitionKey } from "../../runtime/shards/layout";
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
