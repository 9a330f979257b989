/**
 * The counters the hybrid is compared with, from AWS's "Implement resource counters with Amazon
 * DynamoDB": approach 1 (atomic counter) and approach 4 (transaction with a client request token).
 * Both keep the count in one item per key, written by the API on the request path.
 */
import {
    ConditionalCheckFailedException,
    DeleteItemCommand,
    PutItemCommand,
    TransactWriteItemsCommand,
    TransactionCanceledException,
    UpdateItemCommand,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { randomUUID } from "node:crypto";
import type { WorkloadTarget } from "../local/harness/workload";

/** The counter item's sort key; the resources share its partition, as in the hybrid. */
export const BASELINE_COUNTER_SK = "#counter#value";

const notUsed = async (): Promise<never> => {
    throw new Error("the baselines are measured without limits");
};

/**
 * Approach 1: PutItem the resource, then UpdateItem ADD on the counter. The SDK retries a 500, so a
 * write that committed before its response was lost is applied again: the counter overcounts.
 */
export function atomicCounter(dynamodb: DynamoDBClient, tableName: string): WorkloadTarget {
    const counter = (key: string, delta: number) =>
        dynamodb.send(
            new UpdateItemCommand({
                TableName: tableName,
                Key: { pk: { S: key }, sk: { S: BASELINE_COUNTER_SK } },
                UpdateExpression: "ADD #count :d",
                ExpressionAttributeNames: { "#count": "count" },
                ExpressionAttributeValues: { ":d": { N: String(delta) } },
            }),
        );
    return {
        async create(key, id, attributes) {
            try {
                await dynamodb.send(
                    new PutItemCommand({
                        TableName: tableName,
                        Item: { pk: { S: key }, sk: { S: id }, payload: { S: String(attributes?.payload ?? "") } },
                        ConditionExpression: "attribute_not_exists(pk)",
                    }),
                );
            } catch (error) {
                if (error instanceof ConditionalCheckFailedException) {
                    return { created: false };
                }
                throw error;
            }
            await counter(key, 1);
            return { created: true };
        },
        async delete(key, id) {
            try {
                await dynamodb.send(
                    new DeleteItemCommand({
                        TableName: tableName,
                        Key: { pk: { S: key }, sk: { S: id } },
                        ConditionExpression: "attribute_exists(pk)",
                    }),
                );
            } catch (error) {
                if (error instanceof ConditionalCheckFailedException) {
                    return { deleted: false };
                }
                throw error;
            }
            await counter(key, -1);
            return { deleted: true };
        },
        tryCreate: notUsed,
    };
}

/**
 * Approach 4: the resource and the counter in one TransactWriteItems with a client request token.
 * SDK retries are idempotent (same token), so the count is exact; but a transaction cancelled by a
 * conflict on the hot counter item is not retried by the SDK and reaches the caller as an error.
 */
export function transactionWithToken(dynamodb: DynamoDBClient, tableName: string): WorkloadTarget {
    const counterUpdate = (key: string, delta: number) => ({
        Update: {
            TableName: tableName,
            Key: { pk: { S: key }, sk: { S: BASELINE_COUNTER_SK } },
            UpdateExpression: "ADD #count :d",
            ExpressionAttributeNames: { "#count": "count" },
            ExpressionAttributeValues: { ":d": { N: String(delta) } },
        },
    });
    const conditionFailed = (error: unknown, index: number) =>
        error instanceof TransactionCanceledException && error.CancellationReasons?.[index]?.Code === "ConditionalCheckFailed";
    return {
        async create(key, id, attributes) {
            try {
                await dynamodb.send(
                    new TransactWriteItemsCommand({
                        ClientRequestToken: randomUUID(),
                        TransactItems: [
                            {
                                Put: {
                                    TableName: tableName,
                                    Item: { pk: { S: key }, sk: { S: id }, payload: { S: String(attributes?.payload ?? "") } },
                                    ConditionExpression: "attribute_not_exists(pk)",
                                },
                            },
                            counterUpdate(key, 1),
                        ],
                    }),
                );
            } catch (error) {
                if (conditionFailed(error, 0)) {
                    return { created: false };
                }
                throw error;
            }
            return { created: true };
        },
        async delete(key, id) {
            try {
                await dynamodb.send(
                    new TransactWriteItemsCommand({
                        ClientRequestToken: randomUUID(),
                        TransactItems: [
                            {
                                Delete: {
                                    TableName: tableName,
                                    Key: { pk: { S: key }, sk: { S: id } },
                                    ConditionExpression: "attribute_exists(pk)",
                                },
                            },
                            counterUpdate(key, -1),
                        ],
                    }),
                );
            } catch (error) {
                if (conditionFailed(error, 0)) {
                    return { deleted: false };
                }
                throw error;
            }
            return { deleted: true };
        },
        tryCreate: notUsed,
    };
}
