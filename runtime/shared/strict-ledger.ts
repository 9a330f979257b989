/**
 * Strict mode's accounting: what a unit of best-effort stands for, who adds it, and who gives it back.
 *
 * Invariant (per key, at every instant, whatever the interleaving of the parties below):
 *
 *     live client-counted items  <=  best-effort  <=  limit + units strict backfills added past it
 *
 * where an item is client-counted while it carries the client's token or its marker holds a backfill's unit
 * (`hc_be`). Best-effort is a ledger of units, each owned by one item life (or by none: a held slot):
 *
 *     best-effort = (the truth the last heal wrote, in epoch E)
 *                 + (units added since: client reserves, and backfill units flagged `hc_be = E`)
 *                 - (units given back since, each one of those added units, at most once)
 *
 * The epoch `hc_epoch` (on the best-effort item) is moved by every heal that lowers the count: such a heal
 * absorbed units (of lives that ended, of slots held back) and re-derived the rest from the table. A unit
 * flagged in an earlier epoch is then part of that truth, and no client may give it back: only a later heal,
 * which counts the items as they are, can. So a unit is given back at most once per item life.
 *
 * How each party keeps it:
 *   - client, strict create: reserves a unit (conditional on the limit) before its put; a put that certainly wrote
 *     nothing releases it once, a put in doubt keeps it (a held slot).
 *   - client, strict delete: touches best-effort first (bumping the version, reading the epoch E), soft-deletes,
 *     then releases one unit: for an item carrying its token, the life's own reservation (its soft delete is the
 *     one that ended that life); for a token-less item, only after taking the marker's flag on the condition
 *     `hc_be = E` (the unit was added in this epoch and not taken before). No heal can commit between the touch
 *     and the release (the touch bumps the version, and the quiet window outlasts the call: heal.ts, A1-A4), so
 *     the epoch read at the touch is the epoch at the release.
 *   - client, a life that may have two items: a put attempt the SDK gave up on may still be applied later, and a
 *     call repeats a put that may have committed; so one life (one token) can put its item twice, when the first
 *     item was deleted and removed (by the consumer, reconcile, TTL or another writer) before the second landed.
 *     Its slot must be given back once. The marker's `hc_repeated_<token>` says so:
 *       - the creating call, before the inspection that precedes any repeat, sets it to "pending", on the
 *         condition that it is absent or "pending" (no repeat when the write fails; when it finds "released", a
 *         delete saw an item of the life, so the life existed and ended: the call answers "mine" and stops), and
 *         its inspection answers "mine" when it reads "released";
 *       - a strict delete of a life whose marker says "pending", or whose creating call may still send an
 *         attempt (the token is younger than the longest client deadline plus the clock skew:
 *         resource-writes.ts, `mayStillBeRepeated`), sets it to "released" before its soft delete, on the
 *         condition that it is absent or "pending", and releases only when that write succeeded; a delete that
 *         finds "released" (or loses the condition) soft-deletes and holds the slot.
 *     Why one release: a second item of the life needs a second attempt, sent only after "pending" was written
 *     and after an inspection that found no item and no "released". The delete that ended the first item read
 *     that item, then the marker. If it read before "pending" existed, the life was young (a repeat can come
 *     only within the creating call's deadline), so it wrote "released" before its soft delete, hence before
 *     the item's removal; the creating call then either finds "released" when it marks, or, having marked
 *     first, finds the item or "released" when it inspects (item first, then marker), and does not repeat. If it
 *     read after, it saw "pending" and wrote "released" the same way. A late attempt (sent before the mark)
 *     lands as a second item only when a repeat was sent, so after "pending", and its delete reads "released"
 *     after reading that item. An old life without the mark has one item for good: its delete releases as any.
 *   - backfill (strict): adds one unit, and flags the marker with the epoch it read, only for a live item that
 *     carries no client token (a client item's reserve already holds its unit) and has no marker yet; the
 *     best-effort update is conditional on that epoch, in the same transaction as the flags. It writes
 *     best-effort as a client does (version, last-write time, heal shard), so the heal index lists the key.
 *   - heal (settler): sets best-effort to the live client-counted items (every live item carrying the token or
 *     any flag), conditional on no best-effort write since its read; a heal that lowers the count opens a new
 *     epoch in the same write. Units of ended lives are absorbed here, once: the flags they leave have no power.
 *   - consumer and reconcile: never write best-effort or flags; they move eventual and marker states only.
 *   - other writers: may put, overwrite or hard-delete any item. A hard delete ends a life whose unit stays in
 *     best-effort (a held slot) until a heal absorbs it; a later life of the same id, put by them, has no unit.
 *
 * A heal that lowers the count therefore costs liveness, never safety: a delete of an item made before it holds its
 * slot until the next heal (the client cannot tell which units that heal absorbed, e.g. of an item another writer
 * moved out of the selection and back, or deleted: the item keeps its token).
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { COUNTER_ATTRIBUTES } from "./config";
import { tokenTime } from "./tokens";

/** How far the clocks of API hosts and the healer may differ (the heal's assumption A3). */
export const LEDGER_CLOCK_SKEW_MS = 60_000;

/**
 * Strict delete of an item carrying the client's token: whether its reservation is a unit of the current epoch.
 * True in epoch 0 (no heal ever lowered the key), or when the creating call began after the epoch opened, by more
 * than the clock skew: its reserve then landed after that heal read the key. Otherwise the heal re-derived (or
 * absorbed) the unit, and only a later heal may give it back; the release is not sent and the slot is held.
 */
export function reservedInEpoch(createToken: string, epoch: { readonly epoch: number; readonly openedAt: number }): boolean {
    if (epoch.epoch === 0) {
        return true;
    }
    const created = tokenTime(createToken);
    return created !== undefined && created > epoch.openedAt + LEDGER_CLOCK_SKEW_MS;
}

/** The values of a marker's `hc_repeated_<token>` (see the header). */
export const REPEATED = Object.freeze({ pending: "pending", released: "released" } as const);

/** The marker attribute that says whether the put of the life `token` names was repeated, and whether its slot was given back. */
export function repeatedAttribute(token: string): string {
    return `${COUNTER_ATTRIBUTES.repeatedPrefix}${token}`;
}

/** Whether a marker says best-effort holds a backfill's unit for its item (hc_be: an epoch, or true before epochs). */
export function hasBackfillUnit(marker: Record<string, AttributeValue> | undefined): boolean {
    const flag = marker?.[COUNTER_ATTRIBUTES.beCounted];
    return flag?.BOOL === true || flag?.N !== undefined;
}
