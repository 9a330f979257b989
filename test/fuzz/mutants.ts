/**
 * Mutants: each undoes one guard of the core (most of them a fix the checker or a review found), by rewriting the
 * requests one party sends or the answers it reads, and the checker must reject it on some seed of its swarm
 * (test/fuzz.test.ts runs each on the seeds it names and requires a violation). A mutant that no seed catches means a
 * guard the checker does not watch.
 *
 * Every rewrite is a middleware on a party's DynamoDB (or Streams) client, added for one run and removed after it.
 */
import { DeleteItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { deleteTokenAttribute } from "../../runtime/shared/config";
import { eventualKey, usagePartitionKey } from "../../runtime/shared/keys";
import { tokenTime } from "../../runtime/shared/tokens";
import type { Run } from "./state";

type Input = {
    TableName?: string;
    KeyConditionExpression?: string;
    Key?: Record<string, AttributeValue>;
    UpdateExpression?: string;
    ConditionExpression?: string;
    ExpressionAttributeNames?: Record<string, string>;
    ExpressionAttributeValues?: Record<string, AttributeValue>;
    Item?: Record<string, AttributeValue>;
    TransactItems?: Array<{ Update?: Input; ConditionCheck?: Input; Put?: Input }>;
};

type Stack = { add: (middleware: unknown, options: { step: "initialize"; name: string }) => void; remove: (name: string) => boolean };

/** Adds a middleware rewriting each request's input (and its output) to `client`; returns its removal. */
function rewrite(
    client: { middlewareStack: unknown },
    name: string,
    input: (command: string, input: Input) => void,
    output?: (command: string, output: Record<string, unknown>) => void,
): () => void {
    const stack = client.middlewareStack as Stack;
    stack.add(
        (next: (args: { input: Input }) => Promise<{ output: Record<string, unknown> }>, context: { commandName?: string }) =>
            async (args: { input: Input }) => {
                input(context.commandName ?? "", args.input);
                const result = await next(args);
                output?.(context.commandName ?? "", result.output);
                return result;
            },
        { step: "initialize", name },
    );
    return () => void stack.remove(name);
}

function sortKey(run: Run, input: Input): string {
    return input.Key?.[run.state.system.config.sortKey]?.S ?? "";
}

function isBestEffort(run: Run, input: Input): boolean {
    return sortKey(run, input).endsWith("best-effort");
}

function isEventual(run: Run, input: Input): boolean {
    return sortKey(run, input).endsWith("eventual");
}

/** Strips a clause from a condition: `X AND clause`, `clause AND X`, or the whole condition. */
function withoutClause(condition: string | undefined, clause: RegExp): string | undefined {
    if (condition === undefined) {
        return undefined;
    }
    const parts = condition.split(" AND ").filter((part) => !clause.test(part));
    return parts.length === 0 ? undefined : parts.join(" AND ");
}

/** Drops the names and values a condition no longer uses (DynamoDB refuses unused ones). */
function prune(input: Input): void {
    const text = `${input.UpdateExpression ?? ""} ${input.ConditionExpression ?? ""}`;
    for (const name of Object.keys(input.ExpressionAttributeNames ?? {})) {
        if (!text.includes(name)) {
            delete input.ExpressionAttributeNames![name];
        }
    }
    for (const value of Object.keys(input.ExpressionAttributeValues ?? {})) {
        if (!new RegExp(`${value}(?![\\w])`).test(text)) {
            delete input.ExpressionAttributeValues![value];
        }
    }
    if (input.ConditionExpression === undefined) {
        delete input.ConditionExpression;
    }
}

export interface MutantSpec {
    readonly description: string;
    readonly mutate: (run: Run) => () => void;
}

export const MUTANTS: Readonly<Record<string, MutantSpec>> = {
    consumerBlindToMarks: {
        description: "the consumer does not see its marks: a redelivered record is applied again",
        mutate: (run) =>
            rewrite(
                run.parties.pipeline,
                "mutantBlindToMarks",
                (command, input) => {
                    if (command === "UpdateItemCommand" && isEventual(run, input) && input.ConditionExpression !== undefined) {
                        input.ConditionExpression = withoutClause(input.ConditionExpression, /#m = :m0|attribute_not_exists\(#m\)/);
                        prune(input);
                    }
                },
                (command, output) => {
                    const strip = (item: Record<string, AttributeValue> | undefined) => {
                        for (const name of Object.keys(item ?? {})) {
                            if (name.startsWith("hc_s_")) {
                                delete item![name];
                            }
                        }
                    };
                    if (command === "GetItemCommand") {
                        strip(output["Item"] as Record<string, AttributeValue> | undefined);
                    }
                    if (command === "BatchGetItemCommand") {
                        for (const items of Object.values(
                            (output["Responses"] ?? {}) as Record<string, Array<Record<string, AttributeValue>>>,
                        )) {
                            items.forEach(strip);
                        }
                    }
                },
            ),
    },
    noSkippedRead: {
        description: "the consumer and the redrive do not re-read the records Lambda gave up on: their marks pass them",
        mutate: (run) =>
            rewrite(
                run.handlerStreams,
                "mutantNoSkippedRead",
                () => undefined,
                (command, output) => {
                    if (command === "GetRecordsCommand") {
                        output["Records"] = [];
                        delete output["NextShardIterator"];
                    }
                },
            ),
    },
    healWriteRepeats: {
        description: "a heal's write does not move the generation: a repeat after a lost answer adds its correction twice",
        mutate: (run) =>
            rewrite(run.parties.settler, "mutantHealWriteRepeats", (command, input) => {
                if (
                    command === "UpdateItemCommand" &&
                    isBestEffort(run, input) &&
                    (input.UpdateExpression ?? "").startsWith("ADD #c :corr, #g :one")
                ) {
                    input.UpdateExpression = input.UpdateExpression!.replace("ADD #c :corr, #g :one", "ADD #c :corr");
                    prune(input);
                }
            }),
    },
    healWithoutGeneration: {
        description: "a heal's write is not conditional on the generation it read: two heals add one difference twice",
        mutate: (run) =>
            rewrite(run.parties.settler, "mutantHealWithoutGeneration", (command, input) => {
                if (
                    command === "UpdateItemCommand" &&
                    isBestEffort(run, input) &&
                    (input.UpdateExpression ?? "").startsWith("ADD #c :corr")
                ) {
                    input.ConditionExpression = withoutClause(input.ConditionExpression, /#g = :g/);
                    prune(input);
                }
            }),
    },
    healBlindToReleases: {
        description:
            "a strict heal's write is not conditional on the fenced releases it read: a release that lands between its reads and its write is taken twice",
        mutate: (run) =>
            rewrite(run.parties.settler, "mutantHealBlindToReleases", (command, input) => {
                if (
                    command === "UpdateItemCommand" &&
                    isBestEffort(run, input) &&
                    (input.UpdateExpression ?? "").startsWith("ADD #c :corr")
                ) {
                    input.ConditionExpression = withoutClause(input.ConditionExpression, /#rel = :rel/);
                    prune(input);
                }
            }),
    },
    deleteDespiteFailedDecrement: {
        description: "a utilization delete whose -1 failed goes on to its soft delete: best-effort counts a life that is gone",
        mutate: (run) => {
            const stack = run.parties.api.middlewareStack as unknown as Stack;
            stack.add(
                (next: (args: { input: Input }) => Promise<{ output: Record<string, unknown> }>, context: { commandName?: string }) =>
                    async (args: { input: Input }) => {
                        const decrement =
                            context.commandName === "UpdateItemCommand" &&
                            isBestEffort(run, args.input) &&
                            args.input.ExpressionAttributeValues?.[":d"]?.N === "-1" &&
                            run.state.history.mode === "utilization";
                        try {
                            return await next(args);
                        } catch (error) {
                            if (!decrement) {
                                throw error;
                            }
                            return { output: { $metadata: {}, Attributes: {} } };
                        }
                    },
                { step: "initialize", name: "mutantDeleteDespiteFailedDecrement" },
            );
            return () => void stack.remove("mutantDeleteDespiteFailedDecrement");
        },
    },
    decrementToBase: {
        description:
            "a utilization decrement goes to the count alone: with its life's +1 in the entry, a heal keeps the +1 and drops the -1",
        mutate: (run) =>
            rewrite(run.parties.api, "mutantDecrementToBase", (command, input) => {
                if (
                    command === "UpdateItemCommand" &&
                    isBestEffort(run, input) &&
                    input.ExpressionAttributeValues?.[":d"]?.N === "-1" &&
                    input.ConditionExpression === undefined
                ) {
                    input.UpdateExpression = input.UpdateExpression!.replace("ADD #c :d, #e :d", "ADD #c :d");
                    prune(input);
                }
            }),
    },
    releaseWithoutGeneration: {
        description: "a strict release of an old life is not conditional on the generation: it takes a unit a heal already took",
        mutate: (run) =>
            rewrite(run.parties.api, "mutantReleaseWithoutGeneration", (command, input) => {
                if (command === "UpdateItemCommand" && isBestEffort(run, input) && (input.ConditionExpression ?? "").includes("#g = :g")) {
                    input.ConditionExpression = withoutClause(input.ConditionExpression, /#g = :g|attribute_not_exists\(#g\) OR #g = :g/);
                    prune(input);
                }
            }),
    },
    backfillCountsFromTable: {
        description: "the backfill counts each item it flags on eventual itself: the flag's record, in flight, counts it again",
        mutate: (run) => {
            const stack = run.parties.backfill.middlewareStack as unknown as Stack;
            const config = run.state.system.config;
            stack.add(
                (next: (args: { input: Input }) => Promise<{ output: Record<string, unknown> }>, context: { commandName?: string }) =>
                    async (args: { input: Input }) => {
                        const result = await next(args);
                        if (
                            context.commandName === "UpdateItemCommand" &&
                            args.input.TableName === config.tableName &&
                            (args.input.UpdateExpression ?? "").startsWith("SET #selFlag")
                        ) {
                            const key = args.input.Key?.[config.partitionKey]?.S ?? "";
                            await next({
                                ...args,
                                input: {
                                    TableName: config.countersTableName,
                                    Key: eventualKey(config, key),
                                    UpdateExpression: "ADD #c :one",
                                    ExpressionAttributeNames: { "#c": config.countAttribute },
                                    ExpressionAttributeValues: { ":one": { N: "1" } },
                                },
                            });
                        }
                        return result;
                    },
                { step: "initialize", name: "mutantBackfillCountsFromTable" },
            );
            return () => void stack.remove("mutantBackfillCountsFromTable");
        },
    },
    putOverAnything: {
        description: "the client's put is unconditional: a put attempt that lands late brings a deleted life back",
        mutate: (run) =>
            rewrite(run.parties.api, "mutantPutOverAnything", (command, input) => {
                if (command === "PutItemCommand" && input.TableName === run.state.system.config.tableName) {
                    delete input.ConditionExpression;
                    delete input.ExpressionAttributeNames;
                    delete input.ExpressionAttributeValues;
                }
            }),
    },
    admitPastLimit: {
        description: "a strict reservation ignores the limit (and a shard's cap)",
        mutate: (run) =>
            rewrite(run.parties.api, "mutantAdmitPastLimit", (command, input) => {
                if (
                    command === "UpdateItemCommand" &&
                    isBestEffort(run, input) &&
                    /#c < (:limit|#cap)/.test(input.ConditionExpression ?? "")
                ) {
                    delete input.ConditionExpression;
                    prune(input);
                }
            }),
    },
    uncappedPastCaps: {
        description:
            "a strict reservation under no limit ignores the caps armed on its shard: the same limit set again finds caps the key's sum outgrew, and a shard with room admits past the limit",
        mutate: (run) =>
            rewrite(run.parties.api, "mutantUncappedPastCaps", (command, input) => {
                if (
                    command === "UpdateItemCommand" &&
                    isBestEffort(run, input) &&
                    input.ConditionExpression === "attribute_not_exists(#tag)"
                ) {
                    input.ConditionExpression = undefined;
                    prune(input);
                }
            }),
    },
    staleEntriesKept: {
        description: "neither a client write nor a heal removes stale ledger entries: a key's best-effort item grows without bound",
        mutate: (run) => {
            const strip = (command: string, input: Input) => {
                if (command === "UpdateItemCommand" && isBestEffort(run, input) && (input.UpdateExpression ?? "").includes(" REMOVE ")) {
                    input.UpdateExpression = input.UpdateExpression!.replace(/ REMOVE .*$/, "");
                    input.ConditionExpression = withoutClause(input.ConditionExpression, /#s\d+ = :s\d+/);
                    prune(input);
                }
            };
            const undo = [
                rewrite(run.parties.api, "mutantStaleEntriesKeptApi", strip),
                rewrite(run.parties.settler, "mutantStaleEntriesKeptSettler", strip),
            ];
            return () => undo.forEach((u) => u());
        },
    },
    thresholdsWithoutOutbox: {
        description: "the consumer keeps no threshold state: crossings are announced again, or missed",
        mutate: (run) =>
            rewrite(run.parties.pipeline, "mutantThresholdsWithoutOutbox", (command, input) => {
                if (command === "UpdateItemCommand" && isEventual(run, input) && (input.UpdateExpression ?? "").includes("#th = :th")) {
                    input.UpdateExpression = input
                        .UpdateExpression!.replace(/, #th = :th|#th = :th, |SET #th = :th/, "")
                        .replace(/SET\s*$/, "")
                        .trim();
                    prune(input);
                }
            }),
    },
    auditBlind: {
        description: "the settler's audit reads nothing: a key whose best-effort write and mark were both lost is never healed",
        mutate: (run) =>
            rewrite(
                run.parties.settler,
                "mutantAuditBlind",
                () => undefined,
                (command, output) => {
                    if (command === "ScanCommand") {
                        output["Items"] = [];
                        delete output["LastEvaluatedKey"];
                    }
                },
            ),
    },
    tombstoneDatedByTokenOnly: {
        description:
            "a tombstone is dated by its token alone: one whose token another writer rewrote goes at once, and a late put attempt of its life lands",
        mutate: (run) => {
            const { config } = run.state.system;
            const deleteToken = deleteTokenAttribute(config);
            const undatedRecords = (streams: { middlewareStack: unknown }, name: string) =>
                rewrite(
                    streams,
                    name,
                    () => undefined,
                    (command, output) => {
                        if (command !== "GetRecordsCommand") {
                            return;
                        }
                        for (const record of (output["Records"] ?? []) as Array<{
                            dynamodb?: { NewImage?: Record<string, AttributeValue> };
                        }>) {
                            const image = record.dynamodb?.NewImage;
                            if (image !== undefined && tokenTime(image[config.tokenAttribute]?.S) === undefined) {
                                delete image[deleteToken];
                            }
                        }
                    },
                );
            const undo = [
                undatedRecords(run.state.streams, "mutantTombstoneDatedByTokenOnlyMapping"),
                undatedRecords(run.handlerStreams, "mutantTombstoneDatedByTokenOnlyRecords"),
                rewrite(run.parties.pipeline, "mutantTombstoneDatedByTokenOnlyRemoval", (command, input) => {
                    if (command === "DeleteItemCommand" && input.TableName === config.tableName) {
                        input.ConditionExpression = withoutClause(input.ConditionExpression, /attribute_not_exists\(#deleteToken\)/);
                        prune(input);
                    }
                }),
            ];
            return () => undo.forEach((u) => u());
        },
    },
    dropAfterWrite: {
        description:
            "the consumer drops a key's days past the retention after the write that moves its day: a drop that fails then is never tried again, and the day stays",
        mutate: (run) => {
            const client = run.parties.pipeline as unknown as DynamoDBClient;
            const { config } = run.state.system;
            const held = new Map<string, Input>();
            const replaying = new Set<string>();
            const stack = client.middlewareStack as unknown as Stack;
            stack.add(
                (next: (args: { input: Input }) => Promise<{ output: Record<string, unknown> }>, context: { commandName?: string }) =>
                    async (args: { input: Input }) => {
                        const partition = args.input.ExpressionAttributeValues?.[":pk"]?.S ?? "";
                        const drop =
                            context.commandName === "QueryCommand" &&
                            (args.input.KeyConditionExpression ?? "").includes("BETWEEN") &&
                            partition.endsWith(usagePartitionKey(""));
                        if (drop && !replaying.has(partition)) {
                            // Held back until the write (as if it came after it): answered with nothing to drop.
                            held.set(partition, { ...args.input });
                            return { output: { $metadata: {}, Items: [], Count: 0 } };
                        }
                        const result = await next(args);
                        const key = args.input.TransactItems?.[0]?.Update?.Key?.[config.partitionKey]?.S;
                        const query = key === undefined ? undefined : held.get(usagePartitionKey(key));
                        if (context.commandName === "TransactWriteItemsCommand" && key !== undefined && query !== undefined) {
                            held.delete(usagePartitionKey(key));
                            replaying.add(usagePartitionKey(key));
                            try {
                                const page = await client.send(new QueryCommand(query as never));
                                for (const item of page.Items ?? []) {
                                    await client.send(
                                        new DeleteItemCommand({
                                            TableName: config.countersTableName,
                                            Key: {
                                                [config.partitionKey]: item[config.partitionKey]!,
                                                [config.sortKey]: item[config.sortKey]!,
                                            },
                                        }),
                                    );
                                }
                            } finally {
                                replaying.delete(usagePartitionKey(key));
                            }
                        }
                        return result;
                    },
                { step: "initialize", name: "mutantDropAfterWrite" },
            );
            return () => void stack.remove("mutantDropAfterWrite");
        },
    },
};
