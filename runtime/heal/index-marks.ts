/**
 * The heal index: a sparse GSI of the counters table listing the keys whose best-effort may be off their items.
 *
 * A key is listed by two attributes on its eventual item: `hc_heal` (the index's partition: one of 16 shards, per
 * region) and `hc_due` (when it was last marked, the index's sort key). Whoever learns the key needs a heal marks it:
 * the client after a call that left best-effort off its items, the consumer on a change the client did not make (a
 * delete by another writer, a tombstone left for the settler), the backfill after flagging items. A mark overwrites
 * `hc_due`, and a heal removes the mark only on the `hc_due` it read, so a mark made while a heal runs is never lost.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { fnv1a, type CounterConfig } from "../shared/config";

/** The GSI's name; the component creates it on the counters table. */
export const HEAL_INDEX_NAME = "heal-index";

/** Shards of the index's partition key, so that marks spread over partitions. */
export const HEAL_SHARDS = 16;

/** The index's partition key attribute (S) and sort key attribute (N, epoch ms). */
export const HEAL_PARTITION = "hc_heal";
export const HEAL_DUE = "hc_due";

type Scope = Pick<CounterConfig, "regions">;

/** The index partition a key is listed under, in this process's region. */
export function healShard(config: Scope, key: string): string {
    return healShardValue(config, fnv1a(key) % HEAL_SHARDS);
}

/** The value of `hc_heal` of index shard `shard` in this process's region. */
export function healShardValue(config: Scope, shard: number): string {
    return config.regions === undefined ? String(shard) : `${config.regions.current}#${shard}`;
}

/** The SET clause (without "SET") that lists `key` as due at `now`. */
export function healMark(config: Scope, key: string, now: number): { update: string; names: Record<string, string>; values: Record<string, AttributeValue> } {
    return {
        update: "#hh = :hh, #hd = :hd",
        names: { "#hh": HEAL_PARTITION, "#hd": HEAL_DUE },
        values: { ":hh": { S: healShard(config, key) }, ":hd": { N: String(now) } },
    };
}
