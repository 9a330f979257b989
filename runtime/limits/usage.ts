/**
 * Usage history: per key, per UTC day, the creates, the deletes, the peak of the eventual count, and the limit in force.
 *
 * Invariant: the history is the stream's, record for record. The consumer applies each record once (runtime/stream/),
 * and the same write that moves the eventual count adds the record to its day: a +1 is a create, a -1 a delete, the
 * peak is the highest count after any record of the day (records of one key in stream order). The current day's
 * tallies ride on the eventual item (`hc_day`: no extra write); the first record of a later day moves them to an item
 * of their own (`<prefix>usage#<day>`, one write per key per day). A record of a day already moved (a late one) adds
 * to that day's item. A day's item carries `hc_expires` (the counters table's TTL) at the end of the retention, and
 * moving a day also deletes the key's days the retention has dropped (`dropDaysBefore`), so the history stays within
 * the retention under every placement, with TTL or without.
 */
import { DeleteItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { numberOf, prefixOf, stringOf, usagePartitionKey, ITEM_KINDS } from "../shared/keys";

/** One day of a key's usage. */
export interface UsageDay {
    /** The UTC day, YYYY-MM-DD. */
    readonly day: string;
    /** Records that made an item count (creates). */
    readonly creates: number;
    /** Records that made an item stop counting (deletes). */
    readonly deletes: number;
    /** The highest eventual count after any record of the day (with regions: summed over regions, an upper bound). */
    readonly peak: number;
    /** The limit in force when the day's last record was counted (absent: none). */
    readonly limit?: number;
}

/** The eventual item's attribute holding the current day's tallies. */
export const DAY_ATTRIBUTE = "hc_day";
/** The TTL attribute of a day's item (and of the stream's progress items). */
export const EXPIRES_ATTRIBUTE = "hc_expires";

/** The UTC day of an epoch-ms time. */
export function dayOf(ms: number): string {
    return new Date(ms).toISOString().slice(0, 10);
}

/** The UTC day `days` before `day`. */
export function daysBefore(day: string, days: number): string {
    return dayOf(Date.parse(`${day}T00:00:00Z`) - days * 86_400_000);
}

/** Reads a day's tallies from the eventual item's map or a day's item. */
export function usageDayOf(source: Record<string, AttributeValue> | undefined): UsageDay | undefined {
    const day = stringOf(source, "day");
    if (source === undefined || day === undefined) {
        return undefined;
    }
    return {
        day,
        creates: numberOf(source, "creates"),
        deletes: numberOf(source, "deletes"),
        peak: numberOf(source, "peak"),
        ...(source["limit"]?.N === undefined ? {} : { limit: numberOf(source, "limit") }),
    };
}

/** A day's tallies as attribute values (the eventual item's map, or a day item's attributes). */
export function usageAttributes(usage: UsageDay): Record<string, AttributeValue> {
    return {
        day: { S: usage.day },
        creates: { N: String(usage.creates) },
        deletes: { N: String(usage.deletes) },
        peak: { N: String(usage.peak) },
        ...(usage.limit === undefined ? {} : { limit: { N: String(usage.limit) } }),
    };
}

/** Folds a day's records into its tallies: each delta in order from `start`, the count after it checked for the peak. */
export function addToDay(usage: UsageDay, start: number, deltas: readonly number[], limit: number | undefined): UsageDay {
    let count = start;
    let peak = usage.peak;
    let creates = usage.creates;
    let deletes = usage.deletes;
    for (const delta of deltas) {
        count += delta;
        creates += delta > 0 ? delta : 0;
        deletes += delta < 0 ? -delta : 0;
        peak = Math.max(peak, count);
    }
    return { day: usage.day, creates, deletes, peak, ...(limit === undefined ? {} : { limit }) };
}

/**
 * `key`'s usage from `from` to `to` (inclusive): the days that had any, oldest first; with regions, summed over every
 * region that counted any (member or not).
 */
export async function readUsage(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    key: string,
    from: string,
    to: string,
): Promise<UsageDay[]> {
    const byDay = new Map<string, UsageDay>();
    const add = (day: UsageDay) => {
        if (day.day >= from && day.day <= to) {
            const seen = byDay.get(day.day);
            byDay.set(day.day, seen === undefined ? day : merge(seen, day));
        }
    };
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await dynamodb.send(
            new QueryCommand({
                TableName: config.countersTableName,
                KeyConditionExpression: "#pk = :pk",
                ExpressionAttributeNames: { "#pk": config.partitionKey },
                ExpressionAttributeValues: { ":pk": { S: usagePartitionKey(key) } },
                ConsistentRead: true,
                ...(start === undefined ? {} : { ExclusiveStartKey: start }),
            }),
        );
        for (const item of page.Items ?? []) {
            const day = usageDayOf(item);
            if (day !== undefined && (stringOf(item, config.sortKey) ?? "").includes(ITEM_KINDS.usage)) {
                add(day);
            }
        }
        start = page.LastEvaluatedKey;
    } while (start !== undefined);
    for (const current of await readCurrentDays(dynamodb, config, key)) {
        add(current);
    }
    return [...byDay.values()].sort((a, b) => (a.day < b.day ? -1 : 1));
}

