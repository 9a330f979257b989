/**
 * Mutants for the checker: middleware that rewrites one command's input on its way to DynamoDB Local, so
 * that the system under test is the one the package ships but for the change the mutant makes. The mutants that
 * reverse the sharded bound's and the marker bound's fixes live here, shared by their DynamoDB Local tests and the
 * checker's (test/fuzz-paths.test.ts).
 */
import type {
    DeleteItemCommandInput,
    DynamoDBClient,
    PutItemCommandInput,
    ServiceInputTypes,
    ServiceOutputTypes,
    TransactWriteItemsCommandInput,
    UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import { DynamoDBServiceException } from "@aws-sdk/client-dynamodb";
import { DISARM_CLAUSE } from "../../runtime/shards/quotas";
import { COUNTER_ATTRIBUTES } from "../../runtime/shared/config";
import { headroomOf, PAYLOAD_ATTRIBUTE } from "./big-items";

const WRITTEN_AT = COUNTER_ATTRIBUTES.writtenAt;
import type { InitializeMiddleware } from "@smithy/types";

/** Adds middleware to `client` that rewrites the input of every `command` it sends. */
export function rewrite<I>(client: DynamoDBClient, command: string, change: (input: I) => void): void {
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === command) {
            change(args.input as I);
        }
        return next(args);
    };
    client.middlewareStack.add(middleware, { step: "initialize", name: `fuzzMutant:${command}` });
}

/** Mutant: a strict backfill adds units to a sharded key without disarming its stored quotas. */
export function backfillKeepsQuotas(dynamodb: DynamoDBClient): void {
    rewrite<TransactWriteItemsCommandInput>(dynamodb, "TransactWriteItemsCommand", (input) => {
        input.TransactItems = input.TransactItems!.filter((action) => action.Update?.UpdateExpression !== DISARM_CLAUSE);
        for (const action of input.TransactItems) {
            const update = action.Update;
            if (update?.UpdateExpression?.endsWith(` ${DISARM_CLAUSE}`)) {
                update.UpdateExpression = update.UpdateExpression.slice(0, -DISARM_CLAUSE.length - 1);
                delete update.ExpressionAttributeNames!["#quotaLimit"];
                delete update.ExpressionAttributeNames!["#quota"];
            }
        }
    });
}

/** Mutant: a heal that raises a shard of a sharded key leaves the stored quotas armed. */
export function healKeepsQuotas(dynamodb: DynamoDBClient): void {
    rewrite<TransactWriteItemsCommandInput>(dynamodb, "TransactWriteItemsCommand", (input) => {
        input.TransactItems = input.TransactItems!.filter((action) => action.Update?.UpdateExpression !== DISARM_CLAUSE);
        for (const action of input.TransactItems) {
            const update = action.Update!;
            update.UpdateExpression = update
                .UpdateExpression!.replace(", #quotaLimit, #quota", "")
                .replace(" REMOVE #quotaLimit, #quota", "");
            delete update.ExpressionAttributeNames!["#quotaLimit"];
            delete update.ExpressionAttributeNames!["#quota"];
        }
    });
}

/** Mutant: a shard admits on its stored quota whatever limit it was stored for (the call's limit is not compared). */
export function quotaOfAnyLimit(dynamodb: DynamoDBClient): void {
    rewrite<UpdateItemCommandInput>(dynamodb, "UpdateItemCommand", (input) => {
        if (input.ConditionExpression?.startsWith("#quotaLimit = :limit AND ")) {
            input.ConditionExpression = input.ConditionExpression.replace(
                "#quotaLimit = :limit AND ",
                "attribute_exists(#quotaLimit) AND ",
            );
            delete input.ExpressionAttributeValues![":limit"];
        }
    });
}

/** Mutant: the take of a young life's release also leaves one attribute per life, as earlier versions did. */
export function markPerLife(dynamodb: DynamoDBClient): void {
    rewrite<UpdateItemCommandInput>(dynamodb, "UpdateItemCommand", (input) => {
        const token = input.ExpressionAttributeValues?.[":released"]?.S;
        if (input.UpdateExpression?.startsWith("SET #released = :released") === true && token !== undefined) {
            input.UpdateExpression = input.UpdateExpression.replace(
                "SET #released = :released",
                "SET #released = :released, #trace = :released",
            );
            input.ExpressionAttributeNames!["#trace"] = `hc_trace_${token}`;
        }
    });
}

/**
 * Mutant: the client leaves no room on an item for its own later writes (validation.ts `checkItemSize` without its
 * headroom): an item put with the big-items payload (big-items.ts) takes `headroom` more bytes, so the largest item it
 * accepts is at DynamoDB's limit, and the soft delete's flag and token no longer fit.
 */
export function itemWithoutHeadroom(dynamodb: DynamoDBClient): void {
    const headroom = headroomOf();
    rewrite<PutItemCommandInput>(dynamodb, "PutItemCommand", (input) => {
        const payload = input.Item?.[PAYLOAD_ATTRIBUTE]?.S;
        if (payload !== undefined && payload.length > 1024) {
            input.Item![PAYLOAD_ATTRIBUTE] = { S: payload + "p".repeat(headroom) };
        }
    });
}

