/** Observes one counter key: both counters and its items, read together. */
import { QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { bestEffortSortKey, eventualSortKey, type CounterTableLayout } from "../runtime/config";

export interface KeySnapshot {
    readonly bestEffort: number;
    readonly eventual: number;
    /** Items that exist and are not soft-deleted: the true count. */
    readonly live: number;
    /** Items whose processed flag is true (the eventual counter's invariant). */
    readonly processed: number;
    readonly softDeleted: number;
}

/**
 * Reads a key's whole partition with strongly consistent Queries. When it fits one page (1 MB), the
 * counters and the items are one observation; `pages` says how many reads it took.
 */
export async function snapshotKey(
    reader: DynamoDBClient,
    tableName: string,
    layout: CounterTableLayout,
    key: string,
): Promise<KeySnapshot & { pages: number }> {
    let bestEffort = 0;
    let eventual = 0;
    let live = 0;
    let processed = 0;
    let softDeleted = 0;
    let pages = 0;
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await reader.send(
            new QueryCommand({
                TableName: tableName,
                ConsistentRead: true,
                KeyConditionExpression: "#pk = :key",
                ExpressionAttributeNames: { "#pk": layout.partitionKey },
                ExpressionAttributeValues: { ":key": { S: key } },
                ExclusiveStartKey: start,
            }),
        );
        pages++;
        for (const item of page.Items ?? []) {
            const sk = item[layout.sortKey]?.S;
            if (sk === bestEffortSortKey(layout)) {
                bestEffort = Number(item[layout.countAttribute]?.N ?? 0);
            } else if (sk === eventualSortKey(layout)) {
                eventual = Number(item[layout.countAttribute]?.N ?? 0);
            } else {
                if (item[layout.deletedAttribute]?.BOOL === true) {
                    softDeleted++;
                } else {
                    live++;
                }
                if (item[layout.processedAttribute]?.BOOL === true) {
                    processed++;
                }
            }
        }
        start = page.LastEvaluatedKey;
    } while (start);
    return { bestEffort, eventual, live, processed, softDeleted, pages };
}
