/**
 * A sharded strict key's stored quotas: what each shard's best-effort item carries so that one conditional write on it
 * can admit a life without reading the other shards. The argument that they keep the key's bound is stated once, in
 * reservation.ts; this module holds the quota arithmetic and the writes that disarm a key.
 *
 * Attributes (shard best-effort items of a key with `counterShards` above 1, strict mode only):
 *   - `hc_limit` (N): the limit the quotas were set for; the same on every shard, written on every shard together;
 *   - `hc_quota` (N): the shard's quota under it; the quotas of one arming sum to `hc_limit`.
 * Size: two numbers per shard item, whatever the traffic. Writers: the client's rearm (one transaction over every
 * shard, runtime/client/best-effort.ts). Removers: a disarm (`disarmUpdate`), which a strict backfill that adds units and
 * a heal that raises a shard send to every shard of the key in their own transaction; a rearm overwrites both.
 */
import type { Update } from "@aws-sdk/client-dynamodb";
import { bestEffortSortKey, COUNTER_ATTRIBUTES, countersTable, type CounterTableConfig } from "../shared/config";
import { shardPartitionKeys } from "./layout";

/**
 * The quotas a rearm stores for `counts` (each shard's count, the rearming call's unit included) under `limit`: each
 * shard keeps at least its count, and the room left (`limit` minus the sum) is spread evenly, the first
 * `room mod N` shards taking one more, so that every shard can admit on its own. Undefined when there is no room for
 * the counts as they are (their sum is above `limit`): the key must not be armed.
 */
export function spreadQuotas(counts: readonly number[], limit: number): number[] | undefined {
    const room = limit - counts.reduce((sum, count) => sum + count, 0);
    if (room < 0) {
        return undefined;
    }
    const shards = counts.length;
    return counts.map((count, shard) => count + Math.floor(room / shards) + (shard < room % shards ? 1 : 0));
}

/**
 * The update that disarms one shard's best-effort item: the stored limit and quota go, so no conditional reservation
 * passes on it until a rearm sets them again from a serializable read of every shard. Unconditional: it only sends
 * calls to the slow path. On a shard with no item yet it leaves an item holding nothing but its key, which no reader
 * tells from an absent one (a count of 0, no version: runtime/heal/heal.ts heals it as a shard no client wrote).
 */
export function disarmUpdate(config: CounterTableConfig, partitionKey: string): Update {
    return {
        TableName: countersTable(config),
        Key: { [config.partitionKey]: { S: partitionKey }, [config.sortKey]: { S: bestEffortSortKey(config) } },
        UpdateExpression: "REMOVE #quotaLimit, #quota",
        ExpressionAttributeNames: { "#quotaLimit": COUNTER_ATTRIBUTES.quotaLimit, "#quota": COUNTER_ATTRIBUTES.quota },
    };
}

/** The disarm of every shard of `key` but those in `except` (whose own update in the transaction disarms them). */
export function disarmUpdates(config: CounterTableConfig, key: string, shards: number, except: readonly number[] = []): Update[] {
    return shardPartitionKeys(key, shards)
        .filter((_, shard) => !except.includes(shard))
        .map((partitionKey) => disarmUpdate(config, partitionKey));
}

/** The clause a shard's own update in a disarming transaction appends to its UpdateExpression (with `disarmNames`). */
export const DISARM_CLAUSE = "REMOVE #quotaLimit, #quota";

/** The names DISARM_CLAUSE uses. */
export function disarmNames(): Record<string, string> {
    return { "#quotaLimit": COUNTER_ATTRIBUTES.quotaLimit, "#quota": COUNTER_ATTRIBUTES.quota };
}
