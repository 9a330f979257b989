/**
 * A hot key's best-effort spread over partitions (layout.ts), and a strict limit kept over its sum (caps.ts).
 *
 * Invariant: every unit of an item lives in its id's home shard; under a strict limit L the shards' caps sum to at most
 * L and each shard's count stays within its cap.
 */
export { homeShard, shardCount } from "./layout";
export { capTag, planCaps, type CapPlan, type ShardCap } from "./caps";
