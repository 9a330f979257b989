/**
 * Status: what an operator needs to know about a counter key, read from the tables.
 *
 * Invariant: reading status never writes. A key is exact when its eventual counter equals its counted items (live and
 * flagged: what eventual equals once the stream has drained, runtime/shared/selection.ts) and nothing is pending;
 * anything else is reported with the number that is off, so an operator can see which keys need what.
 *
 * The tallies are pure: a key's rows (its items, its counter items by shard) and a clock in, its figures out. They
 * apply the selection (selection.ts) and the heal's own plan (runtime/heal/plan.ts) for the units best-effort should
 * hold, so status and the heal never disagree on what a key is. The adapters (status-read.ts) read a key's partitions
 * (strongly consistent Queries) or whole tables (a parallel Scan).
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { ITEM_KINDS, numberOf, prefixOf, stringOf } from "../shared/keys";
import { isCounted, isLive, isSelected, isSoftDeleted, wantsFlag, type ItemImage } from "../shared/selection";
import { homeShard, shardCount } from "../shards/layout";
import { homeRegion, memberRegions } from "../regions/ownership";
import { periodOf } from "../ledger/ledger";
import { planShardHeal, type LifeView } from "../heal/plan";
import { lifeOf } from "../heal/heal";
import { LIMIT_ATTRIBUTE } from "../limits/limits";

type Item = Record<string, AttributeValue>;

/** A key's rows as read: its items in the user's table, and its counter items by counters-table shard. */
export interface KeyRows {
    readonly items: Item[];
    /** Shard -> the counter items of that shard's partition (shard 0: the key's own partition, every region's). */
    readonly counters: Map<number, Item[]>;
}

export const emptyRows = (): KeyRows => ({ items: [], counters: new Map() });

/** The figures of a key in one region (or summed over regions). */
export interface StatusCounts {
    /** Best-effort, summed over the key's shards. */
    readonly bestEffort: number;
    readonly eventual: number;
    /** Live items: selected, this region's, not soft-deleted. */
    readonly live: number;
    /** Live and flagged: what eventual equals once the stream has drained. */
    readonly counted: number;
    /** Live but not flagged yet: the consumer or the backfill flags them, and they then count. */
    readonly pendingCreates: number;
    /** Soft-deleted items not removed yet (tombstones): the consumer or the settler removes them. */
    readonly pendingDeletes: number;
    /** Selected items whose deleted attribute is not a boolean (they count as live). */
    readonly malformed: number;
    /** Best-effort above the units it should hold (what a heal sets it to), summed over shards: slots a heal gives back. */
    readonly heldSlots: number;
    /** eventual - counted: 0 when the eventual counter is right. */
    readonly drift: number;
}

/** One best-effort shard of a key. */
export interface ShardStatus {
    readonly shard: number;
    readonly bestEffort: number;
    /** What a heal sets this shard to now: the units of its old lives from the table and its young ledger entries. */
    readonly target: number;
}

/** One member region's figures of a key. */
export interface RegionStatus extends StatusCounts {
    readonly region: string;
    /** The home region owns the items no member stamped. */
    readonly home: boolean;
    readonly exact: boolean;
    /** A sharded key only: the region's best-effort per shard. */
    readonly shards?: readonly ShardStatus[];
}

export interface KeyStatus extends StatusCounts {
    readonly key: string;
    /** eventual == counted and nothing pending (with regions: in every region). */
    readonly exact: boolean;
    /** What count() answers: max(best-effort, eventual) (with regions: summed over regions). */
    readonly value: number;
    /** The key's own stored limit, when it has one. */
    readonly limit?: number;
    /** A sharded key only: best-effort per shard (with regions: in each region's row instead). */
    readonly shards?: readonly ShardStatus[];
    /** With regions: every member region, sorted; the figures above are their sums. */
    readonly regions?: readonly RegionStatus[];
}

export const COUNT_FIELDS = [
    "bestEffort",
    "eventual",
    "live",
    "counted",
    "pendingCreates",
    "pendingDeletes",
    "malformed",
    "heldSlots",
    "drift",
] as const satisfies ReadonlyArray<keyof StatusCounts>;

/** The same configuration, run as member region `region`. */
export function asRegion(config: CounterConfig, region: string): CounterConfig {
    return config.regions === undefined ? config : { ...config, regions: { ...config.regions, current: region } };
}

function counterItem(rows: KeyRows, shard: number, sortKey: string, config: CounterConfig): Item | undefined {
    return rows.counters.get(shard)?.find((item) => stringOf(item, config.sortKey) === sortKey);
}

