/**
 * The heal's arithmetic for one best-effort shard, from one read of the key's items and one read of the shard. Pure.
 *
 * Best-effort is `base + sum(entries)` (runtime/ledger/ledger.ts). A heal sets base to what the table says of the
 * lives too old for the ledger, and keeps the young entries as they are:
 *
 *     target = units(old lives, from the table) + sum(young entries) (+ strict: young lives the ledger misses)
 *     write:   ADD count (target - count read)   REMOVE the stale entries
 *
 * The write adds a difference rather than setting a value, so a client write to a young entry that lands between the
 * read and the write changes count and entry alike and is kept. What a write between them could break is guarded
 * (runtime/heal/heal.ts says how): another heal (the generation), a delete of an old life (the order of the reads,
 * and in strict the fenced releases' count).
 *
 * Which units an old life has, by mode:
 * - utilization: a client life (token) that is live and not claimed by a delete still in flight (a claim younger
 *   than a call's reach: its -1 may have landed already, or may land after the heal);
 * - strict: every live item that counts (a client life, or an item another writer put or the table held, once
 *   flagged); and a young period's live client lives beyond what its entry holds (a token another writer set).
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { CounterMode } from "../shared/config";
import { entriesOf, isYoung } from "../ledger/ledger";
import { numberOf } from "../shared/keys";

/** What the heal needs of one item of the key, homed in the shard being healed. */
export interface LifeView {
    /** Live: selected, owned by this region, not soft-deleted. */
    readonly live: boolean;
    /** Counted by eventual: live and flagged (strict mode gives such an item a unit once old). */
    readonly counted: boolean;
    /** The period of its client token (undefined: no client token). */
    readonly period: number | undefined;
    /** A delete's claim too young for its call to be over (utilization leaves the item out). */
    readonly claimInFlight: boolean;
}

export interface ShardHealPlan {
    /** The units best-effort should hold. */
    readonly target: number;
    /** What to add to the count. */
    readonly correction: number;
    /** Stale entries (not young at the read) to remove. */
    readonly stale: ReadonlyArray<{ readonly name: string }>;
    /** The periods of young lives the ledger and the table disagree on: heal again once they are old. */
    readonly unsettled: readonly number[];
    /** Items left out because a delete of them is in flight: heal again once it is over. */
    readonly claimsInFlight: number;
}

/** The plan for one shard whose best-effort item read `item` at period `nowPeriod`. */
export function planShardHeal(
    mode: CounterMode,
    countAttribute: string,
    item: Record<string, AttributeValue> | undefined,
    lives: readonly LifeView[],
    nowPeriod: number,
): ShardHealPlan {
    const entries = entriesOf(item);
    let young = 0;
    const stale: Array<{ name: string }> = [];
    for (const [period, value] of entries) {
        if (isYoung(period, nowPeriod)) {
            young += value;
        } else {
            stale.push({ name: `hc_y_${period}` });
        }
    }
    let old = 0;
    let claimsInFlight = 0;
    const youngLive = new Map<number, number>();
    for (const life of lives) {
        const isOld = life.period === undefined || !isYoung(life.period, nowPeriod);
        if (!isOld) {
            if (life.live) {
                youngLive.set(life.period!, (youngLive.get(life.period!) ?? 0) + 1);
            }
            continue;
        }
        if (mode === "utilization") {
            claimsInFlight += life.live && life.period !== undefined && life.claimInFlight ? 1 : 0;
            old += life.live && life.period !== undefined && !life.claimInFlight ? 1 : 0;
        } else {
            old += life.live && (life.period !== undefined || life.counted) ? 1 : 0;
        }
    }
    let missed = 0;
    const unsettled: number[] = [];
    for (const [period, live] of youngLive) {
        const held = entries.get(period) ?? 0;
        missed += mode === "strict" ? Math.max(0, live - held) : 0;
        if (held !== live) {
            unsettled.push(period);
        }
    }
    for (const [period, held] of entries) {
        if (isYoung(period, nowPeriod) && !youngLive.has(period) && held !== 0) {
            unsettled.push(period);
        }
    }
    const target = old + missed + young;
    return {
        target,
        correction: target - numberOf(item, countAttribute),
        stale,
        unsettled: unsettled.sort((a, b) => a - b),
        claimsInFlight,
    };
}