function merge(a: UsageDay, b: UsageDay): UsageDay {
    const limit = a.limit === undefined ? b.limit : b.limit === undefined ? a.limit : Math.max(a.limit, b.limit);
    return {
        day: a.day,
        creates: a.creates + b.creates,
        deletes: a.deletes + b.deletes,
        peak: a.peak + b.peak,
        ...(limit === undefined ? {} : { limit }),
    };
}

/** The current day of every region's eventual item of `key` (one Query of the key's partition of counter items). */
async function readCurrentDays(dynamodb: DynamoDBClient, config: CounterConfig, key: string): Promise<UsageDay[]> {
    const page = await dynamodb.send(
        new QueryCommand({
            TableName: config.countersTableName,
            KeyConditionExpression: "#pk = :pk AND begins_with(#sk, :prefix)",
            ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey },
            ExpressionAttributeValues: { ":pk": { S: key }, ":prefix": { S: config.counterPrefix } },
            ConsistentRead: true,
        }),
    );
    return (page.Items ?? [])
        .filter((item) => (stringOf(item, config.sortKey) ?? "").endsWith(ITEM_KINDS.eventual))
        .map((item) => usageDayOf(item[DAY_ATTRIBUTE]?.M))
        .filter((day): day is UsageDay => day !== undefined);
}

/** The most day items one move of a day deletes: days dropped beyond them go with the next move, or by TTL. */
const DROP_PAGE = 25;

/** Deletes `key`'s day items (this process's region) older than `day`: days the retention has dropped. */
export async function dropDaysBefore(dynamodb: DynamoDBClient, config: CounterConfig, key: string, day: string): Promise<void> {
    const prefix = `${prefixOf(config)}${ITEM_KINDS.usage}`;
    const page = await dynamodb.send(
        new QueryCommand({
            TableName: config.countersTableName,
            KeyConditionExpression: "#pk = :pk AND #sk BETWEEN :from AND :to",
            ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey },
            ExpressionAttributeValues: {
                ":pk": { S: usagePartitionKey(key) },
                ":from": { S: prefix },
                ":to": { S: `${prefix}${daysBefore(day, 1)}` },
            },
            ProjectionExpression: "#pk, #sk",
            Limit: DROP_PAGE,
        }),
    );
    for (const item of page.Items ?? []) {
        await dynamodb.send(
            new DeleteItemCommand({
                TableName: config.countersTableName,
                Key: { [config.partitionKey]: item[config.partitionKey]!, [config.sortKey]: item[config.sortKey]! },
            }),
        );
    }
}
