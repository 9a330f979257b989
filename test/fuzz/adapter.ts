/**
 * What the checker needs to know about the counting model's storage, in one place: how to build a
 * system on DynamoDB Local, how to read one key's truth, and what a released request did.
 */
import { DynamoDBClient, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { bestEffortSortKey, DEFAULT_LAYOUT, eventualSortKey, markerId, type HandlerConfig, type ItemSelection } from "../../runtime/config";
import type { LocalEngine } from "../../local/engine";
import { snapshotKey } from "../../local/observe";
import { createCounterTable, createCountersTable } from "../../local/table";
import { ID_PREFIX, type SelectionKind } from "./history";
import type { Released } from "./scheduler";
import { immediateRetries } from "./scheduler";

let tables = 0;

export interface FuzzSystem {
    readonly config: HandlerConfig;
    readonly streamArn: string;
}

/** The layout's selection for a history's selection kind. */
export function fuzzSelection(kind: SelectionKind): ItemSelection {
    return kind === "prefix" ? { kind: "sortKeyPrefix", prefix: ID_PREFIX } : { kind: "client" };
}

export async function createFuzzSystem(
    reader: DynamoDBClient,
    placement: "separate" | "same-table",
    selection: SelectionKind = "client",
): Promise<FuzzSystem> {
    const tableName = `fuzz-${process.pid}-${++tables}`;
    const { streamArn } = await createCounterTable(reader, tableName, DEFAULT_LAYOUT);
    const countersTableName = placement === "separate" ? `${tableName}-counters` : tableName;
    if (placement === "separate") {
        await createCountersTable(reader, countersTableName, DEFAULT_LAYOUT);
    }
    return {
        streamArn,
        config: {
            ...DEFAULT_LAYOUT,
            selection: fuzzSelection(selection),
            tableName,
            countersTableName,
            fatalQueueUrl: "https://sqs.local/000000000000/fatal",
            metricsNamespace: "Fuzz",
        },
    };
}

/** A DynamoDB client for a task-driven part of the system: the SDK's retry decisions, no sleeps. */
export function fuzzClient(engine: LocalEngine): DynamoDBClient {
    return new DynamoDBClient({
        endpoint: engine.endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "hybridcounterlocal", secretAccessKey: "hybridcounterlocal" },
        retryStrategy: immediateRetries(3),
    });
}

/** One key's truth, read between two releases (so it is one observation). */
export interface Truth {
    readonly bestEffort: number;
    readonly eventual: number;
    /** Items that exist and are not soft-deleted. */
    readonly live: number;
    /** Of `live`, the items carrying the client's token (the client's own writes). */
    readonly clientLive: number;
    /** The items the eventual counter says it counted (its invariant: equal to `eventual` at all times). */
    readonly counted: number;
    /** Items soft-deleted and not yet removed by the consumer. */
    readonly softDeleted: number;
}

export async function readTruth(reader: DynamoDBClient, system: FuzzSystem, key: string): Promise<Truth> {
    const s = await snapshotKey(reader, system.config.tableName, system.config, key, system.config.countersTableName);
    return {
        bestEffort: s.bestEffort,
        eventual: s.eventual,
        live: s.live,
        clientLive: s.clientLive,
        counted: s.counted,
        softDeleted: s.softDeleted,
    };
}

/** What a released request was, as far as the contract's accounting goes. */
export type RequestEffect =
    | { readonly kind: "best-effort"; readonly key: string; readonly delta: number; readonly applied: boolean }
    /** A transaction that adds to best-effort: only a strict-mode backfill sends one (the consumer never touches best-effort). */
    | { readonly kind: "best-effort-transaction"; readonly key: string; readonly delta: number; readonly applied: boolean }
    /** `token`: the client token the put item carries (none for another writer's put). */
    | { readonly kind: "put"; readonly key: string; readonly id: string; readonly applied: boolean; readonly token?: string }
    /** `createToken`: the client token of the life the soft delete is conditional on (none: an item without one). */
    | { readonly kind: "soft-delete"; readonly key: string; readonly applied: boolean; readonly createToken?: string }
    /** Another writer's DeleteItem. */
    | { readonly kind: "hard-delete"; readonly key: string; readonly id: string; readonly applied: boolean }
    /** A strict delete's take of a backfill's unit: its conditional removal of the marker's hc_be. */
    | { readonly kind: "backfill-unit-taken"; readonly key: string; readonly applied: boolean }
    /** A client write conditional on a life (claim, unclaim): the life's client token. */
    | { readonly kind: "life-write"; readonly key: string; readonly createToken?: string }
    | { readonly kind: "counter-read"; readonly key: string; readonly value?: number }
    | { readonly kind: "other"; readonly keys: readonly string[] };

