/** A table holding both resource items and counter items, with the sparse GSI "heal-index" (same-table placement). */
import { CreateTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { COUNTER_ATTRIBUTES as A, DEFAULT_LAYOUT, HEAL_INDEX_NAME } from "../runtime/config";

export async function createCountersTableWithIndex(dynamodb: DynamoDBClient, tableName: string): Promise<void> {
    await dynamodb.send(
        new CreateTableCommand({
            TableName: tableName,
            BillingMode: "PAY_PER_REQUEST",
            AttributeDefinitions: [
                { AttributeName: DEFAULT_LAYOUT.partitionKey, AttributeType: "S" },
                { AttributeName: DEFAULT_LAYOUT.sortKey, AttributeType: "S" },
                { AttributeName: A.healShard, AttributeType: "S" },
                { AttributeName: A.writtenAt, AttributeType: "N" },
            ],
            KeySchema: [
                { AttributeName: DEFAULT_LAYOUT.partitionKey, KeyType: "HASH" },
                { AttributeName: DEFAULT_LAYOUT.sortKey, KeyType: "RANGE" },
            ],
            GlobalSecondaryIndexes: [
                {
                    IndexName: HEAL_INDEX_NAME,
                    KeySchema: [
                        { AttributeName: A.healShard, KeyType: "HASH" },
                        { AttributeName: A.writtenAt, KeyType: "RANGE" },
                    ],
                    Projection: { ProjectionType: "KEYS_ONLY" },
                },
            ],
        }),
    );
}
