/**
 * What the checker needs to know about the counting model's storage, in one place: how to build a
 * system on DynamoDB Local, how to read one key's truth, and what a released request did.
 *
 * Sharded counters (runtime/shards/layout.ts): a key's counter items live in `counterShards` partitions of the
 * counters table. Every read here reads every shard (the counters are sums over them, a marker is read in its id's
 * shard), and every partition key a request names is mapped back to its key (`shardOfPartitionKey`; the histories'
 * keys never hold the separator), with the shard it names where it matters: a best-effort write's, a counter read's.
 * Per shard, the truth also counts the client's live items homed there (`lifeShard` of their token): what the mode's
 * bound holds each shard's best-effort to, and what a heal sets it to.
 */
import { DynamoDBClient, GetItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import {
    bestEffortSortKey,
    COUNTER_ATTRIBUTES,
    countersTable,
    DEFAULT_LAYOUT,
    eventualSortKey,
    MARKER_STATE,
    markerId,
    markerSortKey,
    type HandlerConfig,
    type ItemSelection,
} from "../../runtime/shared/config";
import { queryPartition } from "../../runtime/heal/partition";
import { isLive, isSelected, isSoftDeleted } from "../../runtime/shared/selection";
import { hasBackfillUnit } from "../../runtime/shared/strict-ledger";
import { TAKE_BACKFILL_UNIT } from "../../runtime/client/resource-writes";
import {
    lifeShard,
    markerShard,
    shardCount,
    shardOfPartitionKey,
    shardPartitionKey,
    shardPartitionKeys,
} from "../../runtime/shards/layout";
import type { LocalEngine } from "../../local/engine/engine";
import { snapshotKey } from "../../local/harness/observe";
import { createCounterTable, createCountersTable } from "../../local/engine/table";
import { ACTIVE, ID_PREFIX, STATUS_ATTRIBUTE, type Mode, type SelectionKind } from "./history";
import type { Released } from "./scheduler";
import { fuzzRetries } from "./scheduler";

let tables = 0;

export interface FuzzSystem {
    readonly config: HandlerConfig;
    readonly streamArn: string;
}

/** The layout's selection for a history's selection kind. */
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

export async function createFuzzSystem(
    reader: DynamoDBClient,
    placement: "separate" | "same-table",
    selection: SelectionKind = "client",
    counterShards = 1,
): Promise<FuzzSystem> {
    const tableName = `fuzz-${process.pid}-${++tables}`;
    // The heal index lives where the counter items do, as the component declares it.
    const { streamArn } = await createCounterTable(reader, tableName, DEFAULT_LAYOUT, "NEW_AND_OLD_IMAGES", {
        healIndex: placement === "same-table",
    });
    const countersTableName = placement === "separate" ? `${tableName}-counters` : tableName;
    if (placement === "separate") {
        await createCountersTable(reader, countersTableName, DEFAULT_LAYOUT, { healIndex: true });
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
            // One shard is today's layout, item for item: the configuration does not name it.
            ...(counterShards === 1 ? {} : { counterShards }),
        },
    };
}

/** The shard count of the system's keys. */
export function shardsOf(system: FuzzSystem): number {
    return shardCount(system.config);
}

/**
 * No timer of the HTTP handler may end a request: the SDK's default socket timeout (DynamoDB's is 300 s of
 * inactivity) runs on the machine's clock, so on a busy machine an attempt could time out in one run and not in the
 * next, and the history would depend on the machine's speed. A timeout is a fault the schedule injects (`late`).
 */
export const NO_TIMEOUTS = Object.freeze({ connectionTimeout: 0, requestTimeout: 0, socketTimeout: 0 });