/** Did the request change the table? A 500 after commit did; a refused or failed one did not. */
function applied(released: Released): boolean {
    return released.served;
}

export function classifyRequest(system: FuzzSystem, released: Released): RequestEffect {
    const { partitionKey, sortKey, countAttribute } = system.config;
    const input = released.input as {
        Key?: Record<string, AttributeValue>;
        Item?: Record<string, AttributeValue>;
        UpdateExpression?: string;
        ExpressionAttributeValues?: Record<string, AttributeValue>;
    };
    const key = input.Key?.[partitionKey]?.S ?? input.Item?.[partitionKey]?.S;
    const sk = input.Key?.[sortKey]?.S ?? input.Item?.[sortKey]?.S;
    if (released.command === "UpdateItemCommand" && key !== undefined && sk === bestEffortSortKey(system.config)) {
        return { kind: "best-effort", key, delta: Number(input.ExpressionAttributeValues?.[":delta"]?.N ?? 0), applied: applied(released) };
    }
    const createToken = input.ExpressionAttributeValues?.[":createToken"]?.S;
    if (released.command === "PutItemCommand" && key !== undefined && sk !== undefined) {
        const token = input.Item?.[system.config.tokenAttribute]?.S;
        return { kind: "put", key, id: sk, applied: applied(released), ...(token === undefined ? {} : { token }) };
    }
    if (released.command === "DeleteItemCommand" && key !== undefined && sk !== undefined) {
        return { kind: "hard-delete", key, id: sk, applied: applied(released) };
    }
    if (released.command === "UpdateItemCommand" && key !== undefined && /#deleted = :true/.test(input.UpdateExpression ?? "")) {
        return { kind: "soft-delete", key, applied: applied(released), ...(createToken === undefined ? {} : { createToken }) };
    }
    if (released.command === "UpdateItemCommand" && key !== undefined && createToken !== undefined) {
        return { kind: "life-write", key, createToken };
    }
    if (
        released.command === "UpdateItemCommand" &&
        key !== undefined &&
        sk !== undefined &&
        markerId(system.config, sk) !== undefined &&
        input.UpdateExpression === "REMOVE #be"
    ) {
        return { kind: "backfill-unit-taken", key, applied: applied(released) };
    }
    if (released.command === "TransactWriteItemsCommand") {
        const actions =
            (
                released.input as {
                    TransactItems?: Array<{
                        Update?: { Key?: Record<string, AttributeValue>; ExpressionAttributeValues?: Record<string, AttributeValue> };
                    }>;
                }
            ).TransactItems ?? [];
        for (const action of actions) {
            const update = action.Update;
            const updated = update?.Key?.[partitionKey]?.S;
            if (updated !== undefined && update?.Key?.[sortKey]?.S === bestEffortSortKey(system.config)) {
                const delta = Number(update.ExpressionAttributeValues?.[":n"]?.N ?? update.ExpressionAttributeValues?.[":delta"]?.N ?? 0);
                return { kind: "best-effort-transaction", key: updated, delta, applied: applied(released) };
            }
        }
    }
    if (released.command === "QueryCommand") {
        const queried = input.ExpressionAttributeValues?.[":key"]?.S;
        if (queried !== undefined) {
            const items = (released.outcome?.output as { Items?: Array<Record<string, AttributeValue>> } | undefined)?.Items;
            let value: number | undefined;
            if (items !== undefined && applied(released)) {
                value = 0;
                for (const item of items) {
                    const s = item[sortKey]?.S;
                    if (s === bestEffortSortKey(system.config) || s === eventualSortKey(system.config)) {
                        value = Math.max(value, Number(item[countAttribute]?.N ?? 0));
                    }
                }
            }
            return { kind: "counter-read", key: queried, value };
        }
    }
    return { kind: "other", keys: keysIn(released.input, partitionKey) };
}

/** Every value of the partition key attribute anywhere in a request's input. */
function keysIn(input: unknown, partitionKey: string): string[] {
    const found = new Set<string>();
    const walk = (value: unknown): void => {
        if (value === null || typeof value !== "object") {
            return;
        }
        if (Array.isArray(value)) {
            value.forEach(walk);
            return;
        }
        for (const [name, child] of Object.entries(value as Record<string, unknown>)) {
            if (name === partitionKey && child !== null && typeof child === "object" && typeof (child as { S?: unknown }).S === "string") {
                found.add((child as { S: string }).S);
            } else {
                walk(child);
            }
        }
    };
    walk(input);
    return [...found];
}
