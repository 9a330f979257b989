/**
 * The ledger of recent lives: what lets a heal land on a key that is never quiet (runtime/heal/heal.ts, "A busy key").
 *
 * Every client write that moves a best-effort count for a life carrying a client token (a UUIDv7, whose first 48 bits
 * are the time it was made) moves, by the same amount and in the same UpdateItem, one more number on the same item:
 * the life's period entry
 *
 *     hc_n_<start>_<length>     start and length in whole seconds; the period [start, start + length) holds the token
 *
 * so that, at every instant,
 *
 *     count = base + sum of the entries
 *
 * where an entry holds the net units of the lives of its period (reservations less releases, or increments less
 * decrements) since the entry was last folded, and `base` (never stored) holds everything else: the units of folded
 * periods, of lives without a client token (a strict backfill's, another writer's), and what the last heal wrote.
 *
 * A heal reads the entries with the count, then splits the key's lives at a boundary B no later than its clock less
 * the horizon (the quiet window Q, which covers the client deadline, a request's lifetime and the clock skew:
 * heal-window.ts): a life whose token is older than B has sent every create write it ever will, so its item is in the
 * table or never will be, and the heal counts it from the table; a younger life's units stay as the entries say. The
 * heal then removes (folds) every entry that ends at or before B, keeps the others, and writes
 * `count = (old lives from the table) + (kept entries)`. B is never inside an entry (`foldBoundary`), so each entry is
 * either folded whole or kept whole, and writers with different period lengths (a deployment that changes the window)
 * stay consistent: an entry names its own period.
 *
 * Bound on an item's entries: one per period with writes since the last fold. The heal folds every period older than
 * the horizon, and a key on the heal index is healed within a window, so a key holds about Q / P + 2 entries
 * (12 with the default P = Q / 10), about 20 bytes each. A utilization key nobody marks is never healed: a client
 * write that leaves more than LEDGER_ENTRIES_MARK entries on an item not on the heal index marks it (best-effort.ts),
 * so the next settler run folds them.
 *
 * Other writers of the count: a strict backfill's units go to OLD_LEDGER_ENTRY (its items carry no client token, or one
 * made before the clients began), and it bumps `hc_lv` with the version, like every writer that knows the ledger. A writer
 * of an earlier version bumps `hc_version` alone: `hc_lv` then differs from `hc_version`, and the heal waits for the
 * key to be quiet, as it always did (heal.ts).
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { tokenTime } from "../shared/tokens";

/** The prefix of a period entry's attribute name. */
export const LEDGER_PREFIX = "hc_n_";

/** The period length when the client does not know the deployed quiet window. */
export const DEFAULT_LEDGER_PERIOD_MS = 60_000;

/** A client write leaving more entries than this on an item that is not on the heal index marks it (see the top). */
export const LEDGER_ENTRIES_MARK = 24;

/** The longest a period may be, in seconds (an attribute name stays short, a fold stays within a day). */
const MAX_PERIOD_SECONDS = 86_400;

/**
 * The period length the client writes with: a tenth of the deployed quiet window, in whole seconds (at least one),
 * so that a key holds about a dozen entries whatever the window; a minute when the window is not known.
 */
export function ledgerPeriodMs(healQuietWindowSeconds?: number): number {
    if (healQuietWindowSeconds === undefined) {
        return DEFAULT_LEDGER_PERIOD_MS;
    }
    return Math.min(MAX_PERIOD_SECONDS, Math.max(1, Math.round(healQuietWindowSeconds / 10))) * 1000;
}

/**
 * The entry of units that stand for no client token, as a delete of a token-less (or adopted) item releases them: a
 * period at the epoch, older than any boundary, so every heal folds it into `base`. Such a unit still moves an entry, so
 * that every write of a life a heal counts from the table moves an entry older than the heal's boundary (heal.ts, "A busy
 * key": a heal that lost its race to a client write may write again only when none did). Only ever lowered.
 */
export const OLD_LEDGER_ENTRY = `${LEDGER_PREFIX}0_1`;

/**
 * The entry of the units a strict backfill adds for items without a client token (runtime/backfill/plan.ts): as old as
 * OLD_LEDGER_ENTRY, and only ever raised. Kept apart from the releases, so that no release and backfilled unit landing
 * between a heal's two reads cancel out in one entry: each write moves its entry one way, and the heal sees it.
 */
export const BACKFILL_LEDGER_ENTRY = `${LEDGER_PREFIX}0_2`;

/** The entry a life's units go to: OLD_LEDGER_ENTRY for a token that is not a client's (it has no time). */
export function ledgerAttribute(token: string | undefined, periodMs: number): string {
    const made = tokenTime(token);
    if (made === undefined) {
        return OLD_LEDGER_ENTRY;
    }
    const length = Math.max(1, Math.round(periodMs / 1000));
    const start = Math.floor(made / 1000 / length) * length;
    return `${LEDGER_PREFIX}${start}_${length}`;
}

/** One period entry as read from a best-effort item. Times in epoch ms. */
export interface LedgerEntry {
    readonly name: string;
    readonly start: number;
    readonly end: number;
    readonly units: number;
}

const ENTRY = /^hc_n_(\d{1,12})_(\d{1,6})$/;

/** The period entries of a best-effort item, oldest first. An attribute of the prefix that does not parse is not one. */
export function ledgerEntries(item: Record<string, AttributeValue> | undefined): LedgerEntry[] {
    const entries: LedgerEntry[] = [];
    for (const [name, value] of Object.entries(item ?? {})) {
        const match = ENTRY.exec(name);
        if (match === null || value.N === undefined) {
            continue;
        }
        const start = Number(match[1]) * 1000;
        entries.push({ name, start, end: start + Number(match[2]) * 1000, units: Number(value.N) });
    }
    return entries.sort((a, b) => a.start - b.start || a.end - b.end);
}

/**
 * The fold boundary: the latest instant at or before `limit` (the heal's clock less the horizon) that is inside no
 * entry (an entry that holds it strictly is kept whole, its lives counted as the entry says).
 */
export function foldBoundary(entries: readonly LedgerEntry[], limit: number): number {
    let boundary = limit;
    for (let moved = true; moved;) {
        moved = false;
        for (const entry of entries) {
            if (entry.start < boundary && boundary < entry.end) {
                boundary = entry.start;
                moved = true;
            }
        }
    }
    return boundary;
}

/** Entries a heal at `boundary` folds (every lives' token older than it) and keeps. */
export function splitEntries(
    entries: readonly LedgerEntry[],
    boundary: number,
): { readonly folded: readonly LedgerEntry[]; readonly kept: readonly LedgerEntry[] } {
    return {
        folded: entries.filter((entry) => entry.end <= boundary),
        kept: entries.filter((entry) => entry.end > boundary),
    };
}