/** A DynamoDB client for a task-driven part of the system: the SDK's retry decisions, its backoff slept through `sleep`. */
export function fuzzClient(engine: LocalEngine, sleep: (ms: number) => Promise<void>): DynamoDBClient {
    return new DynamoDBClient({
        endpoint: engine.endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "hybridcounterlocal", secretAccessKey: "hybridcounterlocal" },
        retryStrategy: fuzzRetries(sleep, 3),
        requestHandler: NO_TIMEOUTS,
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
    /** Each shard's best-effort, shard 0 first (one entry when unsharded). */
    readonly shardBestEffort: readonly number[];
    /** A sharded key's: the tokens of the client's live items, per shard of their home (`clientShard`). */
    readonly clientTokens?: readonly string[][];
}

export async function readTruth(reader: DynamoDBClient, system: FuzzSystem, key: string): Promise<Truth> {
    if (shardsOf(system) > 1) {
        return readShardedTruth(reader, system, key);
    }
    const s = await snapshotKey(reader, system.config.tableName, system.config, key, system.config.countersTableName);
    return {
        bestEffort: s.bestEffort,
        eventual: s.eventual,
        live: s.live,
        clientLive: s.clientLive,
        counted: s.counted,
        softDeleted: s.softDeleted,
        shardBestEffort: [s.bestEffort],
    };
}

/**
 * A sharded key's truth: the user's partition and every shard's partition of the counters table (a table of its own),
 * read at once (the schedule holds every request meanwhile, so they are one observation), with the tokens of the
 * client's live items per shard of their home.
 */
async function readShardedTruth(reader: DynamoDBClient, system: FuzzSystem, key: string): Promise<Truth> {
    const { config } = system;
    const [items, ...shards] = await Promise.all([
        queryPartition(reader, { tableName: config.tableName, partitionKey: config.partitionKey, key }),
        ...shardPartitionKeys(key, shardsOf(system)).map((partition) =>
            queryPartition(reader, { tableName: countersTable(config), partitionKey: config.partitionKey, key: partition }),
        ),
    ]);
    const count = (item: Record<string, AttributeValue> | undefined) => Number(item?.[config.countAttribute]?.N ?? 0);
    const shardBestEffort = shards.map((partition) =>
        count(partition.find((item) => item[config.sortKey]?.S === bestEffortSortKey(config))),
    );
    const eventual = shards.reduce(
        (sum, partition) => sum + count(partition.find((item) => item[config.sortKey]?.S === eventualSortKey(config))),
        0,
    );
    const counted = shards
        .flat()
        .filter(
            (item) =>
                markerId(config, item[config.sortKey]?.S ?? "") !== undefined && item[COUNTER_ATTRIBUTES.state]?.S === MARKER_STATE.counted,
        ).length;
    const clientTokens = shards.map((): string[] => []);
    let live = 0;
    let softDeleted = 0;
    for (const item of items) {
        if (isLive(item, config)) {
            live++;
            const shard = clientShard(system, item);
            if (shard !== undefined) {
                clientTokens[shard]!.push(item[config.tokenAttribute]!.S!);
            }
        } else if (isSelected(item, config) && isSoftDeleted(item, config)) {
            softDeleted++;
        }
    }
    return {
        bestEffort: shardBestEffort.reduce((sum, n) => sum + n, 0),
        eventual,
        live,
        clientLive: clientTokens.reduce((sum, tokens) => sum + tokens.length, 0),
        counted,
        softDeleted,
        shardBestEffort,
        clientTokens,
    };
}

/**
 * The shard a live client item's unit lives in (its token's: runtime/shards/layout.ts `homeShard`), undefined for an
 * item without the client's token.
 */
export function clientShard(system: FuzzSystem, item: Record<string, AttributeValue>): number | undefined {
    const token = item[system.config.tokenAttribute]?.S;
    return token === undefined ? undefined : lifeShard(token, shardsOf(system));
}

/** A key's live items by what best-effort holds for them. */
export interface LiveByUnit {
    /** Carrying the client's token: its reservation (strict) or increment holds their unit. */
    readonly client: number;
    /** Without the token, whose marker holds a backfill's unit (`hc_be`). */
    readonly backfilled: number;
    /** Without the token and without a backfill's unit: counted by eventual alone. */
    readonly eventualOnly: number;
    /** The same, per shard of the items' homes (the token's shard, else the id's), shard 0 first. */
    readonly shards: ReadonlyArray<{ readonly client: number; readonly backfilled: number; readonly eventualOnly: number }>;
}

export async function liveByUnit(reader: DynamoDBClient, system: FuzzSystem, key: string): Promise<LiveByUnit> {
    const { config } = system;
    const shards = shardsOf(system);
    const counts = { client: 0, backfilled: 0, eventualOnly: 0 };
    const perShard = Array.from({ length: shards }, () => ({ client: 0, backfilled: 0, eventualOnly: 0 }));
    for (const item of await queryPartition(reader, { tableName: config.tableName, partitionKey: config.partitionKey, key })) {
        if (!isLive(item, config)) {
            continue;
        }
        const home = clientShard(system, item);
        if (home !== undefined) {
            counts.client++;
            perShard[home]!.client++;
            continue;
        }
        const id = item[config.sortKey]!.S!;
        // The marker, and a backfill's unit for an item without the token, live in the id's shard.
        const shard = markerShard(id, shards);
        const marker = await reader.send(
            new GetItemCommand({
                TableName: config.countersTableName,
                Key: { [config.partitionKey]: { S: shardPartitionKey(key, shard) }, [config.sortKey]: { S: markerSortKey(config, id) } },
                ConsistentRead: true,
            }),
        );
        const unit = hasBackfillUnit(marker.Item) ? "backfilled" : "eventualOnly";
        counts[unit]++;
        perShard[shard]![unit]++;
    }
    return { ...counts, shards: perShard };
}

/** What a heal writes for a key once nothing is in flight (heal.ts): the live items best-effort accounts for in the mode. */
export function healTarget(live: Pick<LiveByUnit, "client" | "backfilled">, mode: Mode): number {
    return live.client + (mode === "strict" ? live.backfilled : 0);
}

/** The heal epoch a client's best-effort write answered with (its ReturnValues ALL_NEW). */
export interface EpochSeen {
    readonly epoch: number;
    readonly openedAt: number;
}

/** What a released request was, as far as the contract's accounting goes. */
export type RequestEffect =
    | {
          readonly kind: "best-effort";
          readonly key: string;
          /** The shard whose best-effort item it wrote. */
          readonly shard: number;
          readonly delta: number;
          readonly applied: boolean;
          /** The epoch the write answered with: a strict delete's touch reads the one its release is judged in. */
          readonly epoch?: EpochSeen;
      }
    /**
     * A transaction that adds to best-effort: a strict-mode backfill's (the consumer never touches best-effort; a sharded
     * strict client's rearm is a "best-effort" write of its reservation).
     */
    | {
          readonly kind: "best-effort-transaction";
          readonly key: string;
          readonly shard: number;
          readonly delta: number;
          readonly applied: boolean;
      }
    /** `token`: the client token the put item carries (none for another writer's put). */
    | { readonly kind: "put"; readonly key: string; readonly id: string; readonly applied: boolean; readonly token?: string }
    /** `createToken`: the client token of the life the soft delete is conditional on (none: an item without one). */
    | { readonly kind: "soft-delete"; readonly key: string; readonly applied: boolean; readonly createToken?: string }
    /** Another writer's UpdateItem moving an item in or out of an attribute selection. */
    | { readonly kind: "flip"; readonly key: string; readonly id: string; readonly applied: boolean; readonly into: boolean }
    /** Another writer's DeleteItem. */
    | { readonly kind: "hard-delete"; readonly key: string; readonly id: string; readonly applied: boolean }
    /** A strict delete's take of a backfill's unit: its conditional removal of the marker's hc_be. */
    | { readonly kind: "backfill-unit-taken"; readonly key: string; readonly applied: boolean }
    /** A strict delete's take of a young or repeated life's release right on its marker (strict-ledger.ts). */
    | { readonly kind: "release-right"; readonly key: string; readonly applied: boolean }
    /** A client write conditional on a life (claim, unclaim): the life's client token. */
    | { readonly kind: "life-write"; readonly key: string; readonly createToken?: string }
    /** One shard's counter read (a Query of its partition): what it read of each counter, when it was served. */
    | {
          readonly kind: "counter-read";
          readonly key: string;
          readonly shard: number;
          readonly bestEffort?: number;
          readonly eventual?: number;
      }
    | { readonly kind: "other"; readonly keys: readonly string[] };

/** Did the request change the table? A 500 after commit did; a refused or failed one did not. */
function applied(released: Released): boolean {
    return released.served;
}

export function classifyRequest(system: FuzzSystem, released: Released): RequestEffect {
    const { partitionKey, sortKey, countAttribute } = system.config;
    const shards = shardsOf(system);
    const input = released.input as {
        Key?: Record<string, AttributeValue>;
        Item?: Record<string, AttributeValue>;
        UpdateExpression?: string;
        ExpressionAttributeValues?: Record<string, AttributeValue>;
    };
    // A counter item's partition key names a shard of its key; an item of the user's table is under the key itself.
    const partition = input.Key?.[partitionKey]?.S ?? input.Item?.[partitionKey]?.S;
    const located = partition === undefined ? undefined : shardOfPartitionKey(partition, shards);
    const key = located?.key;
    const shard = located?.shard ?? 0;
    const sk = input.Key?.[sortKey]?.S ?? input.Item?.[sortKey]?.S;
    if (released.command === "UpdateItemCommand" && key !== undefined && sk === bestEffortSortKey(system.config)) {
        const after = (released.outcome?.output as { Attributes?: Record<string, AttributeValue> } | undefined)?.Attributes;
        const epoch =
            after === undefined || !applied(released)
                ? undefined
                : {
                      epoch: Number(after[COUNTER_ATTRIBUTES.epoch]?.N ?? 0),
                      openedAt: Number(after[COUNTER_ATTRIBUTES.epochAt]?.N ?? 0),
                  };
        const delta = Number(input.ExpressionAttributeValues?.[":delta"]?.N ?? 0);
        return { kind: "best-effort", key, shard, delta, applied: applied(released), ...(epoch === undefined ? {} : { epoch }) };
    }
    const status = input.ExpressionAttributeValues?.[":status"]?.S;
    if (released.command === "UpdateItemCommand" && key !== undefined && sk !== undefined && status !== undefined) {
        return { kind: "flip", key, id: sk, applied: applied(released), into: status === ACTIVE };
    }
    const createToken = input.ExpressionAttributeValues?.[":createToken"]?.S;
    if (released.command === "PutItemCommand" && key !== undefined && sk !== undefined) {
        const token = input.Item?.[system.config.tokenAttribute]?.S;
        return { kind: "put", key, id: sk, applied: applied(released), ...(token === undefined ? {} : { token }) };
    }
    // The client's removal of a live life it read (an item another writer grew past the room of the soft delete:
    // runtime/client/client.ts, `endLife`) ends that life as its soft delete would; every other DeleteItem (the
    // consumer's of a soft-deleted item, another writer's, the table's TTL) is a hard delete.
    const condition = (released.input as { ConditionExpression?: string }).ConditionExpression ?? "";
    if (released.command === "DeleteItemCommand" && key !== undefined && /#deleted = :false/.test(condition)) {
        return { kind: "soft-delete", key, applied: applied(released), ...(createToken === undefined ? {} : { createToken }) };
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
        input.UpdateExpression === TAKE_BACKFILL_UNIT
    ) {
        return { kind: "backfill-unit-taken", key, applied: applied(released) };
    }
    if (
        released.command === "UpdateItemCommand" &&
        key !== undefined &&
        sk !== undefined &&
        markerId(system.config, sk) !== undefined &&
        input.UpdateExpression?.startsWith("SET #released = :released") === true
    ) {
        return { kind: "release-right", key, applied: applied(released) };
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
        // A sharded strict client's rearm (runtime/shards/reservation.ts): its reservation is the one action with a `:delta`.
        const rearm = actions.find(
            (action) =>
                action.Update?.ExpressionAttributeValues?.[":quota"] !== undefined &&
                action.Update.ExpressionAttributeValues[":delta"] !== undefined,
        );
        const rearmed = rearm?.Update?.Key?.[partitionKey]?.S;
        if (rearm !== undefined && rearmed !== undefined) {
            const home = shardOfPartitionKey(rearmed, shards);
            const delta = Number(rearm.Update!.ExpressionAttributeValues![":delta"]!.N);
            return { kind: "best-effort", key: home.key, shard: home.shard, delta, applied: applied(released) };
        }
        for (const action of actions) {
            const update = action.Update;
            const updated = update?.Key?.[partitionKey]?.S;
            if (updated !== undefined && update?.Key?.[sortKey]?.S === bestEffortSortKey(system.config)) {
                const delta = Number(update.ExpressionAttributeValues?.[":n"]?.N ?? update.ExpressionAttributeValues?.[":delta"]?.N ?? 0);
                const home = shardOfPartitionKey(updated, shards);
                return { kind: "best-effort-transaction", key: home.key, shard: home.shard, delta, applied: applied(released) };
            }
        }
    }
    if (released.command === "QueryCommand") {
        const queried = input.ExpressionAttributeValues?.[":key"]?.S;
        if (queried !== undefined) {
            const at = shardOfPartitionKey(queried, shards);
            const items = (released.outcome?.output as { Items?: Array<Record<string, AttributeValue>> } | undefined)?.Items;
            if (items === undefined || !applied(released)) {
                return { kind: "counter-read", key: at.key, shard: at.shard };
            }
            const count = (sortKeyOf: string) => Number(items.find((item) => item[sortKey]?.S === sortKeyOf)?.[countAttribute]?.N ?? 0);
            return {
                kind: "counter-read",
                key: at.key,
                shard: at.shard,
                bestEffort: count(bestEffortSortKey(system.config)),
                eventual: count(eventualSortKey(system.config)),
            };
        }
    }
    return { kind: "other", keys: [...new Set(keysIn(released.input, partitionKey).map((pk) => shardOfPartitionKey(pk, shards).key))] };
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
