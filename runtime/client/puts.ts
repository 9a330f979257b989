/**
 * The client's writes to resource items: the conditional put of a new life, a utilization delete's claim, and the
 * soft delete. Every write carries a per-call token (UUIDv7), so a repeat after a lost response recognises its own
 * earlier commit ("mine") instead of taking it for another caller's item ("taken") or a vanished one ("gone").
 *
 * The put, and why a repeat never writes a second life:
 * - the put is conditional on no item holding the id, or on the exact soft-deleted item (tombstone) it saw there, so
 *   an attempt that lands late finds the id taken and writes nothing;
 * - a tombstone of a life younger than a put attempt's reach (deadline + a request's lifetime + clock skew) is never
 *   removed (the consumer leaves it to the settler: runtime/stream/effects.ts), so an attempt in doubt that committed
 *   leaves either the live item or its tombstone, both carrying the token;
 * - before repeating after an attempt that may have committed, the client reads the item: its own token (live or
 *   deleted) means "mine"; another life means "taken" (in doubt); nothing means no attempt committed, and the repeat,
 *   conditional on nothing being there, can only be the first life.
 * This adds no new answer and no new error: "mine" after a lost response and "taken" when another item holds the id
 * are what an SDK retry could already give.
 */
import {
    ConditionalCheckFailedException,
    DeleteItemCommand,
    GetItemCommand,
    PutItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { countedFlag } from "../shared/selection";
import { regionAttributeOf, FOREIGN_DELETE_ATTRIBUTE } from "../regions/ownership";
import { isRetryable } from "../shared/aws-errors";
import { DeadlineExceededError } from "../shared/errors";
import { backoff, mayHaveCommitted, sendOnce, withRetries, type CallDeadline } from "../shared/retry";
import { newToken, tokenTime } from "../shared/tokens";
import { stringOf } from "../shared/keys";

/** A resource item ready to put, with the token of the life it creates. */
export interface ResourceItem {
    readonly key: string;
    readonly id: string;
    readonly item: Record<string, AttributeValue>;
    readonly token: string;
}

/** "mine": this call's write committed. "taken": another write owns the item. "gone": no such life. */
export type WriteOutcome = "mine" | "taken" | "gone";

/** The put's answer; `doubt`: some attempt may have committed and the client could not tell. */
export type PutResult =
    | { readonly outcome: "mine" }
    | { readonly outcome: "taken"; readonly doubt: boolean }
    | { readonly outcome: "failed"; readonly error: unknown; readonly doubt: boolean };

/** A resource item as a delete reads it. */
export interface ItemState {
    readonly item: Record<string, AttributeValue>;
    /** The life's token (null: an item written without one). */
    readonly token: string | null;
    readonly deleted: boolean;
}

/** What a repeat must find where the id is: nothing, or the exact tombstone seen there. */
type Expected =
    { readonly kind: "absent" } | { readonly kind: "tombstone"; readonly token: string | null; readonly deleteToken: string | null };

export class ResourceWriter {
    constructor(
        private readonly config: CounterConfig,
        private readonly dynamodb: DynamoDBClient,
        private readonly attempts: number,
        private readonly deleteTokenAttribute: string,
    ) {}

    /** Builds the item for `id` under `key` from already-marshalled caller attributes. */
    item(key: string, id: string, extra: Record<string, AttributeValue>, token = newToken()): ResourceItem {
        const { partitionKey, sortKey, tokenAttribute, selection, regions } = this.config;
        return {
            key,
            id,
            token,
            item: {
                ...extra,
                ...(selection.kind === "attribute" ? { [selection.name]: { S: selection.value } } : {}),
                ...(regions === undefined ? {} : { [regionAttributeOf(this.config)]: { S: regions.current } }),
                ...countedFlag(this.config),
                [partitionKey]: { S: key },
                [sortKey]: { S: id },
                [tokenAttribute]: { S: token },
            },
        };
    }

    /** Puts the life if the id is free (or holds a tombstone); see the header for how a repeat is decided. */
    async put(resource: ResourceItem, deadline: CallDeadline): Promise<PutResult> {
        let expected: Expected = { kind: "absent" };
        let doubt = false;
        let lastError: unknown;
        let moves = 0;
        for (let attempt = 1; attempt <= this.attempts; attempt++) {
            if (attempt > 1 && !(await backoff(attempt - 1, deadline))) {
                break;
            }
            if (doubt) {
                // An earlier attempt may have committed: look before sending again.
                const seen = await this.read(resource.key, resource.id).catch(() => null);
                if (seen === null) {
                    break;
                }
                if (seen?.token === resource.token) {
                    return { outcome: "mine" };
                }
                if (!matches(expected, seen, this.deleteTokenAttribute)) {
                    return { outcome: "taken", doubt };
                }
            }
            if (!deadline.open()) {
                break;
            }
            const sent = await this.sendPut(resource, expected);
            if (sent.kind === "error") {
                lastError = sent.error;
                doubt ||= mayHaveCommitted(sent.error);
                if (!isRetryable(sent.error)) {
                    break;
                }
                continue;
            }
            if (sent.kind !== "moved") {
                return sent.kind === "mine" ? { outcome: "mine" } : { outcome: "taken", doubt };
            }
            // The id holds another tombstone than expected (or none any more): the put is aimed at it, at no attempt's
            // cost, unless an earlier attempt may have committed (the life it made may be the one that moved on).
            if (doubt || ++moves > this.attempts) {
                return { outcome: "taken", doubt };
            }
            expected = sent.expected;
            attempt--;
        }
        return { outcome: "failed", error: lastError ?? new DeadlineExceededError("put", deadline.ms), doubt };
    }

    private async sendPut(
        resource: ResourceItem,
        expected: Expected,
    ): Promise<{ kind: "mine" } | { kind: "taken" } | { kind: "moved"; expected: Expected } | { kind: "error"; error: unknown }> {
        const condition = this.putCondition(expected);
        try {
            await sendOnce(
                this.dynamodb,
                new PutItemCommand({
                    TableName: this.config.tableName,
                    Item: resource.item,
                    ...condition,
                    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                }),
            );
            return { kind: "mine" };
        } catch (error) {
            if (!(error instanceof ConditionalCheckFailedException)) {
                return { kind: "error", error };
            }
            const old = error.Item;
            if (old === undefined) {
                return { kind: "moved", expected: { kind: "absent" } };
            }
            if (stringOf(old, this.config.tokenAttribute) === resource.token) {
                return { kind: "mine" };
            }
            if (old[this.config.deletedAttribute]?.BOOL === true) {
                return { kind: "moved", expected: tombstoneOf(old, this.config.tokenAttribute, this.deleteTokenAttribute) };
            }
            return { kind: "taken" };
        }
    }

    private putCondition(expected: Expected): {
        ConditionExpression: string;
        ExpressionAttributeNames: Record<string, string>;
        ExpressionAttributeValues?: Record<string, AttributeValue>;
    } {
        if (expected.kind === "absent") {
            return { ConditionExpression: "attribute_not_exists(#pk)", ExpressionAttributeNames: { "#pk": this.config.partitionKey } };
        }
        const names = {
            "#deleted": this.config.deletedAttribute,
            "#token": this.config.tokenAttribute,
            "#deleteToken": this.deleteTokenAttribute,
        };
        const values: Record<string, AttributeValue> = { ":true": { BOOL: true } };
        const parts = ["#deleted = :true"];
        parts.push(expected.token === null ? "attribute_not_exists(#token)" : "#token = :token");
        parts.push(expected.deleteToken === null ? "attribute_not_exists(#deleteToken)" : "#deleteToken = :deleteToken");
        if (expected.token !== null) {
            values[":token"] = { S: expected.token };
        }
        if (expected.deleteToken !== null) {
            values[":deleteToken"] = { S: expected.deleteToken };
        }
        return { ConditionExpression: parts.join(" AND "), ExpressionAttributeNames: names, ExpressionAttributeValues: values };
    }

    /** Reads the item (strongly consistent); undefined when the id holds nothing. */
    async read(key: string, id: string): Promise<ItemState | undefined> {
        const response = await withRetries(
            () =>
                this.dynamodb.send(new GetItemCommand({ TableName: this.config.tableName, Key: this.key(key, id), ConsistentRead: true })),
            isRetryable,
            this.attempts,
        );
        const item = response.Item;
        if (item === undefined) {
            return undefined;
        }
        return {
            item,
            token: stringOf(item, this.config.tokenAttribute) ?? null,
            deleted: item[this.config.deletedAttribute]?.BOOL === true,
        };
    }

    /**
     * Utilization mode: claims the delete of the life `createToken` names by storing `claim` as its delete token. It
     * fails ("taken") while another delete's claim is younger than `takeoverAfterMs` or the item is deleted. An older
     * claim was abandoned (its caller sends nothing after its deadline): taking it over can at most decrement twice
     * for one life, which only undercounts.
     */
    async claim(
        key: string,
        id: string,
        createToken: string | null,
        claim: string,
        takeoverAfterMs: number,
        deadline: CallDeadline,
    ): Promise<WriteOutcome> {
        // UUIDv7 text sorts by its leading time: a claim made before `expired`'s time sorts below it.
        const expired = newToken((tokenTime(claim) ?? Date.now()) - takeoverAfterMs).slice(0, 13);
        return this.lifeUpdate(key, id, createToken, {
            update: "SET #deleteToken = :token",
            condition: "(attribute_not_exists(#deleteToken) OR #deleteToken < :expired)",
            values: { ":expired": { S: expired } },
            token: claim,
            deadline,
            operation: "claim",
        });
    }

    /** Gives back a claim whose delete failed before its soft delete committed (never undoes a soft delete). */
    async unclaim(key: string, id: string, claim: string, deadline: CallDeadline): Promise<boolean> {
        try {
            await withRetries(
                () =>
                    sendOnce(
                        this.dynamodb,
                        new UpdateItemCommand({
                            TableName: this.config.tableName,
                            Key: this.key(key, id),
                            UpdateExpression: "REMOVE #deleteToken",
                            ConditionExpression: "#deleteToken = :claim AND (attribute_not_exists(#deleted) OR #deleted = :false)",
                            ExpressionAttributeNames: {
                                "#deleteToken": this.deleteTokenAttribute,
                                "#deleted": this.config.deletedAttribute,
                            },
                            ExpressionAttributeValues: { ":claim": { S: claim }, ":false": { BOOL: false } },
                        }),
                    ),
                isRetryable,
                this.attempts,
                deadline,
                "unclaim",
            );
            return true;
        } catch (error) {
            return error instanceof ConditionalCheckFailedException;
        }
    }

    /**
     * Sets `deleted = true` on the life read (`createToken`), if it is not deleted: with `claim`, only while the claim
     * is still this call's; without, storing a delete token of its own. `deletedIn`: the deleting region, for a life
     * another region owns (runtime/regions/).
     */
    async softDelete(
        key: string,
        id: string,
        createToken: string | null,
        claim: string | undefined,
        deadline: CallDeadline,
        deletedIn?: string,
    ): Promise<WriteOutcome> {
        const foreign =
            deletedIn === undefined
                ? {}
                : {
                      update: ", #deletedIn = :deletedIn",
                      names: { "#deletedIn": FOREIGN_DELETE_ATTRIBUTE },
                      values: { ":deletedIn": { S: deletedIn } },
                  };
        const claimed = claim !== undefined && deletedIn === undefined;
        return this.lifeUpdate(key, id, createToken, {
            update: (claimed ? "SET #deleted = :true" : "SET #deleted = :true, #deleteToken = :token") + (foreign.update ?? ""),
            condition: claimed ? "#deleteToken = :token" : "attribute_exists(#pk)",
            values: { ":true": { BOOL: true }, ...(foreign.values ?? {}) },
            names: foreign.names,
            token: claimed ? claim! : newToken(),
            deadline,
            operation: "soft delete",
        });
    }

    /**
     * Removes the life read, as another writer's delete would: only for an item another writer grew until the soft
     * delete's attributes no longer fit under DynamoDB's 400 KB. With `claim`, only while the claim is this call's.
     */
    async remove(
        key: string,
        id: string,
        createToken: string | null,
        claim: string | undefined,
        deadline: CallDeadline,
    ): Promise<WriteOutcome> {
        const life = this.liveLife(createToken);
        const names: Record<string, string> = { ...life.names };
        const values: Record<string, AttributeValue> = { ...life.values };
        let condition = life.condition;
        if (claim !== undefined) {
            names["#deleteToken"] = this.deleteTokenAttribute;
            values[":claim"] = { S: claim };
            condition += " AND #deleteToken = :claim";
        }
        const attempt = async (): Promise<WriteOutcome> => {
            try {
                await sendOnce(
                    this.dynamodb,
                    new DeleteItemCommand({
                        TableName: this.config.tableName,
                        Key: this.key(key, id),
                        ConditionExpression: condition,
                        ExpressionAttributeNames: names,
                        ExpressionAttributeValues: values,
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    }),
                );
                return "mine";
            } catch (error) {
                if (error instanceof ConditionalCheckFailedException) {
                    return error.Item === undefined || (stringOf(error.Item, this.config.tokenAttribute) ?? null) !== createToken
                        ? "gone"
                        : "taken";
                }
                throw error;
            }
        };
        return withRetries(attempt, isRetryable, this.attempts, deadline, "remove");
    }

    /**
     * An update of the live life `createToken` names, recognised by `token` in the delete token attribute, repeated
     * while safe: "mine" (it committed, maybe on an attempt whose answer was lost), "taken" (another write owns the
     * item or it is deleted), "gone" (no item, or a newer life of the id).
     */
    private async lifeUpdate(
        key: string,
        id: string,
        createToken: string | null,
        write: {
            readonly update: string;
            readonly condition: string;
            readonly values: Record<string, AttributeValue>;
            readonly names?: Record<string, string>;
            readonly token: string;
            readonly deadline: CallDeadline;
            readonly operation: string;
        },
    ): Promise<WriteOutcome> {
        const life = this.liveLife(createToken);
        const command = new UpdateItemCommand({
            TableName: this.config.tableName,
            Key: this.key(key, id),
            UpdateExpression: write.update,
            ConditionExpression: `${life.condition} AND ${write.condition}`,
            ExpressionAttributeNames: { ...(write.names ?? {}), ...life.names, "#deleteToken": this.deleteTokenAttribute },
            ExpressionAttributeValues: { ":token": { S: write.token }, ...write.values, ...life.values },
            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        });
        const attempt = async (): Promise<WriteOutcome> => {
            try {
                await sendOnce(this.dynamodb, command);
                return "mine";
            } catch (error) {
                if (!(error instanceof ConditionalCheckFailedException)) {
                    throw error;
                }
                const item = error.Item;
                if (item === undefined || (stringOf(item, this.config.tokenAttribute) ?? null) !== createToken) {
                    return "gone";
                }
                // Only this call stores `token`: finding it means an earlier attempt of this write committed.
                return stringOf(item, this.deleteTokenAttribute) === write.token ? "mine" : "taken";
            }
        };
        return withRetries(attempt, isRetryable, this.attempts, write.deadline, write.operation);
    }

    /** The condition every write of one life carries: it exists, is not deleted, and is the life `createToken` names. */
    private liveLife(createToken: string | null): {
        condition: string;
        names: Record<string, string>;
        values: Record<string, AttributeValue>;
    } {
        const { partitionKey, deletedAttribute, tokenAttribute } = this.config;
        return {
            condition:
                "attribute_exists(#pk) AND (attribute_not_exists(#deleted) OR #deleted = :false) AND " +
                (createToken === null ? "attribute_not_exists(#createToken)" : "#createToken = :createToken"),
            names: { "#pk": partitionKey, "#deleted": deletedAttribute, "#createToken": tokenAttribute },
            values: { ":false": { BOOL: false }, ...(createToken === null ? {} : { ":createToken": { S: createToken } }) },
        };
    }

    private key(key: string, id: string): Record<string, AttributeValue> {
        return { [this.config.partitionKey]: { S: key }, [this.config.sortKey]: { S: id } };
    }
}

function tombstoneOf(item: Record<string, AttributeValue>, tokenAttribute: string, deleteTokenAttribute: string): Expected {
    return { kind: "tombstone", token: stringOf(item, tokenAttribute) ?? null, deleteToken: stringOf(item, deleteTokenAttribute) ?? null };
}

/** Whether the id holds what a put aimed at `expected` may land on: nothing, or that very tombstone. */
function matches(expected: Expected, seen: ItemState | undefined, deleteTokenAttribute: string): boolean {
    if (expected.kind === "absent") {
        return seen === undefined;
    }
    return (
        seen !== undefined &&
        seen.deleted &&
        seen.token === expected.token &&
        (stringOf(seen.item, deleteTokenAttribute) ?? null) === expected.deleteToken
    );
}
