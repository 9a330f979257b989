/**
 * Stored limits: a limit per key, and a default per counter, kept in the counters table.
 *
 * The key's limit is one item every region shares (`<counterPrefix>limit` in the key's partition), the default one
 * counter-wide item; both hold `hc_limit`. A call that passes a limit uses it; one that passes none uses the key's
 * stored limit, else the default, else none. What a change does to a live key's bound is the bound's business:
 * unsharded strict reservations are conditional on the limit they read (runtime/client/units.ts), a sharded key's
 * and a region's caps are re-derived from it (runtime/shards/caps.ts, runtime/regions/caps.ts).
 */
import { BatchGetItemCommand, DeleteItemCommand, PutItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { defaultLimitKey, limitKey, numberOf } from "../shared/keys";

/** The attribute of a limit item. */
export const LIMIT_ATTRIBUTE = "hc_limit";

/** Where a key's limit came from. */
export type LimitSource = "key" | "default" | "none";

export interface ResolvedLimit {
    readonly limit: number | undefined;
    readonly source: LimitSource;
}

type Scope = Pick<CounterConfig, "countersTableName" | "partitionKey" | "sortKey" | "counterPrefix" | "regions">;

/** The key's stored limit and the default, read strongly consistent in one request. */
export async function readLimits(dynamodb: DynamoDBClient, config: Scope, key: string): Promise<{ key?: number; default?: number }> {
    const keys = [limitKey(config, key), defaultLimitKey(config)];
    const response = await dynamodb.send(
        new BatchGetItemCommand({ RequestItems: { [config.countersTableName]: { Keys: keys, ConsistentRead: true } } }),
    );
    const items = response.Responses?.[config.countersTableName] ?? [];
    const unprocessed = response.UnprocessedKeys?.[config.countersTableName]?.Keys?.length ?? 0;
    if (unprocessed > 0) {
        // A throttled batch: read again, one request more (the caller's retries bound it).
        return readLimits(dynamodb, config, key);
    }
    const find = (wanted: (typeof keys)[number]) =>
        items.find(
            (item) =>
                item[config.partitionKey]?.S === wanted[config.partitionKey]?.S && item[config.sortKey]?.S === wanted[config.sortKey]?.S,
        );
    const own = find(keys[0]!);
    const fallback = find(keys[1]!);
    return {
        ...(own?.[LIMIT_ATTRIBUTE]?.N === undefined ? {} : { key: numberOf(own, LIMIT_ATTRIBUTE) }),
        ...(fallback?.[LIMIT_ATTRIBUTE]?.N === undefined ? {} : { default: numberOf(fallback, LIMIT_ATTRIBUTE) }),
    };
}

/** The limit a call without one runs under: the key's, else the default, else none. */
export function resolveLimit(stored: { key?: number; default?: number }): ResolvedLimit {
    if (stored.key !== undefined) {
        return { limit: stored.key, source: "key" };
    }
    return stored.default !== undefined ? { limit: stored.default, source: "default" } : { limit: undefined, source: "none" };
}

/** Stores `limit` for `key` (null removes it: the key then runs under the default). */
export async function writeKeyLimit(dynamodb: DynamoDBClient, config: Scope, key: string, limit: number | null): Promise<void> {
    await writeLimitItem(dynamodb, config, limitKey(config, key), limit);
}

/** Stores the counter's default limit (null removes it). */
export async function writeDefaultLimit(dynamodb: DynamoDBClient, config: Scope, limit: number | null): Promise<void> {
    await writeLimitItem(dynamodb, config, defaultLimitKey(config), limit);
}

async function writeLimitItem(
    dynamodb: DynamoDBClient,
    config: Scope,
    key: ReturnType<typeof limitKey>,
    limit: number | null,
): Promise<void> {
    if (limit === null) {
        await dynamodb.send(new DeleteItemCommand({ TableName: config.countersTableName, Key: key }));
        return;
    }
    await dynamodb.send(
        new PutItemCommand({ TableName: config.countersTableName, Item: { ...key, [LIMIT_ATTRIBUTE]: { N: String(limit) } } }),
    );
}
