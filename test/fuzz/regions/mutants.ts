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
type Input = { TransactItems?: Array<{ Update?: { UpdateExpression?: string; ExpressionAttributeValues?: Record<string, AttributeValue> } }> };

export const REGIONS_MUTANTS: Readonly<Record<string, RegionsMutantSpec>> = {
    regionRaisesAlone: {
        description: "a region takes a cap of the whole limit without looking at the others",
        mutate: (region) => {
            const stack = region.api.middlewareStack as unknown as Stack;
            stack.add(
                (next: (args: { input: Input }) => Promise<unknown>, context: { commandName?: string }) => async (args: { input: Input }) => {
                    if (context.commandName === "TransactWriteItemsCommand") {
                        for (const item of args.input.TransactItems ?? []) {
                            const update = item.Update;
                            if ((update?.UpdateExpression ?? "").startsWith("SET #rtag = :tag, #rcap = :cap")) {
                                const limit = Number(update!.ExpressionAttributeValues![":tag"]!.S!.split("|")[0]);
                                update!.ExpressionAttributeValues![":cap"] = { N: String(limit) };
                            }
                        }
                    }
                    return next(args);
                },
                { step: "initialize", name: "mutantRegionRaisesAlone" },
            );
            return () => void stack.remove("mutantRegionRaisesAlone");
        },
    },
};
