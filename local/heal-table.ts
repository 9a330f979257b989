/** A table holding both resource items and counter items, with the sparse GSI "heal-index" (same-table placement). */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createCountersTable } from "./table";

export async function createCountersTableWithIndex(dynamodb: DynamoDBClient, tableName: string): Promise<void> {
    await createCountersTable(dynamodb, tableName, undefined, { healIndex: true });
}
