/**
 * The client's writes to resource items: the conditional put of a new item and the soft delete.
 *
 * Every write stores a per-call token, so a retry after a lost response recognises its own earlier
 * commit ("mine") instead of taking it for another caller's item ("taken") or a vanished one ("gone").
 * These writes are safe to repeat, so they are retried (SDK retries plus the client's own attempts).
 */
import {
    ConditionalCheckFailedException,
    GetItemCommand,
    PutItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { randomUUID } from "node:crypto";
import type { CounterTableConfig } from "./config";
import { isRetryable } from "./counting";
import { withRetries } from "./retry";

/** A resource item ready to put, with the token that marks this call's write. */
export interface ResourceItem {
    readonly item: Record<string, AttributeValue>;
    readonly token: string;
}

/** "mine": this call's write committed. "taken": another write owns the item. "gone": no such item (life). */
export type WriteOutcome = "mine" | "taken" | "gone";

export class ResourceWriter {
    constructor(
        private readonly config: CounterTableConfig,
        private readonly dynamodb: DynamoDBClient,
        private readonly attempts: number,
        private readonly deleteTokenAttribute: string,
    ) {}

    /** Builds the item for `id` under `key` from already-marshalled caller attributes. */
    item(key: string, id: string, extra: Record<string, AttributeValue>): ResourceItem {
        const { partitionKey, sortKey, processedAttribute, tokenAttribute } = this.config;
        const token = randomUUID();
        return {
            token,
            item: {
                ...extra,
                [partitionKey]: { S: key },
                [sortKey]: { S: id },
                [processedAttribute]: { BOOL: false },
                [tokenAttribute]: { S: token },
            },
        };
    }

    /** Puts the item if absent. True when this call wrote it, recognised by its token after an SDK retry. */
    async put({ item, token }: ResourceItem): Promise<boolean> {
        const { tableName, partitionKey } = this.config;
        const outcome = await this.writeWithToken(
            () =>
                this.dynamodb.send(
                    new PutItemCommand({
                        TableName: tableName,
                        Item: item,
                        ConditionExpression: "attribute_not_exists(#pk)",
                        ExpressionAttributeNames: { "#pk": partitionKey },
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    }),
                ),
            this.config.tokenAttribute,
            token,
        );
        return outcome === "mine";
    }

    /**
     * Reads the item before a delete. Undefined when it is missing or already deleted; otherwise the
     * creation token that names this life of the id (null for an item written without one).
     */
    async liveToken(key: string, id: string): Promise<string | null | undefined> {
        const { tableName, deletedAttribute, tokenAttribute } = this.config;
        const response = await withRetries(
            () =>
                this.dynamodb.send(
                    new GetItemCommand({
                        TableName: tableName,
                        Key: this.key(key, id),
                        ConsistentRead: true,
                        ProjectionExpression: "#deleted, #token",
                        ExpressionAttributeNames: { "#deleted": deletedAttribute, "#token": tokenAttribute },
                    }),
                ),
            isRetryable,
            this.attempts,
        );
        if (response.Item === undefined || response.Item[deletedAttribute]?.BOOL === true) {
            return undefined;
        }
        return response.Item[tokenAttribute]?.S ?? null;
    }

    /**
     * Sets `deleted = true` on the life of the id that was read (`createToken`), if it is not deleted.
     * The delete's own token goes to a separate attribute, so the creation token is never overwritten: a
     * retry after a lost response recognises this call's write, and can never soft-delete a newer item
     * that reused the id.
     */
    async softDelete(key: string, id: string, createToken: string | null): Promise<WriteOutcome> {
        const { tableName, partitionKey, deletedAttribute, tokenAttribute } = this.config;
        const token = randomUUID();
        return this.writeWithToken(
            () =>
                this.dynamodb.send(
                    new UpdateItemCommand({
                        TableName: tableName,
                        Key: this.key(key, id),
                        UpdateExpression: "SET #deleted = :true, #deleteToken = :token",
                        ConditionExpression:
                            "attribute_exists(#pk) AND (attribute_not_exists(#deleted) OR #deleted = :false) AND " +
                            (createToken === null ? "attribute_not_exists(#createToken)" : "#createToken = :createToken"),
                        ExpressionAttributeNames: {
                            "#pk": partitionKey,
                            "#deleted": deletedAttribute,
                            "#deleteToken": this.deleteTokenAttribute,
                            "#createToken": tokenAttribute,
                        },
                        ExpressionAttributeValues: {
                            ":true": { BOOL: true },
                            ":false": { BOOL: false },
                            ":token": { S: token },
                            ...(createToken === null ? {} : { ":createToken": { S: createToken } }),
                        },
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    }),
                ),
            this.deleteTokenAttribute,
            token,
            { attribute: tokenAttribute, value: createToken },
        );
    }

    /**
     * Sends a conditional write that stores `token`, retrying what is safe to retry. "mine": it
     * committed, possibly on an attempt whose response was lost (the stored token is ours). "taken":
     * the condition failed on an item another write owns. "gone": the condition failed on no item, or
     * on a newer life of the id than `lifeToken` names.
     */
    private async writeWithToken(
        send: () => Promise<unknown>,
        tokenAttribute: string,
        token: string,
        lifeToken?: { attribute: string; value: string | null },
    ): Promise<WriteOutcome> {
        return withRetries(
            async () => {
                try {
                    await send();
                    return "mine";
                } catch (error) {
                    if (error instanceof ConditionalCheckFailedException) {
                        const item = error.Item;
                        if (item === undefined) {
                            return "gone";
                        }
                        if (item[tokenAttribute]?.S === token) {
                            return "mine";
                        }
                        if (lifeToken !== undefined && (item[lifeToken.attribute]?.S ?? null) !== lifeToken.value) {
                            return "gone";
                        }
                        return "taken";
                    }
                    throw error;
                }
            },
            isRetryable,
            this.attempts,
        );
    }

    private key(key: string, sk: string): Record<string, AttributeValue> {
        return { [this.config.partitionKey]: { S: key }, [this.config.sortKey]: { S: sk } };
    }
}
