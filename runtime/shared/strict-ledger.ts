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
 *     Its slot must be given back once. Two attributes of the id's marker say so, each one token (UUIDv7 text,
 *     which sorts by the time it was made, so `<` between two tokens compares their lives' ages):
 *       - `hc_released`: the greatest token whose slot a delete gave back through the marker. A strict delete of a
 *         life U that goes through the marker sets it to U on the condition that it is absent or below U, and
 *         releases only when that write succeeded; a delete that finds it at or above U holds the slot. It only
 *         grows (until the consumer removes it: below), so U gets at most one release through it, however many items
 *         U has;
 *       - `hc_pending`: the greatest token whose creating call was about to repeat its put. The creating call sets it
 *         to U, before the inspection that precedes any repeat, on the condition that `hc_released` is below U (no
 *         repeat when the write fails; when it finds `hc_released` = U, a delete saw an item of the life, so the life
 *         existed and ended: the call answers "mine" and stops); a value already at or above U covers U. Its
 *         inspection answers "mine" when it reads `hc_released` = U, and does not repeat when it reads a greater one.
 *     A strict delete of life U goes through the marker when the marker covers U (`hc_pending` or `hc_released` at
 *     or above U), or when U's creating call may still send an attempt (the token is younger than the longest client
 *     deadline plus the clock skew: resource-writes.ts, `mayStillBeRepeated`); it does so before its soft delete.
 *     Otherwise it releases as any.
 *     Why one release: a release through the marker moves `hc_released` up to U, once. A release without it needs
 *     a delete that read U's item, then the marker, found it old and covered by neither value. A second item of U
 *     needs a repeat, sent only after `hc_pending` >= U was written, within the call's deadline, so before any such
 *     delete's read (an old life's call has ended); the values only grow until removed, and are removed only once
 *     that delete's item is U's last (below), so that delete would have seen them when it mattered. So a
 *     life with two items gives back its slot only through the marker, once. And a life whose item a delete ended
 *     is not put again: the delete that ended the first item read that item, then the marker. If the life was young,
 *     it wrote `hc_released` = U before its soft delete, hence before the item's removal; the creating call then
 *     either fails its mark, or, having marked first, finds the item or `hc_released` = U when it inspects (item
 *     first, then marker), and does not repeat. If the life was old, its call has ended. A late attempt (sent before
 *     the mark) lands as a second item only when a repeat was sent, so after the mark, and its delete finds
 *     `hc_released` >= U after reading that item.
 *     What it costs: a delete finds `hc_released` above its own U only when a life with a later token was released
 *     while U was live or before U's put landed (U's put was retried past that whole life, or the API hosts' clocks
 *     differ by more than the time between the two lives); it then holds the slot (a heal gives it back). A token
 *     that is not a client's (another writer's value, not a lower-case UUIDv7) has no age: its delete holds the slot.
 *   - client, the marks of earlier versions: `hc_repeated_<token>` ("pending" or "released", one attribute per life)
 *     is honoured for the life it names ("released" holds, "pending" goes through the marker) and removed by the
 *     first writer that can prove no attempt of its life can still land and no item of it is live (below).
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
 *
 * Marker bound (what the counting puts on the marker of one id, whatever the id's reuse):
 *
 *     marker bytes <= MARKER_MAX_BYTES (4 KB) + bytes(the value of the token attribute of an item another writer put)
 *
 * Its attributes are a fixed set, each of bounded size: the keys (a partition key of at most 2,048 bytes, a sort key
 * of at most 1,024: key-limits.ts, and their names), hc_state, hc_seq and hc_life_seq (40 digits each), hc_life (the
 * item's token: 36 bytes for the client's, another writer's value as it put it), hc_expires_at, hc_be (an epoch), hc_be_life (the token of the life it was set for, as hc_life),
 * hc_released and hc_pending (one client token each, 36 bytes). Nothing is added per life: an id reused a million
 * times, concurrent deletes of one life, or a create that repeats its put overwrite the same two values, and their
 * conditions only move them up. The attributes of earlier versions (`hc_repeated_<token>`) are only removed: by a
 * strict delete, for every life other than its own whose token is older than LIFE_SEALED_MS at its read of the item
 * (no attempt of that life can land any more: the call's deadline, the request lifetime and the clock skew, as the
 * heal's quiet window argues, heal-window.ts, and the id held another life's item, so none of that life is live),
 * and by the consumer, for every life other than its record's whose token is that old at the record's time (the
 * record shows the id's item then). The consumer sizes its transactions from the markers it reads (markers.ts).
 *
 * Removal of the two values (the consumer, at a record of time s that shows the id's item with life X; its write is
 * conditional on each value it removes being the one it read, so a client's later write is never undone):
 *   - `hc_pending` = W, once W is sealed at s (`lifeSealed`: older than LIFE_SEALED_MS). Every life it covers is older
 *     than W, so sealed: none sends a repeat or lands an attempt after s. A delete of such a life U that reads the
 *     marker after the removal read an item that was in the table at s, so U's last item. If an earlier item of U was
 *     released through the marker, `hc_released` >= U still says so (kept while X is U: next point); an earlier item
 *     released directly was read old and uncovered, which a repeat rules out, so U had no other item.
 *   - `hc_released` = R, once R is sealed at s and X is not a client life at or below R. Lives at or below R are
 *     sealed, and at s the id held no live item of one: after s no delete soft-deletes an item of such a life (its
 *     soft delete is conditional on the item being live and of its life), so none releases, and none of their
 *     creating calls runs. A later life V > R is not covered by R anyway.
 * So both leave at the id's first record once their lives are sealed (a life of the id created later brings one);
 * until then they are two values of 36 bytes, and an "uncounted" marker leaves whole when its expiry passes.
 *
 * Expiry: a marker that says "uncounted" carries hc_expires_at (48 h after the consumer's write), a counted one none.
 * The client's writes of hc_released and hc_pending take the expiry off (the marker must outlive the life's
 * attempts); the consumer's next write of the marker puts it back (uncounted) or keeps it off (counted). A strict
 * delete goes through the marker before its soft delete, whose record brings that next write.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { COUNTER_ATTRIBUTES } from "./config";
import { tokenTime } from "./tokens";
import { CLOCK_SKEW_MS, MAX_CLIENT_DEADLINE_MS, REQUEST_LIFETIME_MS } from "../heal/heal-window";

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

/** The values of a marker's `hc_repeated_<token>`, written by earlier versions (see the header). */
export const REPEATED = Object.freeze({ pending: "pending", released: "released" } as const);

/** The attribute an earlier version wrote for the life `token` names (see the header). */
export function repeatedAttribute(token: string): string {
    return `${COUNTER_ATTRIBUTES.repeatedPrefix}${token}`;
}

/**
 * How long after its token's time an attempt of a life can still land: the creating call sends nothing after its
 * deadline, a sent request takes effect within the request lifetime or never, and the clocks differ by the skew
 * (heal-window.ts, A1-A3). Past it, the life's items are those already in the table.
 */
export const LIFE_SEALED_MS = MAX_CLIENT_DEADLINE_MS + REQUEST_LIFETIME_MS + CLOCK_SKEW_MS;

/** The greatest size of a marker whose items all carry the client's tokens (see the header). */
export const MARKER_MAX_BYTES = 4 * 1024;

/** A token the client writes: a UUIDv7 in lower-case text, whose string order is its time order. */
export function isClientToken(token: string): boolean {
    return tokenTime(token) !== undefined && token === token.toLowerCase();
}

/** How a strict delete of a life gives its slot back (see the header). */
export type ReleasePath =
    /** Release as any: an old life the marker does not cover. */
    | "direct"
    /** Take the release through the marker (`hc_released`), before the soft delete; release only if that succeeded. */
    | "marker"
    /** Hold the slot: the marker could not be read, or the token is not a client's. */
    | "hold";

/**
 * The path of a strict delete of the life `token` names, from its marker as read after the item (undefined: no
 * marker), `mayStillBeRepeated` telling whether the creating call may still send an attempt.
 */
export function releasePath(token: string, marker: Record<string, AttributeValue> | undefined, mayStillBeRepeated: boolean): ReleasePath {
    if (!isClientToken(token)) {
        return "hold";
    }
    const released = marker?.[COUNTER_ATTRIBUTES.released]?.S;
    const pending = marker?.[COUNTER_ATTRIBUTES.pending]?.S;
    const covered =
        (released !== undefined && released >= token) ||
        (pending !== undefined && pending >= token) ||
        marker?.[repeatedAttribute(token)] !== undefined;
    // A covered life goes through the marker even when its release was taken: the write's condition then fails, and
    // the slot is held on what the write found.
    return covered || mayStillBeRepeated ? "marker" : "direct";
}

/**
 * The conditional update that takes the release of the life `token` names (see the header): `hc_released` up to the
 * token, the earlier versions' mark of the life and the marks `prune` names removed, the expiry taken off.
 */
export function takeReleaseUpdate(
    token: string,
    prune: readonly string[],
): { update: string; condition: string; names: Record<string, string>; values: Record<string, AttributeValue> } {
    const names: Record<string, string> = {
        "#released": COUNTER_ATTRIBUTES.released,
        "#repeated": repeatedAttribute(token),
        "#expires": COUNTER_ATTRIBUTES.expiresAt,
    };
    prune.forEach((name, i) => (names[`#prune${i}`] = name));
    const removed = ["#repeated", "#expires", ...prune.map((_, i) => `#prune${i}`)];
    return {
        update: `SET #released = :released REMOVE ${removed.join(", ")}`,
        condition:
            "(attribute_not_exists(#released) OR #released < :released) AND (attribute_not_exists(#repeated) OR #repeated = :pending)",
        names,
        values: { ":released": { S: token }, ":pending": { S: REPEATED.pending } },
    };
}

/** The creating call's mark before a repeat (see the header): `hc_pending` up to the token, unless a release covers it. */
export function markPendingUpdate(token: string): {
    update: string;
    condition: string;
    names: Record<string, string>;
    values: Record<string, AttributeValue>;
} {
    return {
        update: "SET #pending = :token REMOVE #expires",
        condition:
            "(attribute_not_exists(#released) OR #released < :token) AND (attribute_not_exists(#pending) OR #pending < :token) AND " +
            "(attribute_not_exists(#repeated) OR #repeated = :pending)",
        names: {
            "#pending": COUNTER_ATTRIBUTES.pending,
            "#released": COUNTER_ATTRIBUTES.released,
            "#repeated": repeatedAttribute(token),
            "#expires": COUNTER_ATTRIBUTES.expiresAt,
        },
        values: { ":token": { S: token }, ":pending": { S: REPEATED.pending } },
    };
}

/**
 * What a marker says of the life `token` names, for its creating call: "released" (a delete gave the life's slot
 * back: it existed and ended), "later" (a later life's was: whether mine existed cannot be told), "covered" (a mark at
 * or above the token is there), or "open".
 */
export function markerOnLife(marker: Record<string, AttributeValue> | undefined, token: string): "released" | "later" | "covered" | "open" {
    const released = marker?.[COUNTER_ATTRIBUTES.released]?.S;
    if (released === token || marker?.[repeatedAttribute(token)]?.S === REPEATED.released) {
        return "released";
    }
    if (released !== undefined && released > token) {
        return "later";
    }
    const pending = marker?.[COUNTER_ATTRIBUTES.pending]?.S;
    return pending !== undefined && pending >= token ? "covered" : "open";
}

/**
 * The marks of earlier versions (`hc_repeated_<token>`) a writer may remove (see the header): every one but the life
 * `keep`'s whose token is older than LIFE_SEALED_MS at `atMs` (or is not a client's token: no call of the client
 * sends attempts of it), when the writer saw the id's item, at `atMs`, not being a live item of that life.
 */
export function prunableLegacyMarks(marker: Record<string, AttributeValue> | undefined, keep: string | undefined, atMs: number): string[] {
    return prunableLegacyNames(legacyMarks(marker), keep, atMs);
}

/** The names of a marker's marks of earlier versions (`hc_repeated_<token>`). */
export function legacyMarks(marker: Record<string, AttributeValue> | undefined): string[] {
    return Object.keys(marker ?? {}).filter((name) => name.startsWith(COUNTER_ATTRIBUTES.repeatedPrefix));
}

/** Whether no attempt of the life `token` names can land after `atMs` (a token that is not a client's has none). */
export function lifeSealed(token: string, atMs: number): boolean {
    const made = tokenTime(token);
    return made === undefined || made + LIFE_SEALED_MS < atMs;
}

/**
 * The ledger values (`hc_released`, `hc_pending`) the consumer may remove when its record, of time `atMs`, shows the
 * id's item holding the life `life` (undefined: no client life): see the header. `hc_pending` once its life is
 * sealed (every life it covers is older, so sealed too: none can put a second item any more); `hc_released` once its
 * life is sealed and the item is not of a life it covers (no item of those lives is live, and none can land).
 */
export function droppableLedger(
    values: { readonly released?: string; readonly pending?: string },
    life: string | undefined,
    atMs: number,
): { released?: string; pending?: string } {
    const { released, pending } = values;
    const coversLife = life !== undefined && isClientToken(life) && released !== undefined && life <= released;
    return {
        ...(released !== undefined && lifeSealed(released, atMs) && !coversLife ? { released } : {}),
        ...(pending !== undefined && lifeSealed(pending, atMs) ? { pending } : {}),
    };
}

/**
 * The most marks one write removes: its REMOVE clause then stays within DynamoDB's 4 KB expression limit
 * (200 of "#prune199, " are 2.2 KB). A marker an earlier version grew past that shrinks by this much at every write to it.
 */
export const PRUNE_PER_WRITE = 200;

/** `prunableLegacyMarks` over the names of the marks alone (at most PRUNE_PER_WRITE of them). */
export function prunableLegacyNames(names: readonly string[], keep: string | undefined, atMs: number): string[] {
    const prefix = COUNTER_ATTRIBUTES.repeatedPrefix;
    return prunable(names, prefix, keep, atMs).slice(0, PRUNE_PER_WRITE);
}

function prunable(names: readonly string[], prefix: string, keep: string | undefined, atMs: number): string[] {
    return names.filter((name) => {
        if (!name.startsWith(prefix)) {
            return false;
        }
        const token = name.slice(prefix.length);
        return token !== keep && lifeSealed(token, atMs);
    });
}

/** Whether a marker says best-effort holds a backfill's unit for its item (hc_be: an epoch, or true before epochs). */
export function hasBackfillUnit(marker: Record<string, AttributeValue> | undefined): boolean {
    const flag = marker?.[COUNTER_ATTRIBUTES.beCounted];
    return flag?.BOOL === true || flag?.N !== undefined;
}
