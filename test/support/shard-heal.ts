/**
 * What the sharded heal tests share (runtime-shard-heal, runtime-shard-heal-index): a key over N = 3 shards, the quiet
 * window Q, the heal's clock T0 and a token time OLD enough to count, and the shapes their assertions compare.
 */
import type { ShardHealResult } from "../../runtime/heal/heal";
import { tokenHomedIn } from "../../runtime/shards/layout";
import type { FatalQueue } from "../../runtime/stream/fatal";

export const N = 3;
export const Q = 60_000;
export const T0 = 1_800_000_000_000;
export const OLD = T0 - 2 * Q;
export const noFatal: FatalQueue = { park: async () => true };

/** A client token made at `at` whose life is homed in `shard`. */
export const tokenIn = (shard: number, at = OLD): string => tokenHomedIn(shard, N, at);

/** A shard's result without its write units (the parity layer bills index writes: not what these tests check). */
export const shape = (results: readonly ShardHealResult[] | undefined) => results?.map(({ writeUnits: _units, ...rest }) => rest);
