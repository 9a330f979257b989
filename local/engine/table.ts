/** Creates a counter table on DynamoDB Local: string keys per the layout, stream NEW_AND_OLD_IMAGES. */
import {
    CreateTableCommand,
    DescribeTableCommand,
    type AttributeDefinition,
    type DynamoDBClient,
    type GlobalSecondaryIndex,
} from "@aws-sdk/client-dynamodb";
import { DEFAULT_LAYOUT, type CounterTableLayout } from "../../runtime/shared/config";
import { HEAL_DUE, HEAL_INDEX_NAME, HEAL_PARTITION } from "../../runtime/heal/index-marks";

/** Whether the table holds the counter items and so carries the sparse heal index the settler reads. */
export interface TableOptions {
    readonly healIndex?: boolean;
}

/** The heal index as the component declares it: the heal shard and the first client write since the last heal, keys only. */
export function healIndexParts(options: TableOptions): {
    AttributeDefinitions: AttributeDefinition[];
    GlobalSecondaryIndexes?: GlobalSecondaryIndex[];
} {
    if (!options.healIndex) {
        return { AttributeDefinitions: [] };
    }
    return {
        AttributeDefinitions: [
            { AttributeName: HEAL_PARTITION, AttributeType: "S" },
            { AttributeName: HEAL_DUE, AttributeType: "N" },
        ],
        GlobalSecondaryIndexes: [
            {
                IndexName: HEAL_INDEX_NAME,
                KeySchema: [
                    { AttributeName: HEAL_PARTITION, KeyType: "HASH" },
                    { AttributeName: HEAL_DUE, KeyType: "RANGE" },
                ],
                Projection: { ProjectionType: "KEYS_ONLY" },
            },
        ],
    };
}

export async function createCounterTable(
    dynamodb: DynamoDBClient,
    tableName: string,
    layout: Pick<CounterTableLayout, "partitionKey" | "sortKey"> = DEFAULT_LAYOUT,
    streamViewType: "NEW_AND_OLD_IMAGES" | "NEW_IMAGE" | "OLD_IMAGE" | "KEYS_ONLY" = "NEW_AND_OLD_IMAGES",
    options: TableOptions = {},
): Promise<{ streamArn: string }> {
    const index = healIndexParts(options);
    const created = await dynamodb.send(
        new CreateTableCommand({
            TableName: tableName,
            BillingMode: "PAY_PER_REQUEST",
            AttributeDefinitions: [
                { AttributeName: layout.partitionKey, AttributeType: "S" },
                { AttributeName: layout.sortKey, AttributeType: "S" },
                ...index.AttributeDefinitions,
            ],
            ...(index.GlobalSecondaryIndexes ? { GlobalSecondaryIndexes: index.GlobalSecondaryIndexes } : {}),
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
 * string keys, no stream. (DynamoDB Local ignores TTL, so hc_expires is not configured here.)
 */
export async function createCountersTable(
    dynamodb: DynamoDBClient,
    tableName: string,
    layout: Pick<CounterTableLayout, "partitionKey" | "sortKey"> = DEFAULT_LAYOUT,
    options: TableOptions = {},
): Promise<void> {
    const index = healIndexParts(options);
    await dynamodb.send(
        new CreateTableCommand({
            TableName: tableName,
            BillingMode: "PAY_PER_REQUEST",
            AttributeDefinitions: [
                { AttributeName: layout.partitionKey, AttributeType: "S" },
                { AttributeName: layout.sortKey, AttributeType: "S" },
                ...index.AttributeDefinitions,
            ],
            ...(index.GlobalSecondaryIndexes ? { GlobalSecondaryIndexes: index.GlobalSecondaryIndexes } : {}),
            KeySchema: [
                { AttributeName: layout.partitionKey, KeyType: "HASH" },
                { AttributeName: layout.sortKey, KeyType: "RANGE" },
            ],
        }),
    );
}
