/**
 * Where a key's best-effort lives when it is spread over `counterShards` partitions of the counters table.
 *
 * Invariant: every unit of best-effort for an item lives in its home shard, a function of its id alone, so every
 * party that writes or counts the item's unit (the client's create and delete, a heal) names the same shard whatever
 * happens to the item's other attributes. Each shard is then a counter of its own over the items homed there, and
 * the mode's bound per shard sums to the bound on the key. A heal heals each shard on its own (runtime/heal/). A
 * strict limit is kept over the key's sum by caps stored with the shards (caps.ts).
 */
import { fnv1a, type CounterConfig } from "../shared/config";

/** The shard count of a configuration: 1 (an unsharded key) when it names none. */
export function shardCount(config: Pick<CounterConfig, "counterShards">): number {
    return config.counterShards ?? 1;
}

/** The shard an item's unit lives in: its id's. */
export function homeShard(id: string, shards: number): number {
    return shards <= 1 ? 0 : fnv1a(id) % shards;
}
