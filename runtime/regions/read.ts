/**
 * Reading a key's counters across regions, from the local replica of the counters table: every member region's
 * best-effort item and eventual partial, of every shard, in BatchGetItem requests of at most 100 keys, sent at once.
 *
 * Each region's two counters estimate the same set (the lives it owns), so the key's value is the sum over regions of
 * max(best-effort_R, eventual_R); `bestEffort` and `eventual` are the plain sums. Another region's items show here
 * after the replication delay: the read is local, with no cross-region call.
 */
import {
    BatchGetItemCommand,
    type AttributeValue,
    type BatchGetItemCommandOutput,
    type DynamoDBClient,
    type KeysAndAttributes,
} from "@aws-sdk/client-dynamodb";
import { bestEffortSortKey, countersTable, eventualSortKey, type CounterTableConfig } from "../shared/config";
import { countOf } from "../shards/read";
import { shardCount, shardPartitionKey } from "../shards/layout";
import type { RegionsConfig } from "./config";
import { memberRegions } from "./ownership";

/** BatchGetItem's most keys per request. */
export const BATCH_GET_MAX_KEYS = 100;

/** How many rounds unprocessed keys are asked for again before the read fails. */
const UNPROCESSED_ROUNDS = 8;

/** One region's counters of a key (sums over the key's shards). */
export interface RegionCounters {
    readonly region: string;
    readonly bestEffort: number;
    readonly eventual: number;
}

/** A key's counters over every region. */
export interface RegionsCounters {
    readonly bestEffort: number;
    readonly eventual: number;
    /** Sum over regions of max(bestEffort_R, eventual_R). */
    readonly value: number;
    /** Each member region's counters, in sorted region order. */
    readonly regions: readonly RegionCounters[];
}

/** The configuration of region `region` (its counter items' keys), from a configuration with regions. */
export function asRegion<T extends { readonly regions?: RegionsConfig }>(
    config: T & { readonly regions: RegionsConfig },
    region: string,
): T {
    return { ...config, regions: { ...config.regions, current: region } };
}

/** Raised when some keys stayed unprocessed through every round (the table is throttled). */
export class UnprocessedKeysError extends Error {
    constructor(readonly unprocessed: number) {
        super(`BatchGetItem left ${unprocessed} keys unprocessed`);
        this.name = "UnprocessedKeysError";
    }
}

/**
 * Reads every member region's counters of `key` (strongly consistent in the local replica). Throws the first
 * request's DynamoDB error, unchanged, or UnprocessedKeysError.
 */
export async function readRegionsCounters(
    dynamodb: DynamoDBClient,
    config: CounterTableConfig & { readonly regions: RegionsConfig },
    key: string,
): Promise<RegionsCounters> {
    const table = countersTable(config);
    const shards = shardCount(config);
    const wanted: Array<{ region: string; kind: "bestEffort" | "eventual"; key: Record<string, AttributeValue> }> = [];
    for (const region of memberRegions(config.regions)) {
        const scoped = asRegion(config, region);
        for (let shard = 0; shard < shards; shard++) {
            const partitionKey = shardPartitionKey(key, shard);
            for (const [kind, sortKey] of [
                ["bestEffort", bestEffortSortKey(scoped)],
                ["eventual", eventualSortKey(scoped)],
            ] as const) {
                wanted.push({ region, kind, key: { [config.partitionKey]: { S: partitionKey }, [config.sortKey]: { S: sortKey } } });
            }
        }
    }
    const found = new Map<string, Record<string, AttributeValue>>();
    const identity = (item: Record<string, AttributeValue>) => `${item[config.partitionKey]?.S}\u0000${item[config.sortKey]?.S}`;
    const chunks: Array<Array<Record<string, AttributeValue>>> = [];
    for (let at = 0; at < wanted.length; at += BATCH_GET_MAX_KEYS) {
        chunks.push(wanted.slice(at, at + BATCH_GET_MAX_KEYS).map((w) => w.key));
    }
    await Promise.all(
        chunks.map(async (keys) => {
            let request: Record<string, KeysAndAttributes> | undefined = {
                [table]: {
                    Keys: keys,
                    ConsistentRead: true,
                    ProjectionExpression: "#pk, #sk, #count",
                    ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey, "#count": config.countAttribute },
                },
            };
            for (let round = 0; request !== undefined; round++) {
                if (round === UNPROCESSED_ROUNDS) {
                    throw new UnprocessedKeysError(request[table]?.Keys?.length ?? 0);
                }
                const response: BatchGetItemCommandOutput = await dynamodb.send(new BatchGetItemCommand({ RequestItems: request }));
                for (const item of response.Responses?.[table] ?? []) {
                    found.set(identity(item), item);
                }
                const left: KeysAndAttributes | undefined = response.UnprocessedKeys?.[table];
                request = left?.Keys !== undefined && left.Keys.length > 0 ? { [table]: left } : undefined;
                if (request !== undefined) {
                    await new Promise((resolve) => setTimeout(resolve, 10 * 2 ** round));
                }
            }
        }),
    );
    const byRegion = new Map<string, { bestEffort: number; eventual: number }>();
    for (const w of wanted) {
        const sums = byRegion.get(w.region) ?? { bestEffort: 0, eventual: 0 };
        sums[w.kind] += countOf(config, found.get(identity(w.key)));
        byRegion.set(w.region, sums);
    }
    const regions = [...byRegion].map(([region, sums]) => ({ region, ...sums }));
    return {
        bestEffort: regions.reduce((sum, r) => sum + r.bestEffort, 0),
        eventual: regions.reduce((sum, r) => sum + r.eventual, 0),
        value: regions.reduce((sum, r) => sum + Math.max(r.bestEffort, r.eventual), 0),
        regions,
    };
}
