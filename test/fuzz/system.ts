/**
 * The system under test, built on DynamoDB Local for one history: the tables as the component creates them, the
 * configuration its functions and its `clientConfig` carry, and the DynamoDB clients each party sends through (each
 * gated by the scheduler, with the SDK's retry decisions slept on the virtual clock). And the checker's own read of one
 * key: its items, its best-effort shards and its eventual item, read straight from the engine.
 */
import { DynamoDBClient, GetItemCommand, PutItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { createCounterTable, createCountersTable } from "../../local/engine/table";
import type { LocalEngine } from "../../local/engine/engine";
import { DEFAULT_LAYOUT, clientConfigOf, countingGeneration, type HandlerConfig, type ItemSelection } from "../../runtime/shared/config";
import { bestEffortKey, eventualKey, shardOfPartitionKey } from "../../runtime/shared/keys";
import { writeDefaultLimit, writeKeyLimit } from "../../runtime/limits/limits";
import { readItems } from "../../runtime/heal/heal";
import { ACTIVE, ID_PREFIX, STATUS_ATTRIBUTE, type History, type SelectionKind } from "./history";
import { fuzzRetries } from "./scheduler";

export type Item = Record<string, AttributeValue>;

/** The ledger period of every history: the component's default `healQuietWindowSeconds`. */
export const FUZZ_PERIOD_MS = 600_000;
/** Threshold fractions: two, so a key of a small limit crosses both. */
export const FUZZ_THRESHOLDS: readonly number[] = [0.5, 1];
/** Days of usage kept: few, so that a long history archives and drops days. */
export const FUZZ_USAGE_DAYS = 2;

let tables = 0;

export interface FuzzSystem {
    readonly config: HandlerConfig;
    readonly streamArn: string;
    /** The counted flag's value (the counter's generation). */
    readonly generation: string;
    readonly shards: number;
}

/** The selection of a history's selection kind. */
export function fuzzSelection(kind: SelectionKind): ItemSelection {
    switch (kind) {
        case "prefix":
            return { kind: "sortKeyPrefix", prefix: ID_PREFIX };
        case "attribute":
            return { kind: "attribute", name: STATUS_ATTRIBUTE, value: ACTIVE };
        case "client":
            return { kind: "client" };
    }
}

/** Creates the tables of `history` and returns the counter's configuration. */
export async function createFuzzSystem(reader: DynamoDBClient, history: History): Promise<FuzzSystem> {
    const tableName = `fuzz-${process.pid}-${++tables}`;
    const sameTable = history.placement === "same-table";
    const { streamArn } = await createCounterTable(reader, tableName, DEFAULT_LAYOUT, "NEW_AND_OLD_IMAGES", { healIndex: sameTable });
    const countersTableName = sameTable ? tableName : `${tableName}-counters`;
    if (!sameTable) {
        await createCountersTable(reader, countersTableName, DEFAULT_LAYOUT, { healIndex: true });
    }
    const config: HandlerConfig = {
        ...DEFAULT_LAYOUT,
        selection: fuzzSelection(history.selection),
        tableName,
        countersTableName,
        mode: history.mode,
        periodMs: FUZZ_PERIOD_MS,
        ...(history.counterShards === 1 ? {} : { counterShards: history.counterShards }),
        fatalQueueUrl: "https://sqs.local/000000000000/fatal",
        metricsNamespace: "Fuzz",
        thresholds: FUZZ_THRESHOLDS,
        thresholdTopicArn: "arn:aws:sns:us-east-1:000000000000:fuzz-thresholds",
        usageRetentionDays: FUZZ_USAGE_DAYS,
    };
    return { config, streamArn, generation: countingGeneration(config), shards: history.counterShards };
}

/** The client's options, as an API builds them from the component's `clientConfig` output. */
export function clientOptionsOf(system: FuzzSystem): ReturnType<typeof clientConfigOf> {
    return clientConfigOf(system.config);
}

/**
 * Writes what the tables held before the history: the items the user's table held before the counter was attached
 * (plain items, no client token, no flag), and the stored limits.
 */
export async function writePreexisting(reader: DynamoDBClient, system: FuzzSystem, history: History): Promise<void> {
    const { tableName, partitionKey, sortKey } = system.config;
    for (const [key, limit] of Object.entries(history.limits)) {
        await writeKeyLimit(reader, system.config, key, limit);
    }
    if (history.defaultLimit !== undefined) {
        await writeDefaultLimit(reader, system.config, history.defaultLimit);
    }
    for (const { key, id, status } of history.preexisting) {
        await reader.send(
            new PutItemCommand({
                TableName: tableName,
                Item: {
                    [partitionKey]: { S: key },
                    [sortKey]: { S: id },
                    ...(status === undefined ? {} : { [STATUS_ATTRIBUTE]: { S: status } }),
                    source: { S: "before-the-counter" },
                },
            }),
        );
    }
}

/**
 * No timer of the HTTP handler may end a request: the SDK's socket timeout runs on the machine's clock, so on a busy
 * machine an attempt could time out in one run and not in the next. A timeout is a fault the schedule injects (`late`).
 */
export const NO_TIMEOUTS = Object.freeze({ connectionTimeout: 0, requestTimeout: 0, socketTimeout: 0 });

/** A DynamoDB client for one party: the SDK's retry decisions, its backoff slept through `sleep`. */
export function fuzzClient(engine: LocalEngine, sleep: (ms: number) => Promise<void>): DynamoDBClient {
    return new DynamoDBClient({
        endpoint: engine.endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "hybridcounterlocal", secretAccessKey: "hybridcounterlocal" },
        retryStrategy: fuzzRetries(sleep, 3),
        requestHandler: NO_TIMEOUTS,
    });
}

/** One key as the table holds it, read between two releases (so one observation). */
export interface KeyState {
    /** The key's resource items (counter items left out). */
    readonly items: readonly Item[];
    /** Each best-effort shard's item, shard 0 first. */
    readonly shards: ReadonlyArray<Item | undefined>;
    readonly eventual: Item | undefined;
}

export async function readKeyState(reader: DynamoDBClient, system: FuzzSystem, key: string): Promise<KeyState> {
    const { config } = system;
    const items: Item[] = await readItems(key, { config, dynamodb: reader });
    const get = async (itemKey: Item) =>
        (await reader.send(new GetItemCommand({ TableName: config.countersTableName, Key: itemKey, ConsistentRead: true }))).Item;
    const shards: Array<Item | undefined> = [];
    for (let shard = 0; shard < system.shards; shard++) {
        shards.push(await get(bestEffortKey(config, key, shard)));
    }
    return { items, shards, eventual: await get(eventualKey(config, key)) };
}

/** The key (and best-effort shard) a counter item's partition key belongs to. */
export function counterKeyOf(partitionKey: string): { readonly key: string; readonly shard: number } {
    return shardOfPartitionKey(partitionKey);
}
