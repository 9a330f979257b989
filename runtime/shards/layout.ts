/**
 * Where a key's counting lives when it is spread over `counterShards` partitions of the counters table.
 *
 * Shard s of key k lives under the counters-table partition key `k` for s = 0 and `k` + U+0000 + `s` for
 * s >= 1, so shard count 1 is the layout of an unsharded key, item for item. The client refuses U+0000 in a
 * key when the count is above 1 and the consumer parks such a record, so no user key names another key's
 * shard (the mapping is injective). A shard count above 1 needs a counters table of its own: in the
 * same-table placement these partition keys would be the user's.
 *
 * Each shard holds a best-effort item, an eventual partial, and the markers of the ids homed there:
 * - an id's marker, and the eventual partial its records move, live in shard `markerShard(id)`: the
 *   consumer groups a batch by (key, shard), so two batch groups of one key conflict only on ids of one shard;
 * - a unit of best-effort (a client's reservation or increment, a strict backfill's unit) lives in the
 *   item's home, `homeShard`: the shard of its client token when it has one (the client draws its token
 *   until the token's shard is the shard it wrote), else the shard of its id. The home is a property of the
 *   item, so every party that reads the item (a delete, a heal, a backfill) finds the same shard;
 * - so each shard is a counter of its own, over the items homed there: the bound a mode keeps on one item
 *   (utilization `best-effort <= live`, strict `live <= best-effort`) it keeps per shard, and a sum of per-shard
 *   bounds is the bound on the key. A strict limit is kept over the key's sum, not per shard: stored quotas and
 *   their disarming by whoever moves units between shards (reservation.ts, quotas.ts).
 *
 * `h` is a fixed 32-bit FNV-1a (config.ts), so the layout does not depend on a power of two.
 */
import { fnv1a, type CounterTableConfig } from "../shared/config";
import { PARTITION_KEY_MAX_BYTES } from "../shared/key-limits";
import { newToken } from "../shared/tokens";

/** Separates a key from its shard number in a shard's partition key. */
export const SHARD_SEPARATOR = "\u0000";

/** The shard count of a configuration: 1 (an unsharded key) when it names none. */
export function shardCount(config: Pick<CounterTableConfig, "counterShards">): number {
    return config.counterShards ?? 1;
}

/** The counters-table partition key of shard `shard` of `key`. */
export function shardPartitionKey(key: string, shard: number): string {
    return shard === 0 ? key : `${key}${SHARD_SEPARATOR}${shard}`;
}

/** The partition keys of every shard of `key`, shard 0 first. */
export function shardPartitionKeys(key: string, shards: number): string[] {
    return Array.from({ length: shards }, (_, shard) => shardPartitionKey(key, shard));
}

/** The key and shard a counters-table partition key belongs to, under a shard count (unsharded: the key itself). */
export function shardOfPartitionKey(partitionKey: string, shards: number): { readonly key: string; readonly shard: number } {
    const at = partitionKey.lastIndexOf(SHARD_SEPARATOR);
    if (shards <= 1 || at < 0) {
        return { key: partitionKey, shard: 0 };
    }
    const shard = Number(partitionKey.slice(at + 1));
    return Number.isInteger(shard) && shard > 0 && shard < shards
        ? { key: partitionKey.slice(0, at), shard }
        : { key: partitionKey, shard: 0 };
}

/** The bytes a shard's partition key adds to its key (the separator and the shard's digits). */
export function shardKeyOverheadBytes(shards: number): number {
    return shards <= 1 ? 0 : Buffer.byteLength(`${SHARD_SEPARATOR}${shards - 1}`, "utf8");
}

/** The shard of `value` (an id, a token) among `shards`. */
export function shardOf(value: string, shards: number): number {
    return shards <= 1 ? 0 : fnv1a(value) % shards;
}

/** The shard an id's marker lives in (and the eventual partial its records move). */
export function markerShard(id: string, shards: number): number {
    return shardOf(id, shards);
}

/** The shard a client life's unit lives in: its token's. */
export function lifeShard(token: string, shards: number): number {
    return shardOf(token, shards);
}

/**
 * A new client token made at `at` whose life is homed in shard `shard`: tokens are drawn until one is (1 in N draws on
 * average).
 */
export function tokenHomedIn(shard: number, shards: number, at?: number): string {
    for (;;) {
        const token = newToken(at);
        if (lifeShard(token, shards) === shard) {
            return token;
        }
    }
}

/**
 * The shard that holds an item's unit of best-effort, and whose heal counts it: its client token's, else
 * its id's (a strict backfill's unit for an item no client wrote).
 */
export function homeShard(id: string, token: string | undefined, shards: number): number {
    return token === undefined ? markerShard(id, shards) : lifeShard(token, shards);
}

/**
 * The problem with `key` as a sharded key (undefined: none): above one shard it must not hold the separator
 * (it would name another key's shard) and must leave room for the shard's suffix under DynamoDB's limit.
 */
export function shardedKeyProblem(key: string, shards: number): string | undefined {
    if (shards <= 1) {
        return undefined;
    }
    if (key.includes(SHARD_SEPARATOR)) {
        return "must not contain U+0000 when counterShards is above 1 (it separates a key from its shard number)";
    }
    const max = PARTITION_KEY_MAX_BYTES - shardKeyOverheadBytes(shards);
    return Buffer.byteLength(key, "utf8") > max
        ? `must be at most ${max} bytes when counterShards is ${shards} (its shards' partition keys add ${shardKeyOverheadBytes(shards)} bytes)`
        : undefined;
}
