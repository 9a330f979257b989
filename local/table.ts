/** Creates a counter table on DynamoDB Local: string keys per the layout, stream NEW_AND_OLD_IMAGES. */
import { CreateTableCommand, DescribeTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DEFAULT_LAYOUT, type CounterTableLayout } from "../runtime/config";

export async function createCounterTable(
    dynamodb: DynamoDBClient,
    tableName: string,
    layout: Pick<CounterTableLayout, "partitionKey" | "sortKey"> = DEFAULT_LAYOUT,
    streamViewType: "NEW_AND_OLD_IMAGES" | "NEW_IMAGE" | "OLD_IMAGE" | "KEYS_ONLY" = "NEW_AND_OLD_IMAGES",
): Promise<{ streamArn: string }> {
    const created = await dynamodb.send(
        new CreateTableCommand({
            TableName: tableName,
            BillingMode: "PAY_PER_REQUEST",
            AttributeDefinitions: [
                { AttributeName: layout.partitionKey, AttributeType: "S" },
                { AttributeName: layout.sortKey, AttributeType: "S" },
            ],
            KeySchema: [
                { AttributeName: layout.partitionKey, KeyType: "HASH" },
                { AttributeName: layout.sortKey, KeyType: "RANGE" },
            ],
            StreamSpecification: { StreamEnabled: true, StreamViewType: streamViewType },
        }),
    );
    const streamArn =
        created.TableDescription?.LatestStreamArn ??
        (await dynamodb.send(new DescribeTableCommand({ TableName: tableName }))).Table?.LatestStreamArn;
    if (!streamArn) {
        throw new Error(`table ${tableName} has no stream`);
    }
    return { streamArn };
}

/**
 * Creates the counters table the component creates beside the user's (placement "separate"): the same
 * string keys, no stream. (DynamoDB Local ignores TTL, so hc_expires_at is not configured here.)
 */
export async function createCountersTable(
    dynamodb: DynamoDBClient,
    tableName: string,
    layout: Pick<CounterTableLayout, "partitionKey" | "sortKey"> = DEFAULT_LAYOUT,
): Promise<void> {
    await dynamodb.send(
        new CreateTableCommand({
            TableName: tableName,
            BillingMode: "PAY_PER_REQUEST",
            AttributeDefinitions: [
                { AttributeName: layout.partitionKey, AttributeType: "S" },
                { AttributeName: layout.sortKey, AttributeType: "S" },
            ],
            KeySchema: [
                { AttributeName: layout.partitionKey, KeyType: "HASH" },
                { AttributeName: layout.sortKey, KeyType: "RANGE" },
            ],
        }),
    );
}
