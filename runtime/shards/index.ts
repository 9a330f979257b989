/**
 * Sharded counters: a key's counting spread over `counterShards` partitions of the counters table, for a
 * tenant hotter than one partition. Shard count 1 is an unsharded key, item for item.
 *
 * Invariant kept here: every unit of best-effort, every marker and every eventual delta has one home shard,
 * a function of the item alone (layout.ts), so each shard keeps its mode's bound over the items homed there and
 * the sums keep it over the key; every reader of a key's counters reads all its shards (read.ts). A strict limit is
 * one bound over the sum, kept by quotas stored with the shards (reservation.ts, quotas.ts).
 */
export * from "./layout";
export * from "./read";
