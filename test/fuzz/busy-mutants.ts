/**
 * Mutants of the heal of a busy key (runtime/heal/heal.ts, "A busy key"), each dropping one condition its argument
 * rests on, for the checker to reject (test/fuzz-busy.test.ts):
 *   - a strict release that lands whatever heal epoch the key is in (the client's), so a release a heal overtook takes
 *     a unit the heal already counted gone;
 *   - a heal that reads no ledger entry (the settler's), so it counts recent lives from the table, missing a
 *     reservation whose put is still in flight;
 *   - a heal that does not see delete claims (the settler's), so it counts a utilization item whose decrement is in
 *     best-effort already and whose soft delete is still to come;
 *   - a heal that lost its race and plans again over an entry that holds its fold boundary (the settler's), so it takes
 *     an old life's write to that period, made since its first read, for a recent life's.
 */
import type {
    DynamoDBClient,
    GetItemCommandInput,
    ServiceInputTypes,
    ServiceOutputTypes,
    TransactWriteItemsCommandInput,
    UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { LEDGER_PREFIX } from "../../runtime/ledger/ledger";
import { rewrite } from "./mutants";

/** Mutant (the client's): a strict release sent without its condition on the heal epoch its touch read. */
export function releaseIgnoresEpoch(dynamodb: DynamoDBClient): void {
    rewrite<UpdateItemCommandInput>(dynamodb, "UpdateItemCommand", (input) => {
        if (input.ConditionExpression?.includes("#epoch = :epoch") === true && input.UpdateExpression?.startsWith("ADD #count") === true) {
            delete input.ConditionExpression;
            delete input.ExpressionAttributeNames!["#epoch"];
            delete input.ExpressionAttributeValues![":epoch"];
        }
    });
}

/** Adds middleware to the settler's client that rewrites every item a read returns to it. */
function rewriteReads(dynamodb: DynamoDBClient, name: string, change: (item: Record<string, unknown>) => void): void {
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        const result = await next(args);
        const output = result.output as { Item?: Record<string, unknown>; Items?: Array<Record<string, unknown>> };
        if (context.commandName === "GetItemCommand" && output.Item !== undefined) {
            change(output.Item);
        }
        if (context.commandName === "QueryCommand") {
            for (const item of output.Items ?? []) {
                change(item);
            }
        }
        return result;
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name: `fuzzMutant:${name}` });
}

/** Mutant (the settler's): a heal that reads no ledger entry, so it counts recent lives from the table. */
export function healWithoutLedger(dynamodb: DynamoDBClient): void {
    rewriteReads(dynamodb, "healWithoutLedger", (item) => {
        for (const name of Object.keys(item)) {
            if (name.startsWith(LEDGER_PREFIX)) {
                delete item[name];
            }
        }
    });
}

/** Mutant (the settler's): a heal that does not see the delete claims on the items it reads. */
export function healIgnoresClaims(dynamodb: DynamoDBClient, tokenAttribute: string): void {
    rewriteReads(dynamodb, "healIgnoresClaims", (item) => {
        delete item[`${tokenAttribute}_delete`];
    });
}

/**
 * Mutant (the settler's): a busy heal that lost its race plans again however the entries it reads again sit around its
 * fold boundary. The heal refuses to when an entry holds the boundary (runtime/heal/heal.ts, `unchangedForReplan`); this
 * middleware hides such an entry from that check alone: on the read that follows a busy heal's failed write, an entry
 * that holds the boundary the write carried is read as starting at the boundary's next second, with its units and its
 * end, which is how the heal counted it before the check (a kept entry).
 */
export function replanOverStraddles(dynamodb: DynamoDBClient): void {
    const raced = new Map<string, number>();
    const keyOf = (key: Record<string, unknown> | undefined) =>
        JSON.stringify(Object.entries(key ?? {}).sort(([a], [b]) => a.localeCompare(b)));
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === "UpdateItemCommand" || context.commandName === "TransactWriteItemsCommand") {
            const updates =
                context.commandName === "UpdateItemCommand"
                    ? [args.input as UpdateItemCommandInput]
                    : (args.input as TransactWriteItemsCommandInput).TransactItems!.flatMap((action) =>
                          action.Update ? [action.Update] : [],
                      );
            const busyHeals = updates.filter(
                (update) =>
                    update.ConditionExpression?.includes("#lv = :version") === true &&
                    update.ExpressionAttributeValues?.[":folded"] !== undefined,
            );
            try {
                return await next(args);
            } catch (error) {
                for (const update of busyHeals) {
                    raced.set(keyOf(update.Key), Number(update.ExpressionAttributeValues![":folded"]!.N));
                }
                throw error;
            }
        }
        const result = await next(args);
        if (context.commandName === "GetItemCommand") {
            const key = keyOf((args.input as GetItemCommandInput).Key);
            const boundary = raced.get(key);
            raced.delete(key);
            const item = (result.output as { Item?: Record<string, unknown> }).Item;
            if (boundary !== undefined && item !== undefined) {
                hideStraddles(item, boundary);
            }
        }
        return result;
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name: "fuzzMutant:replanOverStraddles" });
}

/** Renames every ledger entry of `item` that holds `boundary` to start at the boundary's next second (its units and end kept). */
function hideStraddles(item: Record<string, unknown>, boundary: number): void {
    const from = Math.floor(boundary / 1000) + 1;
    for (const name of Object.keys(item)) {
        const match = new RegExp(`^${LEDGER_PREFIX}(\\d+)_(\\d+)$`).exec(name);
        const start = Number(match?.[1] ?? 0);
        const end = start + Number(match?.[2] ?? 0);
        if (start * 1000 < boundary && boundary < end * 1000 && from < end) {
            item[`${LEDGER_PREFIX}${from}_${end - from}`] = item[name];
            delete item[name];
        }
    }
}
