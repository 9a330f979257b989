/**
 * Reads a key's counters: one strongly consistent Query per shard partition, sent at once (1 RCU each for a key's
 * few small items). Shard 0's partition holds every region's best-effort shard 0 and eventual item and the key's
 * stored limit; the other shards' partitions hold best-effort only.
 */
import { QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { ITEM_KINDS, numberOf, shardPartitionKey, stringOf } from "../shared/keys";
import { shardCount } from "../shards/layout";
import { memberRegions } from "../regions/ownership";
import { LIMIT_ATTRIBUTE } from "../limits/limits";

/** One region's counters of a key. */
export interface RegionCounters {
    readonly region: string;
    readonly bestEffort: number;
    readonly eventual: number;
}

/** A key's counters as one read saw them. */
export interface KeyCounters {
    /** This region's best-effort, summed over the key's shards. */
    readonly bestEffort: number;
    /** This region's eventual counter. */
    readonly eventual: number;
    /** This region's best-effort items, by shard (absent: never written). */
    readonly shards: ReadonlyArray<Record<string, AttributeValue> | undefined>;
    /** The key's stored limit, when it has one. */
    readonly limit?: number;
    /** With regions: every member's counters and every other region's with counter items, sorted by region (another region's as the local replica shows them). */
    readonly regions?: readonly RegionCounters[];
    /** With regions: every region with counter items for the key (members or not), its counters and shard 0's item. */
    readonly allRegions?: ReadonlyMap<string, RegionCounters & { readonly shard0?: Record<string, AttributeValue> }>;
}

type Parsed = { region: string | undefined; kind: "best-effort" | "eventual" | "limit" } | undefined;

/** What a counters-table sort key names: whose item and which (undefined: not a counter item of a key). */
export function parseCounterSortKey(counterPrefix: string, sortKey: string): Parsed {
    if (!sortKey.startsWith(counterPrefix)) {
        return undefined;
    }
    let rest = sortKey.slice(counterPrefix.length);
    let region: string | undefined;
    if (rest.startsWith("@")) {
        const end = rest.indexOf("#");
        if (end < 0) {
            return undefined;
        }
        region = rest.slice(1, end);
        rest = rest.slice(end + 1);
    }
    if (rest === ITEM_KINDS.bestEffort || rest === ITEM_KINDS.eventual || (rest === ITEM_KINDS.limit && region === undefined)) {
        return { region, kind: rest as "best-effort" | "eventual" | "limit" };
    }
    return undefined;
}

/** The counter items of one partition of the counters table (every page), strongly consistent. */
export async function queryCounterItems(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    partition: string,
): Promise<Record<string, AttributeValue>[]> {
    const items: Record<string, AttributeValue>[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await dynamodb.send(
            new QueryCommand({
                TableName: config.countersTableName,
                KeyConditionExpression: "#pk = :pk AND begins_with(#sk, :prefix)",
                ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey },
                ExpressionAttributeValues: { ":pk": { S: partition }, ":prefix": { S: config.counterPrefix } },
                ConsistentRead: true,
                ...(start === undefined ? {} : { ExclusiveStartKey: start }),
            }),
        );
        items.push(...(page.Items ?? []));
        start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return items;
}

/** Reads `key`'s counters (one Query per shard, at once). Throws the read's DynamoDB error. */
export async function readKeyCounters(dynamodb: DynamoDBClient, config: CounterConfig, key: string): Promise<KeyCounters> {
    const shards = shardCount(config);
    const pages = await Promise.all(
        Array.from({ length: shards }, (_, s) => queryCounterItems(dynamodb, config, shardPartitionKey(key, s))),
    );
    const own = config.regions?.current;
    const byRegion = new Map<string | undefined, { bestEffort: number; eventual: number; shard0?: Record<string, AttributeValue> }>();
    const mine: Array<Record<string, AttributeValue> | undefined> = Array.from({ length: shards }, () => undefined);
    let limit: number | undefined;
    pages.forEach((items, shard) => {
        for (const item of items) {
            const parsed = parseCounterSortKey(config.counterPrefix, stringOf(item, config.sortKey) ?? "");
            if (parsed === undefined) {
                continue;
            }
            if (parsed.kind === "limit") {
                limit = shard === 0 && item[LIMIT_ATTRIBUTE]?.N !== undefined ? numberOf(item, LIMIT_ATTRIBUTE) : limit;
                continue;
            }
            const counters = byRegion.get(parsed.region) ?? { bestEffort: 0, eventual: 0 };
            byRegion.set(parsed.region, counters);
            const value = numberOf(item, config.countAttribute);
            if (parsed.kind === "best-effort") {
                counters.bestEffort += value;
                counters.shard0 = shard === 0 ? item : counters.shard0;
                mine[shard] = parsed.region === own ? item : mine[shard];
            } else if (shard === 0) {
                counters.eventual += value;
            }
        }
    });
    const self = byRegion.get(own) ?? { bestEffort: 0, eventual: 0 };
    return {
        bestEffort: self.bestEffort,
        eventual: self.eventual,
        shards: mine,
        ...(limit === undefined ? {} : { limit }),
        ...(config.regions === undefined
            ? {}
            : {
                  // Every member, and every other region with counter items (a region removed from the members still
                  // counts the lives its clients stamped).
                  regions: [
                      ...new Set([...memberRegions(config.regions), ...[...byRegion.keys()].filter((r): r is string => r !== undefined)]),
                  ]
                      .sort()
                      .map((region) => {
                          const counters = byRegion.get(region) ?? { bestEffort: 0, eventual: 0 };
                          return { region, bestEffort: counters.bestEffort, eventual: counters.eventual };
                      }),
                  allRegions: new Map(
                      [...byRegion].filter(([region]) => region !== undefined).map(([region, c]) => [region!, { region: region!, ...c }]),
                  ),
              }),
    };
}
