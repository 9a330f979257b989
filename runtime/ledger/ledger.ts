/**
 * The young ledger: how a best-effort item says which of its units belong to lives too young for a heal to count
 * from the table.
 *
 * Invariant: a best-effort item's count is `base + sum(entries)`, where entry `hc_y_<p>` holds the net units that
 * client writes moved for lives of period p (a life's period is its token's time, floored to the period) while the
 * entry existed, and `base` (never stored) is the rest. Every client write moves the count and at most one entry by
 * the same amount, in one UpdateItem; removing an entry moves its value into base without changing the count.
 *
 * Which entry a write uses (runtime/client/units.ts):
 * - a create's writes (a reservation or increment, and the release of a put that certainly wrote nothing) use its
 *   own, current period's entry;
 * - a delete's -1 of a life whose +1 may still be landing (its period at most two old by the writer's clock) uses
 *   that life's entry, created if absent: the two meet in one entry whatever order they land in;
 * - any other delete's -1 uses its life's entry when it exists (`attribute_exists`), and base otherwise
 *   (`attribute_not_exists`): the condition, not the clock, decides, so a -1 never lands in base while its life's
 *   +1 sits in an entry, and the -1 of an old life creates no entry.
 * So entries exist only for periods around the key's writes, a few at a time.
 *
 * A life is *young* while its period is the current or the previous one (as the reader's clock says); a heal takes a
 * young life's units from its entry and counts every other life from the table, and removes the entries of older
 * periods. A create's writes land within its deadline plus a request's lifetime, less than a period (the component
 * refuses a shorter one), so no create write reaches an entry after a heal removed it. A client removes the entries
 * of older periods it saw (every write returns the item), so the entries stay at most a few where the same hosts
 * write a key; entries left by hosts that wrote a key once go with the next heal (docs/limits.md, the settler off).
 */
import { numberOf } from "../shared/keys";

/** The prefix of a ledger entry's attribute name: `hc_y_<period>`. */
export const ENTRY_PREFIX = "hc_y_";

/** The period a time (epoch ms) falls in. */
export function periodOf(ms: number, periodMs: number): number {
    return Math.floor(ms / periodMs);
}

/** The attribute name of period `period`'s entry. */
export function entryName(period: number): string {
    return `${ENTRY_PREFIX}${period}`;
}

/** The period an attribute name is the entry of (undefined: not an entry). */
export function entryPeriod(name: string): number | undefined {
    const digits = name.startsWith(ENTRY_PREFIX) ? name.slice(ENTRY_PREFIX.length) : "";
    const period = /^\d+$/.test(digits) ? Number(digits) : undefined;
    return period !== undefined && Number.isSafeInteger(period) ? period : undefined;
}

/** The entries an item holds, by period. */
export function entriesOf(item: Record<string, unknown> | undefined): Map<number, number> {
    const entries = new Map<number, number>();
    for (const name of Object.keys(item ?? {})) {
        const period = entryPeriod(name);
        if (period !== undefined) {
            entries.set(period, numberOf(item, name));
        }
    }
    return entries;
}

/** Whether a life of period `lifePeriod` is young when the clock is in period `nowPeriod`. */
export function isYoung(lifePeriod: number, nowPeriod: number): boolean {
    return lifePeriod >= nowPeriod - 1;
}

/** The periods of the entries that are no longer young at `nowPeriod`: a heal or a client removes them. */
export function stalePeriods(entries: ReadonlyMap<number, number>, nowPeriod: number): number[] {
    return [...entries.keys()].filter((period) => !isYoung(period, nowPeriod)).sort((a, b) => a - b);
}

/** The sum of the young entries at `nowPeriod`: the units the ledger accounts for. */
export function youngUnits(entries: ReadonlyMap<number, number>, nowPeriod: number): number {
    let sum = 0;
    for (const [period, value] of entries) {
        sum += isYoung(period, nowPeriod) ? value : 0;
    }
    return sum;
}
