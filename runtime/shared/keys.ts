/**
 * The keys of the counter's own items, and the bounds a counter key and an id must keep for them to fit.
 *
 * Every counter item of key K lives in the counters table under a partition key derived from K alone:
 * - best-effort, one item per shard s: partition `K` (s = 0) or `K` U+0000 `s`, sort key `<prefix>best-effort`;
 * - eventual and the key's stored limit: partition `K`, sort keys `<prefix>eventual` and `<counterPrefix>limit`;
 * - usage history, one item per UTC day: partition `K` U+0000 `u`, sort key `<prefix>usage#<YYYY-MM-DD>`.
 * `<prefix>` is the counter prefix, or `<counterPrefix>@<region>#` in a multi-region counter (each region writes only
 * its own items; the stored limit is the one item every region shares). A key holding U+0000 is refused everywhere,
 * so no key names another key's shard or history. The counter-wide items (the default limit, the stream's progress,
 * the settler's cursor, backfill checkpoints) sit under partition keys that start with the counter prefix, with sort
 * keys no key's items use.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { CounterConfig, CounterTableLayout } from "./config";
import { regionalCounterPrefix, regionCounterPrefix, type RegionsConfig } from "../regions/config";

/** DynamoDB's key size limits (bytes, UTF-8). */
export const PARTITION_KEY_MAX_BYTES = 2048;
export const SORT_KEY_MAX_BYTES = 1024;

/** Separates a key from what follows it in a derived partition key (a shard number, the usage suffix). */
export const KEY_SEPARATOR = "\u0000";

/** The bytes a derived partition key adds to its key: the separator and two characters. */
const DERIVED_KEY_OVERHEAD_BYTES = 3;

/** The longest counter key: room for the derived partition keys under DynamoDB's limit. */
export const KEY_MAX_BYTES = PARTITION_KEY_MAX_BYTES - DERIVED_KEY_OVERHEAD_BYTES;

/** A DynamoDB key of the counters table. */
export type ItemKey = Record<string, AttributeValue>;

type Scope = Pick<CounterTableLayout, "partitionKey" | "sortKey" | "counterPrefix"> & { readonly regions?: RegionsConfig };

function itemKey(scope: Scope, partition: string, sort: string): ItemKey {
    return { [scope.partitionKey]: { S: partition }, [scope.sortKey]: { S: sort } };
}

/** The problem with `key` as a counter key (undefined: none). */
export function keyProblem(key: unknown): string | undefined {
    if (typeof key !== "string" || key.length === 0) {
        return "must be a non-empty string";
    }
    if (key.includes(KEY_SEPARATOR)) {
        return "must not contain U+0000 (it separates a key from its shard number)";
    }
    const bytes = Buffer.byteLength(key, "utf8");
    return bytes > KEY_MAX_BYTES ? `must be at most ${KEY_MAX_BYTES} bytes (got ${bytes})` : undefined;
}

/** The problem with `id` as a resource id (undefined: none): a DynamoDB sort key outside the counter's prefix. */
export function idProblem(id: unknown, counterPrefix: string): string | undefined {
    if (typeof id !== "string" || id.length === 0) {
        return "must be a non-empty string";
    }
    const bytes = Buffer.byteLength(id, "utf8");
    if (bytes > SORT_KEY_MAX_BYTES) {
        return `must be at most ${SORT_KEY_MAX_BYTES} bytes (got ${bytes})`;
    }
    return id.startsWith(counterPrefix) ? `must not start with the reserved prefix "${counterPrefix}"` : undefined;
}

/** The counters-table partition key of shard `shard` of `key`. */
export function shardPartitionKey(key: string, shard: number): string {
    return shard === 0 ? key : `${key}${KEY_SEPARATOR}${shard}`;
}

/** The key and shard a counters-table partition key of a best-effort item belongs to. */
export function shardOfPartitionKey(partitionKey: string): { readonly key: string; readonly shard: number } {
    const at = partitionKey.lastIndexOf(KEY_SEPARATOR);
    const shard = at < 0 ? 0 : Number(partitionKey.slice(at + 1));
    return at < 0 || !Number.isInteger(shard) ? { key: partitionKey, shard: 0 } : { key: partitionKey.slice(0, at), shard };
}

