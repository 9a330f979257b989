/**
 * Reads every item of one partition key, or of the part under a sort-key prefix, with strongly
 * consistent Query pages: the one partition read that reconciliation and healing share.
 */
import { QueryCommand, type AttributeValue, type DynamoDBClient, type QueryCommandOutput } from "@aws-sdk/client-dynamodb";

export interface PartitionQuery {
    readonly tableName: string;
    readonly partitionKey: string;
    readonly key: string;
    /** Only the items whose sort key begins with `prefix`. */
    readonly under?: { readonly sortKey: string; readonly prefix: string };
}

export interface PartitionReadOptions {
    /** Sends one page's request (for example through retries). @default sends it once */
    readonly send?: (request: () => Promise<QueryCommandOutput>) => Promise<QueryCommandOutput>;
    /** Called with each page; when given, the pages also report their consumed capacity. */
    readonly onPage?: (page: QueryCommandOutput) => void;
}

export async function queryPartition(
    dynamodb: DynamoDBClient,
    query: PartitionQuery,
    options: PartitionReadOptions = {},
): Promise<Array<Record<string, AttributeValue>>> {
    const { tableName, partitionKey, key, under } = query;
    const send = options.send ?? ((request) => request());
    const items: Array<Record<string, AttributeValue>> = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await send(() =>
            dynamodb.send(
                new QueryCommand({
                    TableName: tableName,
                    ConsistentRead: true,
                    KeyConditionExpression: under ? "#pk = :key AND begins_with(#sk, :prefix)" : "#pk = :key",
                    ExpressionAttributeNames: under ? { "#pk": partitionKey, "#sk": under.sortKey } : { "#pk": partitionKey },
                    ExpressionAttributeValues: under ? { ":key": { S: key }, ":prefix": { S: under.prefix } } : { ":key": { S: key } },
                    ExclusiveStartKey: start,
                    ...(options.onPage ? { ReturnConsumedCapacity: "TOTAL" as const } : {}),
                }),
            ),
        );
        options.onPage?.(page);
        items.push(...(page.Items ?? []));
        start = page.LastEvaluatedKey;
    } while (start);
    return items;
}
