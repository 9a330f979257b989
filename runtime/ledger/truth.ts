/**
 * The truth a heal writes on a key that need not be quiet: old lives counted from the table, recent lives as the ledger
 * entries hold them (ledger.ts). Pure; the argument that makes it safe is at the top of runtime/heal/heal.ts ("A busy
 * key"), and each term below names the case it stands for.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { markerSortKey } from "../shared/config";
import { isLive, type SelectingLayout } from "../shared/selection";
import { hasBackfillUnit } from "../shared/strict-ledger";
import { tokenTime } from "../shared/tokens";
import type { LedgerEntry } from "./ledger";

/** Where a delete's claim (utilization) sits on an item: the soft delete's own token (runtime/client/validation.ts). */
export function claimAttribute(layout: Pick<SelectingLayout, "tokenAttribute">): string {
    return `${layout.tokenAttribute}_delete`;
}

export interface LedgerTruthInput {
    /** The live and soft-deleted items whose units this best-effort item holds (a shard's: those homed there). */
    readonly items: ReadonlyArray<Record<string, AttributeValue>>;
    /** The markers read for the token-less items (strict: their backfill flags). */
    readonly markers: ReadonlyArray<Record<string, AttributeValue>>;
    /** The entries this best-effort item keeps (those ending after the boundary). */
    readonly kept: readonly LedgerEntry[];
    /** Lives whose token is older than this are old: counted from the table. */
    readonly boundary: number;
    /** The healer's clock, and the horizon (the quiet window): a delete claim younger than it may still be in flight. */
    readonly now: number;
    readonly horizonMs: number;
    readonly mode: "strict" | "utilization";
    readonly layout: SelectingLayout;
    /**
     * Strict, one shard of a sharded key: what its recent lives count for, in place of max(units, live items), which
     * holds per key only (`recentShares`). Absent: max(units of the kept entries, live client items of recent lives).
     */
    readonly recentShare?: number;
}

/** What a ledger heal counts for one best-effort item. */
export interface LedgerTruth {
    readonly truth: number;
    /** Old lives counted from the table. */
    readonly old: number;
    /** Net units the kept entries hold. */
    readonly recentUnits: number;
    /** Live client items of recent lives (strict counts at least these). */
    readonly recentItems: number;
    /**
     * The latest token time of a live client item of a recent life (or of a delete claim that kept an old item out), if
     * any: its units (or a drift of them, such as a lost increment) can be counted from the table once it is old, so the
     * key stays on the heal index until then.
     */
    readonly youngest?: number;
}

/**
 * strict:       old live client-counted items  +  max(units of the kept entries, live client items of recent lives)
 * utilization:  old live client items with no delete claim younger than the horizon  +  units of the kept entries
 *
 * An item is client-counted as the heal has always read it (heal.ts `healCount`): it carries a token, or (strict) its
 * marker holds a backfill's flag. Its life is old when its token is older than the boundary, or has no time (a
 * token-less item, another writer's value): such a unit is never in an entry.
 */
export function ledgerTruth(input: LedgerTruthInput): LedgerTruth {
    const { layout, mode, boundary } = input;
    const flagged = new Set<string>();
    for (const marker of input.markers) {
        const sk = marker[layout.sortKey]?.S;
        if (sk !== undefined && hasBackfillUnit(marker)) {
            flagged.add(sk);
        }
    }
    const claim = claimAttribute(layout);
    let old = 0;
    let recentItems = 0;
    let youngest: number | undefined;
    const recent = (made: number) => {
        recentItems++;
        youngest = Math.max(youngest ?? made, made);
    };
    for (const item of input.items) {
        if (!isLive(item, layout)) {
            continue;
        }
        const id = item[layout.sortKey]!.S!;
        const token = item[layout.tokenAttribute]?.S;
        const made = tokenTime(token);
        if (mode === "strict") {
            if (token === undefined && !flagged.has(markerSortKey(layout, id))) {
                continue; // another writer's item, which no unit accounts for
            }
            if (made !== undefined && made >= boundary) {
                recent(made);
            } else {
                old++;
            }
            continue;
        }
        // Utilization counts only items carrying a client token whose time it can read (their increment is settled
        // once the token is old), and leaves out an item a delete may be between its decrement and its soft delete.
        if (made === undefined) {
            continue;
        }
        if (made >= boundary) {
            recent(made);
            continue;
        }
        const claimed = item[claim]?.S;
        if (claimed !== undefined) {
            const at = tokenTime(claimed);
            if (at === undefined || input.now - at < input.horizonMs) {
                // Its delete may fail after its decrement: counted by a heal once the claim is older than the horizon.
                youngest = Math.max(youngest ?? 0, at ?? input.now);
                continue;
            }
        }
        old++;
    }
    const recentUnits = input.kept.reduce((sum, entry) => sum + entry.units, 0);
    const truth = mode === "strict" ? old + (input.recentShare ?? Math.max(recentUnits, recentItems)) : old + recentUnits;
    return { truth, old, recentUnits, recentItems, ...(youngest === undefined ? {} : { youngest }) };
}

/**
 * Strict, a sharded key: each shard's share of the key's recent term, max(units of every kept entry, live client items of
 * every recent life), so that the shards' truths sum to the key's as the unsharded heal counts it. A life's unit stays in
 * the shard its reservation went to, while its item is homed by its token: another writer that rewrites the token moves
 * the item to another shard and leaves the unit behind. Counted per shard as max(units, items), such a life would count
 * twice (its unit in the old home, its item in the new), and the sum could pass the limit. Each shard keeps its units,
 * and the items the key's units do not cover go to the shards whose items outnumber their units, in shard order.
 */
export function recentShares(shards: ReadonlyArray<Pick<LedgerTruth, "recentUnits" | "recentItems">>): number[] {
    const units = shards.reduce((sum, shard) => sum + shard.recentUnits, 0);
    const items = shards.reduce((sum, shard) => sum + shard.recentItems, 0);
    let uncovered = Math.max(0, items - units);
    return shards.map((shard) => {
        const extra = Math.min(uncovered, Math.max(0, shard.recentItems - shard.recentUnits));
        uncovered -= extra;
        return shard.recentUnits + extra;
    });
}
