/**
 * Other writers: another service's plain writes to the user's table, and the table's TTL. None goes through the client,
 * none carries the counted flag, and each may end a client life (a delete, a flip out of the selection, a token
 * rewritten): what the bounds allow for (model.ts).
 */
import { DeleteItemCommand, PutItemCommand, UpdateItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { ACTIVE, STATUS_ATTRIBUTE, type FuzzEvent } from "./history";
import type { FuzzSystem } from "./system";

export type OtherEvent = Extract<FuzzEvent, { op: "otherPut" | "otherDelete" | "otherFlip" | "otherRetoken" | "otherGrow" | "ttlDelete" }>;

/** What another writer grows an item by: with the item's own attributes, a few hundred bytes under 400 KB. */
const GROWTH = "x".repeat(399_500);

/** Sends one other writer's write (`rewrite` numbers a token rewrite within the run); false when it was not served (DynamoDB's answer after the SDK's retries). */
export async function otherWrite(dynamodb: DynamoDBClient, system: FuzzSystem, event: OtherEvent, rewrite: number): Promise<boolean> {
    const { tableName, partitionKey, sortKey, tokenAttribute } = system.config;
    const Key = { [partitionKey]: { S: event.key }, [sortKey]: { S: event.id } };
    try {
        switch (event.op) {
            case "otherPut":
                await dynamodb.send(
                    new PutItemCommand({
                        TableName: tableName,
                        Item: {
                            ...Key,
                            ...(system.config.selection.kind === "attribute" ? { [STATUS_ATTRIBUTE]: { S: ACTIVE } } : {}),
                            source: { S: "another-service" },
                        },
                    }),
                );
                return true;
            case "otherDelete":
            case "ttlDelete":
                await dynamodb.send(new DeleteItemCommand({ TableName: tableName, Key }));
                return true;
            case "otherFlip":
                await dynamodb.send(
                    new UpdateItemCommand({
                        TableName: tableName,
                        Key,
                        UpdateExpression: "SET #status = :status",
                        ConditionExpression: "attribute_exists(#pk)",
                        ExpressionAttributeNames: { "#status": STATUS_ATTRIBUTE, "#pk": partitionKey },
                        ExpressionAttributeValues: { ":status": { S: event.status } },
                    }),
                );
                return true;
            case "otherGrow":
                await dynamodb.send(
                    new UpdateItemCommand({
                        TableName: tableName,
                        Key,
                        UpdateExpression: "SET #pad = :pad",
                        ConditionExpression: "attribute_exists(#pk)",
                        ExpressionAttributeNames: { "#pad": "pad", "#pk": partitionKey },
                        ExpressionAttributeValues: { ":pad": { S: GROWTH } },
                    }),
                );
                return true;
            case "otherRetoken":
                // A token that is no client's (not a UUIDv7): the item is no client life any more.
                await dynamodb.send(
                    new UpdateItemCommand({
                        TableName: tableName,
                        Key,
                        UpdateExpression: "SET #token = :token",
                        ConditionExpression: "attribute_exists(#token)",
                        ExpressionAttributeNames: { "#token": tokenAttribute },
                        ExpressionAttributeValues: { ":token": { S: `another-service-${rewrite}` } },
                    }),
                );
                return true;
        }
    } catch (error) {
        if ((error as Error).name === "ConditionalCheckFailedException") {
            return true;
        }
        return false;
    }
}
