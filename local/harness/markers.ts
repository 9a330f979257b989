/** Reads what backfill and the consumer keep for one key in the counters table: both counters and the markers. */
import { QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { COUNTER_ATTRIBUTES, bestEffortSortKey, eventualSortKey, type CounterTableLayout } from "../../runtime/shared/config";
import { hasBackfillUnit } from "../../runtime/shared/strict-ledger";

export interface CounterItems {
    readonly eventual: number;
    readonly bestEffort: number;
    /** Markers with hc_state = "counted". */
    readonly countedMarkers: number;
    /** Markers with hc_be = true. */
    readonly bestEffortMarkers: number;
    /** Every marker, by item id. */
    readonly markers: Map<string, Record<string, AttributeValue>>;
}

export async function readCounterItems(
    reader: DynamoDBClient,
    countersTableName: string,
    layout: CounterTableLayout,
    key: string,
): Promise<CounterItems> {
    let eventual = 0;
    let bestEffort = 0;
    let countedMarkers = 0;
    let bestEffortMarkers = 0;
    const markers = new Map<string, Record<string, AttributeValue>>();
    const markerPrefix = `${layout.counterPrefix}item#`;
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await reader.send(
            new QueryCommand({
                TableName: countersTableName,
                ConsistentRead: true,
                KeyConditionExpression: "#pk = :key AND begins_with(#sk, :prefix)",
                ExpressionAttributeNames: { "#pk": layout.partitionKey, "#sk": layout.sortKey },
                ExpressionAttributeValues: { ":key": { S: key }, ":prefix": { S: layout.counterPrefix } },
                ExclusiveStartKey: start,
            }),
        );
        for (const item of page.Items ?? []) {
            const sk = item[layout.sortKey]!.S!;
            if (sk === eventualSortKey(layout)) {
                eventual = Number(item[layout.countAttribute]?.N ?? 0);
            } else if (sk === bestEffortSortKey(layout)) {
                bestEffort = Number(item[layout.countAttribute]?.N ?? 0);
            } else if (sk.startsWith(markerPrefix)) {
                markers.set(sk.slice(markerPrefix.length), item);
                if (item[COUNTER_ATTRIBUTES.state]?.S === "counted") {
                    countedMarkers++;
                }
                if (hasBackfillUnit(item)) {
                    bestEffortMarkers++;
                }
            }
        }
        start = page.LastEvaluatedKey;
    } while (start);
    return { eventual, bestEffort, countedMarkers, bestEffortMarkers, markers };
}
