/**
 * Strict mode's reservation across a key's shards: `live <= sum of shards <= limit`, no refusal while the key
 * as a whole has room, and no new error.
 *
 * Quotas. Under limit L a shard s takes a reservation only while its count is below its quota
 * q_s = floor(L / N) + (s < L mod N ? 1 : 0) (layout.ts `shardQuota`): one conditional ADD, today's
 * reservation with q_s for L. The quotas sum to L exactly, so no slot is lost to rounding.
 *
 * Why the bound holds (one limit per key, as the client's contract asks of tryCreate):
 * 1. Per shard, `live_s <= count_s`: a life homed at s reserved its unit at s before its put (the client draws
 *    its token so that its home is the shard that took the reservation), gives it back at s, once
 *    (runtime/shared/strict-ledger.ts applies per shard: a shard's epoch is its own item's), and a heal of s
 *    writes the live items homed at s. A strict backfill's unit for an item sits in the item's home too.
 * 2. A reservation at s lands only while `count_s < q_s`, so the lives it admits at s number at most q_s at
 *    every instant: a life admitted at s held a unit there (1), and the count it was admitted under was below
 *    q_s. Summed, the client's live items are at most sum q_s = L. A backfill's units or a create() without a
 *    limit can lift a shard above its quota: that shard then refuses, and the others keep to theirs, so the sum
 *    is at most L plus what those added, as on one item.
 * 3. A lowered limit: quotas are computed from each call's limit, so shards filled under an older, higher limit
 *    keep their units until deletes bring them down; a call under the lower limit admits only in a shard below
 *    the lower quota. The key can stay above a lowered limit until deletes bring it down, as on one item.
 *
 * No refusal while the key has room. A call tries its token's home first (spreading the writes at random) and,
 * on "limit", the other shards with a quota, once each. When every shard refused, each was at its quota when
 * it answered, but not necessarily at one instant: a delete may have freed a shard tried earlier. The call then
 * reads every shard in one TransactGetItems, a serializable snapshot. If some shard is below its quota there,
 * the call tries those shards again (the next round); if none is, every shard held at least its quota at one
 * instant, so the key held at least L: the refusal is the truth of that instant, and its count is the snapshot's
 * sum. Rounds are bounded (MAX_ROUNDS) and by the call's deadline; a call out of rounds answers "limit" with
 * the last snapshot's sum, which happens only when deletes free and creates refill shards faster than the
 * call can reach them, i.e. at the limit.
 *
 * No new error: a snapshot read that fails (a TransactionConflict with a backfill's transaction, throttling) is
 * retried while retryable; when it still fails, the refusal stands on the shards' own answers ("limit").
 *
 * Cost: below the limit, the home shard's one conditional write (today's). At the limit, one refused write per
 * shard with a quota and one TransactGetItems of N items (2 RCU each): measured by the hot-key ceiling's
 * `atLimit` figures.
 */
import { shardQuota } from "./layout";

/** Rounds of the fallback (each: the shards below their quota in the last snapshot, once each). */
export const MAX_ROUNDS = 3;

/** One shard's answer (runtime/client/best-effort.ts `Reservation`). */
export type Reservation =
    | { readonly outcome: "reserved"; readonly value: number; readonly repeated: boolean }
    | { readonly outcome: "limit"; readonly value: number }
    | { readonly outcome: "failed" };

/** A reservation, with the shard that took it. */
export type ShardReservation =
    | { readonly outcome: "reserved"; readonly value: number; readonly repeated: boolean; readonly shard: number }
    | { readonly outcome: "limit"; readonly value: number }
    | { readonly outcome: "failed" };

export interface ReserveAcrossShards {
    readonly shards: number;
    readonly limit: number;
    /** The shard to try first (the home of the call's token). */
    readonly first: number;
    /** One shard's conditional reservation under `quota`, retried within the call's deadline (best-effort.ts `reserve`). */
    readonly reserveIn: (shard: number, quota: number) => Promise<Reservation>;
    /** Every shard's count in one serializable read; undefined when it could not be read in the call's deadline. */
    readonly snapshot: () => Promise<readonly number[] | undefined>;
}

/** Reserves a slot in some shard of a key under `limit` (see the header). */
export async function reserveAcrossShards(args: ReserveAcrossShards): Promise<ShardReservation> {
    const { shards, limit, first } = args;
    const quota = (shard: number) => shardQuota(limit, shards, shard);
    // The home first, then every other shard with a quota, in order from it.
    let candidates = Array.from({ length: shards }, (_, i) => (first + i) % shards).filter((shard) => quota(shard) > 0);
    if (candidates.length === 0) {
        // A limit of 0: no shard has a quota; the count is still the key's.
        const counts = await args.snapshot();
        return { outcome: "limit", value: counts?.reduce((total, count) => total + count, 0) ?? 0 };
    }
    // The key's count as last seen: the shards' own answers until a snapshot sums them at one instant.
    const seen = new Map<number, number>();
    let value = 0;
    for (let round = 0; round < MAX_ROUNDS && candidates.length > 0; round++) {
        for (const shard of candidates) {
            const reservation = await args.reserveIn(shard, quota(shard));
            if (reservation.outcome !== "limit") {
                return reservation.outcome === "reserved" ? { ...reservation, shard } : reservation;
            }
            seen.set(shard, reservation.value);
        }
        const counts = await args.snapshot();
        if (counts === undefined) {
            value = [...seen.values()].reduce((total, count) => total + count, 0);
            break;
        }
        value = counts.reduce((total, count) => total + count, 0);
        candidates = counts.flatMap((count, shard) => (count < quota(shard) ? [shard] : []));
    }
    return { outcome: "limit", value };
}
