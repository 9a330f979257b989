/**
 * Mutants of the heal of a busy key (runtime/heal/heal.ts, "A busy key"), each dropping one condition its argument
 * rests on, for the checker to reject (test/fuzz-busy.test.ts):
 *   - a strict release that lands whatever heal epoch the key is in (the client's), so a release a heal overtook takes
 *     a unit the heal already counted gone;
 *   - a heal that reads no ledger entry (the settler's), so it counts recent lives from the table, missing a
 *     reservation whose put is still in flight;
 *   - a heal that does not see delete claims (the settler's), so it counts a utilization item whose decrement is in
 *     best-effort already and whose soft delete is still to come.
 */
import type { DynamoDBClient, ServiceInputTypes, ServiceOutputTypes, UpdateItemCommandInput } from "@aws-sdk/client-dynamodb";
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
