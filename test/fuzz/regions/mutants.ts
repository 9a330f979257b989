/**
 * Mutants of the multi-region path: each undoes a guard of a region's strict caps (runtime/regions/caps.ts), and the
 * multi-region checker must reject it on some seed.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { RegionParties } from "./system";

export interface RegionsMutantSpec {
    readonly description: string;
    /** Adds the rewrite to one region's clients; returns its removal. */
    readonly mutate: (region: RegionParties) => () => void;
}

type Stack = { add: (middleware: unknown, options: { step: "initialize"; name: string }) => void; remove: (name: string) => boolean };
type Input = {
    TransactItems?: Array<{ Update?: { UpdateExpression?: string; ExpressionAttributeValues?: Record<string, AttributeValue> } }>;
};

type TransactItem = NonNullable<Input["TransactItems"]>[number] & {
    Update?: { ConditionExpression?: string; ExpressionAttributeNames?: Record<string, string> };
};

/** Rewrites the Update items of `region`'s API's transactions with `fn`. */
function rewriteTransactions(region: RegionParties, name: string, fn: (update: NonNullable<TransactItem["Update"]>) => void): () => void {
    const stack = region.api.middlewareStack as unknown as Stack;
    stack.add(
        (next: (args: { input: Input }) => Promise<unknown>, context: { commandName?: string }) => async (args: { input: Input }) => {
            if (context.commandName === "TransactWriteItemsCommand") {
                for (const item of (args.input.TransactItems ?? []) as TransactItem[]) {
                    if (item.Update !== undefined) {
                        fn(item.Update);
                    }
                }
            }
            return next(args);
        },
        { step: "initialize", name },
    );
    return () => void stack.remove(name);
}

export const REGIONS_MUTANTS: Readonly<Record<string, RegionsMutantSpec>> = {
    regionCapLeftBehind: {
        description:
            "a region cap's move clears the shards' cap tags but leaves their caps, and re-arming expects no cap: the region never admits again",
        mutate: (region) =>
            rewriteTransactions(region, "mutantRegionCapLeftBehind", (update) => {
                if ((update.UpdateExpression ?? "").includes("REMOVE #ctag, #cap")) {
                    update.UpdateExpression = update.UpdateExpression!.replace("REMOVE #ctag, #cap", "REMOVE #ctag");
                    delete update.ExpressionAttributeNames!["#cap"];
                }
                const condition = update.ConditionExpression ?? "";
                if (condition.includes("attribute_not_exists(#tag)") && condition.includes("#cap = :oldCap")) {
                    update.ConditionExpression = condition.replace("#cap = :oldCap", "attribute_not_exists(#cap)");
                    delete update.ExpressionAttributeValues![":oldCap"];
                }
            }),
    },
    regionRaisesAlone: {
        description: "a region takes a cap of the whole limit without looking at the others",
        mutate: (region) =>
            rewriteTransactions(region, "mutantRegionRaisesAlone", (update) => {
                if ((update.UpdateExpression ?? "").startsWith("SET #rtag = :tag, #rcap = :cap")) {
                    const limit = Number(update.ExpressionAttributeValues![":tag"]!.S!.split("|")[0]);
                    update.ExpressionAttributeValues![":cap"] = { N: String(limit) };
                }
            }),
    },
};
