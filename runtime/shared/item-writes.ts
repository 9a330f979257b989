/**
 * The counter's writes to users' items it did not just create, each conditional on exactly what it expects:
 * - the counted flag (the consumer, the backfill, a reconcile): only on an item still live, selected, this region's
 *   and unflagged (selection.ts), so it never flags what should not count, and the record it makes counts it once;
 * - a tombstone's removal (the consumer, a heal): only of the very soft-deleted life seen (its token and its delete's
 *   token), so a newer life of the id is never removed.
 */
import {
    ConditionalCheckFailedException,
    DeleteItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { deleteTokenAttribute, type CounterConfig } from "./config";
import { flaggableCondition } from "./selection";

/** Flags item `id` of `key`; false when it no longer needs it (gone, deleted, moved, or flagged already). */
export async function flagItem(dynamodb: DynamoDBClient, config: CounterConfig, key: string, id: string): Promise<boolean> {
    const condition = flaggableCondition(config);
    try {
        await dynamodb.send(
            new UpdateItemCommand({
                TableName: config.tableName,
                Key: { [config.partitionKey]: { S: key }, [config.sortKey]: { S: id } },
                UpdateExpression: "SET #selFlag = :selGen",
                ConditionExpression: condition.expression,
                ExpressionAttributeNames: condition.names,
                ExpressionAttributeValues: condition.values,
            }),
        );
        return true;
    } catch (error) {
        if (error instanceof ConditionalCheckFailedException) {
            return false;
        }
        throw error;
    }
}

/** A soft-deleted life, as its tombstone shows it. */
export interface Tombstone {
    readonly id: string;
    readonly token: string | null;
    readonly deleteToken: string | null;
}

/** Removes `tombstone` from `key` if it is still that tombstone; false when it is not (replaced, or gone). */
export async function removeTombstone(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    key: string,
    tombstone: Tombstone,
): Promise<boolean> {
    const names: Record<string, string> = {
        "#deleted": config.deletedAttribute,
        "#token": config.tokenAttribute,
        "#deleteToken": deleteTokenAttribute(config),
    };
    const values: Record<string, AttributeValue> = { ":true": { BOOL: true } };
    const parts = ["#deleted = :true"];
    parts.push(tombstone.token === null ? "attribute_not_exists(#token)" : "#token = :token");
    parts.push(tombstone.deleteToken === null ? "attribute_not_exists(#deleteToken)" : "#deleteToken = :deleteToken");
    if (tombstone.token !== null) {
        values[":token"] = { S: tombstone.token };
    }
    if (tombstone.deleteToken !== null) {
        values[":deleteToken"] = { S: tombstone.deleteToken };
    }
    try {
        await dynamodb.send(
            new DeleteItemCommand({
                TableName: config.tableName,
                Key: { [config.partitionKey]: { S: key }, [config.sortKey]: { S: tombstone.id } },
                ConditionExpression: parts.join(" AND "),
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: values,
            }),
        );
        return true;
    } catch (error) {
        if (error instanceof ConditionalCheckFailedException) {
            return false;
        }
        throw error;
    }
}