/** The key's figures in the region `config` runs as (or its only region), at `now`. Pure. */
export function tallyRegion(rows: KeyRows, config: CounterConfig, now: number): StatusCounts & { exact: boolean; shards: ShardStatus[] } {
    const shards = shardCount(config);
    const lives: LifeView[][] = Array.from({ length: shards }, () => []);
    let live = 0;
    let counted = 0;
    let pendingCreates = 0;
    let pendingDeletes = 0;
    let malformed = 0;
    for (const item of rows.items) {
        const image = item as ItemImage;
        if (!isSelected(image, config)) {
            continue;
        }
        const flag = item[config.deletedAttribute];
        malformed += flag !== undefined && typeof flag.BOOL !== "boolean" ? 1 : 0;
        pendingDeletes += isSoftDeleted(image, config) ? 1 : 0;
        live += isLive(image, config) ? 1 : 0;
        counted += isCounted(image, config) ? 1 : 0;
        pendingCreates += wantsFlag(image, config) ? 1 : 0;
        lives[homeShard(stringOf(item, config.sortKey)!, shards)]!.push(lifeOf(item, config, now));
    }
    const prefix = prefixOf(config);
    const nowPeriod = periodOf(now, config.periodMs);
    const perShard = lives.map((homed, shard) => {
        const item = counterItem(rows, shard, `${prefix}${ITEM_KINDS.bestEffort}`, config);
        const target = planShardHeal(config.mode, config.countAttribute, item, homed, nowPeriod).target;
        return { shard, bestEffort: numberOf(item, config.countAttribute), target };
    });
    const bestEffort = perShard.reduce((sum, s) => sum + s.bestEffort, 0);
    const eventual = numberOf(counterItem(rows, 0, `${prefix}${ITEM_KINDS.eventual}`, config), config.countAttribute);
    const heldSlots = perShard.reduce((sum, s) => sum + Math.max(0, s.bestEffort - s.target), 0);
    const drift = eventual - counted;
    return {
        bestEffort,
        eventual,
        live,
        counted,
        pendingCreates,
        pendingDeletes,
        malformed,
        heldSlots,
        drift,
        exact: drift === 0 && pendingCreates === 0 && pendingDeletes === 0,
        shards: perShard,
    };
}

/** The key's own stored limit from its rows (undefined: none). */
function limitOf(rows: KeyRows, config: CounterConfig): number | undefined {
    const item = counterItem(rows, 0, `${config.counterPrefix}${ITEM_KINDS.limit}`, config);
    return item?.[LIMIT_ATTRIBUTE]?.N === undefined ? undefined : numberOf(item, LIMIT_ATTRIBUTE);
}

/**
 * A key's status from its rows at `now`: the region `config` runs as, or with `everyRegion` (and regions configured)
 * each member region's figures and their sums. Pure.
 */
export function keyStatus(key: string, rows: KeyRows, config: CounterConfig, now: number, everyRegion = false): KeyStatus {
    const limit = limitOf(rows, config);
    const extra = limit === undefined ? {} : { limit };
    if (config.regions === undefined || !everyRegion) {
        const { shards, ...figures } = tallyRegion(rows, config, now);
        return {
            key,
            ...figures,
            value: Math.max(figures.bestEffort, figures.eventual),
            ...extra,
            ...(shards.length > 1 ? { shards } : {}),
        };
    }
    const home = homeRegion(config.regions);
    const regions: RegionStatus[] = memberRegions(config.regions).map((region) => {
        const { shards, ...figures } = tallyRegion(rows, asRegion(config, region), now);
        return { region, home: region === home, ...figures, ...(shards.length > 1 ? { shards } : {}) };
    });
    const sums = Object.fromEntries(COUNT_FIELDS.map((field) => [field, regions.reduce((sum, r) => sum + r[field], 0)])) as Record<
        (typeof COUNT_FIELDS)[number],
        number
    >;
    return {
        key,
        ...sums,
        exact: regions.every((r) => r.exact),
        value: regions.reduce((sum, r) => sum + Math.max(r.bestEffort, r.eventual), 0),
        ...extra,
        regions,
    };
}

/** How far off a key is, for ordering: drift, pending and malformed items, held slots. */
export function severity(s: StatusCounts): number {
    return Math.abs(s.drift) + s.pendingCreates + s.pendingDeletes + 2 * s.malformed + s.heldSlots;
}

/** Worst keys first; ties by key. Pure. */
export function worstFirst(statuses: readonly KeyStatus[]): KeyStatus[] {
    return [...statuses].sort((a, b) => severity(b) - severity(a) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

export interface TableStatus {
    readonly keys: number;
    readonly exactKeys: number;
    readonly totals: StatusCounts;
    /** Keys that are not exact or hold slots, worst first, at most `limit`. */
    readonly worst: KeyStatus[];
    /** Every key's status, worst first. */
    readonly all: KeyStatus[];
}

/** Sums statuses into a table-wide summary. Pure. */
export function summarize(statuses: readonly KeyStatus[], limit: number): TableStatus {
    const ordered = worstFirst(statuses);
    const totals = Object.fromEntries(COUNT_FIELDS.map((field) => [field, statuses.reduce((sum, s) => sum + s[field], 0)])) as Record<
        (typeof COUNT_FIELDS)[number],
        number
    >;
    return {
        keys: statuses.length,
        exactKeys: statuses.filter((s) => s.exact).length,
        totals,
        worst: ordered.filter((s) => !s.exact || s.heldSlots > 0).slice(0, limit),
        all: ordered,
    };
}

/**
 * The keys a reconcile can change: eventual off its counted items, or live items not flagged yet. Sorted. Pure.
 * (Tombstones are the heal's to remove; they change no count.)
 */
export function keysToReconcile(statuses: readonly KeyStatus[]): string[] {
    return statuses
        .filter((s) => s.drift !== 0 || s.pendingCreates > 0)
        .map((s) => s.key)
        .sort();
}