/**
 * Mutant: a client delete that gives up on an item another writer grew past the room of its soft delete (the client
 * before runtime/client/client.ts `endLife`): the removal it sends instead fails as the soft delete did, with DynamoDB's
 * ValidationException, so the API's caller gets an error for an item it may delete, and the life stays.
 */
export function oversizedDeleteThrows(dynamodb: DynamoDBClient): void {
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        const condition = (args.input as DeleteItemCommandInput).ConditionExpression ?? "";
        if (context.commandName === "DeleteItemCommand" && condition.includes("#deleted = :false")) {
            throw new DynamoDBServiceException({
                name: "ValidationException",
                message: "Item size to update has exceeded the maximum allowed size",
                $fault: "client",
                $metadata: { httpStatusCode: 400 },
            });
        }
        return next(args);
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name: "fuzzMutant:oversizedDeleteThrows" });
}

/**
 * Mutant: a heal that does not wait for the quiet window (the settler's client): it reads every best-effort item as
 * written long ago, and its write drops the condition on the last client write. It heals a key a client wrote a moment
 * ago, with that client's call still to finish its writes (heal.ts, argument (b)).
 */
export function healIgnoresQuietWindow(dynamodb: DynamoDBClient): void {
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        const dropCondition = (update: {
            ConditionExpression?: string;
            ExpressionAttributeNames?: Record<string, string>;
            ExpressionAttributeValues?: Record<string, unknown>;
            UpdateExpression?: string;
        }) => {
            if (update.ConditionExpression?.includes("#writtenAt <= :cutoff AND ")) {
                update.ConditionExpression = update.ConditionExpression.replace("#writtenAt <= :cutoff AND ", "");
                delete update.ExpressionAttributeValues![":cutoff"];
                if (!`${update.UpdateExpression} ${update.ConditionExpression}`.includes("#writtenAt")) {
                    delete update.ExpressionAttributeNames!["#writtenAt"];
                }
            }
        };
        if (context.commandName === "UpdateItemCommand") {
            dropCondition(args.input as UpdateItemCommandInput);
        } else if (context.commandName === "TransactWriteItemsCommand") {
            for (const action of (args.input as TransactWriteItemsCommandInput).TransactItems ?? []) {
                if (action.Update) {
                    dropCondition(action.Update);
                }
            }
        }
        const result = await next(args);
        const item =
            context.commandName === "GetItemCommand" ? (result.output as { Item?: Record<string, { N?: string }> }).Item : undefined;
        if (item?.[WRITTEN_AT] !== undefined) {
            item[WRITTEN_AT] = { N: "0" };
        }
        return result;
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name: "fuzzMutant:healIgnoresQuietWindow" });
}

/**
 * Mutant: the consumer leaves in the table a late put of a removed life it was to remove (the Delete on the item
 * still holding the life, runtime/stream/markers.ts). Under an attribute selection, one another writer moved out of
 * the selection and back in is then counted.
 */
export function lateItemKept(dynamodb: DynamoDBClient): void {
    rewrite<TransactWriteItemsCommandInput>(dynamodb, "TransactWriteItemsCommand", (input) => {
        input.TransactItems = input.TransactItems!.filter((action) => action.Delete?.ConditionExpression !== "#token = :token");
    });
}

/**
 * Mutant: the consumer and reconcile count a later life of an id and leave the strict backfill's flag (`hc_be`) of the
 * life that ended: the next backfill takes the flag for this life's unit and gives it none (runtime/stream/markers.ts).
 */
export function staleBackfillFlagKept(dynamodb: DynamoDBClient): void {
    rewrite<TransactWriteItemsCommandInput>(dynamodb, "TransactWriteItemsCommand", (input) => {
        for (const action of input.TransactItems!) {
            const update = action.Update;
            if (update?.UpdateExpression?.includes("#exp, #be, #beLife") === true) {
                update.UpdateExpression = update.UpdateExpression.replace("#exp, #be, #beLife", "#exp");
                delete update.ExpressionAttributeNames!["#be"];
                delete update.ExpressionAttributeNames!["#beLife"];
            }
        }
    });
}

/**
 * Mutant: a sharded heal's transaction leaves out the shards it does not write (runtime/heal/heal.ts `writeShards`): a
 * client write to one of them between the heal's read and its write lands beside it.
 */
export function healLeavesEmptyShardsOut(dynamodb: DynamoDBClient): void {
    rewrite<TransactWriteItemsCommandInput>(dynamodb, "TransactWriteItemsCommand", (input) => {
        input.TransactItems = input.TransactItems!.filter(
            (action) => action.ConditionCheck?.ConditionExpression !== "attribute_not_exists(#count)",
        );
        for (const action of input.TransactItems) {
            if (action.Update?.UpdateExpression === DISARM_CLAUSE && action.Update.ConditionExpression === "attribute_not_exists(#count)") {
                delete action.Update.ConditionExpression;
                delete action.Update.ExpressionAttributeNames!["#count"];
            }
        }
    });
}
