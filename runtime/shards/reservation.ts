/**
 * Strict mode's reservation across a key's shards: one bound over the key, whatever moves units between its shards.
 *
 *     live client-counted items  <=  sum over shards of best-effort          (units, as on one item)
 *     a call under limit L admits only while the sum is below L              (so the client's lives never pass L)
 *
 * The limit is known only to the call (tryCreate's argument), and a backfill, a heal or another writer places units
 * without knowing it, so quotas computed from the call's limit alone cannot see another shard's excess (a shard below
 * its quota would admit while the key's sum is at the limit). So the quotas are stored with the shards
 * (quotas.ts): every shard's best-effort item carries `hc_limit` = L and its quota `hc_quota` = q_s, written on every
 * shard together, and the key is then *armed* under L.
 *
 * Invariant A (armed): if any shard carries `hc_limit`, every shard carries the same L, the quotas sum to L, and
 * count_s <= q_s + c_s on every shard s, where c_s is what create() (no limit) added there since the arming.
 *
 * The fast path, below the limit on an armed key: one conditional ADD on the home shard,
 * `hc_limit = L AND count < hc_quota` (a first write on a shard with no count: `hc_quota > 0`). Unsharded keys keep
 * today's `count < L`. Admitted at s, every other shard holds at most its quota (A), so before the write the sum was at
 * most L - 1 (plus create()'s units): the key stays within L.
 *
 * How each party keeps A:
 *   - a client reservation at s: conditional on count_s < q_s, so count_s <= q_s after it;
 *   - a client release, or a heal that lowers a shard: counts only fall;
 *   - the rearm (the slow path below): sets every shard's limit and quota in ONE transaction whose every action is
 *     conditional on the shard's count as a serializable read (TransactGetItems) saw it, with quotas that cover those
 *     counts and sum to L (`spreadQuotas`), so A holds at its commit; a count that moved since the read cancels it;
 *   - a strict backfill that adds units to a shard, and a heal that raises a shard (an item's home moved: another
 *     writer rewrote its token, or a client's release went to the new home), may lift a shard above its quota without
 *     knowing the limit: each *disarms* every shard of the key (removes `hc_limit` and `hc_quota`) in the same
 *     transaction as its raise. Unarmed, A holds vacuously and no fast-path write passes;
 *   - create() without a limit adds above the quotas: that is c_s, the bound becomes L plus what create() added, as on
 *     one item (the contract's "keys only ever written through tryCreate");
 *   - consumer and reconcile never write best-effort.
 * A rearm racing a disarming transaction: the disarming one moves a count, so whichever commits second finds it: a rearm
 * second is cancelled (its count condition fails); a disarm second removes what the rearm set.
 *
 * The slow path: when the home refuses on a key not armed under the call's limit (never armed, disarmed, or armed under
 * another limit: a lowered or raised limit), or when every shard refused on an armed key, the call reads every shard in
 * one TransactGetItems (a serializable snapshot). If the sum is at least L it refuses with that sum: the truth of that
 * instant. Otherwise it rearms under L, taking its own unit in its home in the same transaction: an admission checked
 * against the key's exact sum at the commit. A lowered limit therefore holds at once (a call under L' < L finds the key
 * armed under L, reads the sum, and refuses while it is at least L'), as on one item; a raised one rearms the quotas.
 * A cancelled rearm (a count moved) reads again, up to MAX_ROUNDS rounds within the call's deadline; out of rounds the
 * call answers "limit" with the last sum read, which happens only while writes keep moving the key's counts faster
 * than one round. A snapshot that cannot be read (in the deadline) refuses on the shards' own answers.
 *
 * Strict mode may over-approximate, never under-approximate: a rearm whose commit is in doubt is repeated with the same
 * ClientRequestToken (DynamoDB applies it once) and counts as repeated (a held slot a heal gives back).
 *
 * Cost. Below the limit on an armed key: the home shard's one conditional write (today's). A multi-item transaction is
 * sent only when the stored quotas do not serve the call: at the limit or a shard's quota (N refused writes, one
 * TransactGetItems, and a TransactWriteItems of N items when the key has room), once per key per arming (a new key, a
 * changed limit, after a backfill or a raising heal disarmed it).
 */
