/**
 * Stored limits and usage, as an operator reads them: every key's own limit with the counter's default, and a key's
 * usage over its last days. The limits themselves are runtime/limits/'s (one item per key, one default item).
 *
 * Invariant: reads only.
 */
import { GetItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { defaultLimitKey, ITEM_KINDS, numberOf, stringOf } from "../shared/keys";
import { LIMIT_ATTRIBUTE } from "../limits/limits";
import { dayOf, readUsage, type UsageDay } from "../limits/usage";
import { scanTable } from "./status-read";

export interface StoredLimits {
    /** The counter's default limit (absent: none). */
    readonly default?: number;
    /** Every key with a limit of its own, sorted by key. */
    readonly keys: ReadonlyArray<{ readonly key: string; readonly limit: number }>;
}

/** Every stored limit: a Scan of the counters table for the keys' limit items, and the default's item. */
export async function listLimits(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    options: { readonly segments?: number; readonly signal?: AbortSignal } = {},
): Promise<StoredLimits> {
    const keys: Array<{ key: string; limit: number }> = [];
    await scanTable(
        { dynamodb, ...options },
        config.countersTableName,
        (item) => {
            const key = stringOf(item, config.partitionKey);
            if (key !== undefined && item[LIMIT_ATTRIBUTE]?.N !== undefined) {
                keys.push({ key, limit: numberOf(item, LIMIT_ATTRIBUTE) });
            }
        },
        {
            expression: "#sk = :limit",
            names: { "#sk": config.sortKey },
            values: { ":limit": { S: `${config.counterPrefix}${ITEM_KINDS.limit}` } },
        },
    );
    const found = await dynamodb.send(
        new GetItemCommand({ TableName: config.countersTableName, Key: defaultLimitKey(config), ConsistentRead: true }),
    );
    const fallback = found.Item?.[LIMIT_ATTRIBUTE]?.N === undefined ? undefined : numberOf(found.Item, LIMIT_ATTRIBUTE);
    return {
        ...(fallback === undefined ? {} : { default: fallback }),
        keys: keys.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
    };
}

/** The last `days` UTC days, today included, at `now`: the first and the last, as YYYY-MM-DD. Pure. */
export function lastDays(days: number, now: number): { readonly from: string; readonly to: string } {
    return { from: dayOf(now - (days - 1) * 86_400_000), to: dayOf(now) };
}

export interface RecentUsage {
    readonly key: string;
    readonly from: string;
    readonly to: string;
    /** The days that had any usage, oldest first (with regions: summed over regions). */
    readonly days: readonly UsageDay[];
}

/** `key`'s usage over its last `days` UTC days, today included. */
export async function readRecentUsage(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    key: string,
    days: number,
    now = Date.now(),
): Promise<RecentUsage> {
    const { from, to } = lastDays(days, now);
    return { key, from, to, days: await readUsage(dynamodb, config, key, from, to) };
}