/** The sort key suffixes of the counter items (after the regional prefix). */
export const ITEM_KINDS = Object.freeze({ bestEffort: "best-effort", eventual: "eventual", limit: "limit", usage: "usage#" });

/** The best-effort item of shard `shard` of `key`, in this process's region (or `region`). */
export function bestEffortKey(config: Scope, key: string, shard: number, region?: string): ItemKey {
    return itemKey(config, shardPartitionKey(key, shard), `${prefixOf(config, region)}${ITEM_KINDS.bestEffort}`);
}

/** The eventual item of `key`, in this process's region (or `region`). */
export function eventualKey(config: Scope, key: string, region?: string): ItemKey {
    return itemKey(config, key, `${prefixOf(config, region)}${ITEM_KINDS.eventual}`);
}

/** The stored limit of `key`: one item every region shares. */
export function limitKey(config: Scope, key: string): ItemKey {
    return itemKey(config, key, `${config.counterPrefix}${ITEM_KINDS.limit}`);
}

/** The counter-wide default limit. */
export function defaultLimitKey(config: Scope): ItemKey {
    return itemKey(config, `${config.counterPrefix}limits`, `${config.counterPrefix}default-limit`);
}

/** The partition of `key`'s usage history. */
export function usagePartitionKey(key: string): string {
    return `${key}${KEY_SEPARATOR}u`;
}

/** The usage item of `key` for UTC day `day` (YYYY-MM-DD), in this process's region (or `region`). */
export function usageKey(config: Scope, key: string, day: string, region?: string): ItemKey {
    return itemKey(config, usagePartitionKey(key), `${prefixOf(config, region)}${ITEM_KINDS.usage}${day}`);
}

/** The partition of the consumer's progress items, one per stream shard. */
export function streamPartitionKey(config: Pick<Scope, "counterPrefix">): string {
    return `${config.counterPrefix}stream`;
}

/** The progress item of stream shard `shardId` (runtime/stream/progress.ts), in this process's region. */
export function streamShardKey(config: Scope, shardId: string): ItemKey {
    return itemKey(config, streamPartitionKey(config), `${regionalCounterPrefix(config)}shard#${shardId}`);
}

/** The settler's audit cursor, in this process's region. */
export function settlerCursorKey(config: Scope): ItemKey {
    return itemKey(config, `${config.counterPrefix}settler`, `${regionalCounterPrefix(config)}cursor`);
}

/** The partition of the backfill runs' checkpoints. */
export function backfillPartitionKey(config: Pick<Scope, "counterPrefix">): string {
    return `${config.counterPrefix}backfill`;
}

/** A backfill run's checkpoint of one segment, in this process's region. */
export function backfillCheckpointKey(config: Scope, run: string, segment: number): ItemKey {
    return itemKey(config, backfillPartitionKey(config), `${regionalCounterPrefix(config)}run#${run}#${segment}`);
}

/** The sort-key prefix of every checkpoint of backfill run `run`. */
export function backfillRunPrefix(config: Scope, run: string): string {
    return `${regionalCounterPrefix(config)}run#${run}#`;
}

/** The counter prefix of `region`'s items, or of this process's region. */
export function prefixOf(config: Scope, region?: string): string {
    return region === undefined ? regionalCounterPrefix(config) : regionCounterPrefix(config.counterPrefix, region);
}

/** Reads a string attribute of a key or item (undefined when absent or not a string). */
export function stringOf(item: Record<string, unknown> | undefined, name: string): string | undefined {
    const value = item?.[name] as { readonly S?: unknown } | undefined;
    return value !== null && typeof value === "object" && typeof value.S === "string" ? value.S : undefined;
}

/** Reads a number attribute (0 when absent or not a number). */
export function numberOf(item: Record<string, unknown> | undefined, name: string): number {
    const value = item?.[name] as { readonly N?: unknown } | undefined;
    const n = value !== null && typeof value === "object" && typeof value.N === "string" ? Number(value.N) : 0;
    return Number.isFinite(n) ? n : 0;
}

/** The config fields every key above needs. */
export type KeyScope = Scope;
export type { CounterConfig };