import { spreadQuotas } from "./quotas";

/** Rounds of the slow path (each: a snapshot, then a rearm when the key has room). */
export const MAX_ROUNDS = 3;

/**
 * One shard's answer (runtime/client/best-effort.ts `Reservation`). On "limit", `armedUnder` is the limit the shard's
 * quotas were stored for (undefined: the shard is not armed).
 */
export type Reservation =
    | { readonly outcome: "reserved"; readonly value: number; readonly repeated: boolean }
    | { readonly outcome: "limit"; readonly value: number; readonly armedUnder?: number }
    | { readonly outcome: "failed" };

/** A reservation, with the shard that took it. */
export type ShardReservation =
    | { readonly outcome: "reserved"; readonly value: number; readonly repeated: boolean; readonly shard: number }
    | { readonly outcome: "limit"; readonly value: number }
    | { readonly outcome: "failed" };

/** What a rearm did: reserved the call's unit (value: the key's sum after it), raced (a count moved), or failed. */
export type Rearm =
    | { readonly outcome: "reserved"; readonly value: number; readonly repeated: boolean }
    | { readonly outcome: "raced" }
    | { readonly outcome: "failed" };

export interface ReserveAcrossShards {
    readonly shards: number;
    readonly limit: number;
    /** The shard to try first (the home of the call's token); a rearm takes the call's unit there. */
    readonly first: number;
    /** One shard's reservation on its stored quota under `limit`, retried within the call's deadline (best-effort.ts). */
    readonly reserveIn: (shard: number) => Promise<Reservation>;
    /** Every shard's count in one serializable read (undefined: no count yet); undefined when it could not be read. */
    readonly snapshot: () => Promise<ReadonlyArray<number | undefined> | undefined>;
    /**
     * Arms every shard under `limit` with `quotas`, conditional on `counts` as read, and adds the call's unit to shard
     * `first` in the same transaction.
     */
    readonly rearm: (counts: ReadonlyArray<number | undefined>, quotas: readonly number[]) => Promise<Rearm>;
}

/** Reserves a slot in some shard of a key under `limit` (see the header). */
export async function reserveAcrossShards(args: ReserveAcrossShards): Promise<ShardReservation> {
    const { shards, limit, first } = args;
    const seen = new Map<number, number>();
    let value = 0;
    for (let round = 0; round < MAX_ROUNDS; round++) {
        // The fast path: the home, then (the key armed under this limit) the other shards, in order from it.
        for (let i = 0; i < shards && limit > 0; i++) {
            const shard = (first + i) % shards;
            const reservation = await args.reserveIn(shard);
            if (reservation.outcome !== "limit") {
                return reservation.outcome === "reserved" ? { ...reservation, shard } : reservation;
            }
            seen.set(shard, reservation.value);
            if (reservation.armedUnder !== limit) {
                break; // not armed under this limit: no shard's quota speaks for it
            }
        }
        const counts = await args.snapshot();
        if (counts === undefined) {
            value = [...seen.values()].reduce((total, count) => total + count, 0);
            break;
        }
        value = counts.reduce<number>((total, count) => total + (count ?? 0), 0);
        const quotas = spreadQuotas(
            counts.map((count, shard) => (count ?? 0) + (shard === first ? 1 : 0)),
            limit,
        );
        if (quotas === undefined) {
            return { outcome: "limit", value };
        }
        const rearm = await args.rearm(counts, quotas);
        if (rearm.outcome !== "raced") {
            return rearm.outcome === "reserved" ? { ...rearm, shard: first } : rearm;
        }
    }
    return { outcome: "limit", value };
}
