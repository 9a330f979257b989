/**
 * The heal index: a sparse GSI of the counters table listing the keys whose best-effort may be off their items.
 *
 * A key is listed by two attributes on its eventual item: `hc_heal` (the index's partition: one of 16 shards, per
 * region) and `hc_due` (when a heal is wanted, the index's sort key; the settler heals keys due by its clock). Whoever
 * learns the key needs a heal marks it: the client after a call that left best-effort off its items, the consumer on
 * a change the client did not make (a delete by another writer: due now; a tombstone left for the settler: due when
 * it may go), the backfill after flagging items.
 *
 * Invariant: a mark is never lost to a heal that did not see what it was made for. A heal removes the mark only on
 * the `hc_due` it read, and never one due after the heal began; a mark due within the clock skew of now always
 * writes a new `hc_due`, so a heal in progress keeps it. The consumer leaves a key as it is when it is listed for a
 * time more than the clock skew ahead and no later than wanted: every heal that may remove that mark begins after
 * the change the consumer saw (runtime/stream/plan.ts), and lists the key again for whatever it leaves for later.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { fnv1a, type CounterConfig } from "../shared/config";
import { numberOf } from "../shared/keys";
import { CLOCK_SKEW_MS } from "./heal-window";

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
export function healMark(
    config: Scope,
    key: string,
    now: number,
): { update: string; names: Record<string, string>; values: Record<string, AttributeValue> } {
    return {
        update: "#hh = :hh, #hd = :hd",
        names: { "#hh": HEAL_PARTITION, "#hd": HEAL_DUE },
        values: { ":hh": { S: healShard(config, key) }, ":hd": { N: String(now) } },
    };
}

/**
 * The mark a writer that wants `key` healed at `wanted` (epoch ms) makes on an eventual item that reads `item`, at
 * `now`; undefined when the key is listed already for a time that serves (see the header).
 */
export function markFor(
    config: Scope,
    key: string,
    item: Record<string, AttributeValue> | undefined,
    wanted: number,
    now: number,
): ReturnType<typeof healMark> | undefined {
    const listed = item?.[HEAL_DUE] === undefined ? undefined : numberOf(item, HEAL_DUE);
    const settled = now + CLOCK_SKEW_MS;
    if (listed !== undefined && listed > settled && listed <= wanted) {
        return undefined;
    }
    if (wanted > settled && (listed === undefined || listed > settled)) {
        return healMark(config, key, wanted);
    }
    // Due now: a value other than the one listed, so that a heal in progress keeps the mark.
    return healMark(config, key, listed === undefined || listed !== now ? now : now + 1);
}
