/**
 * Multi-region histories for the model-based checker (docs/design/global-tables.md), in the smallest form that is real:
 * one engine, 2 or 3 member regions (the first the home), no replication. Every region's replica is the one table,
 * which is a legal state of a global table whose replication delay is zero: each region's stream is the table's
 * stream, each region's reads see every region's writes at once.
 *
 * A history is drawn as today's (history.ts) with the client selection and one shard, reduced to the events the
 * multi-region runner drives (below), and then each event that runs in a region draws that region from a source of
 * its own: the draws of generateHistory are untouched, so every existing seed's history stays what it was.
 *
 * Kept: create, tryCreate (under its key's limit), delete, count, consume, redrive, reconcile, settle, backfill (each
 * in its region), and ttlDelete (the table's TTL: a hard delete nobody calls, in no region). Dropped, with the reason:
 * late put attempts and held requests (`late`, `land`: their bookkeeping is run.ts's, per single region), items as
 * large as the client accepts (`big`), bad input (`invalid`: the same validation in every region), settler runs with
 * calls in flight (`busy` is dropped, the run is kept), a call's own limit (a plan change: one limit per key keeps the
 * per-region quotas of the model plain), token rewrites (one shard), split invocations (one shard).
 */
import { seededRandom } from "../../../local/engine/faults";
import { DEFAULT_LAYOUT, type RegionsConfig } from "../../../runtime/shared/config";
import { markerIdMaxBytes } from "../../../runtime/shared/key-limits";
import { generateHistory, ID_PREFIX, LONGEST_ID, type FuzzEvent, type GenerateOptions, type History } from "../history";

/** The member regions a history with `regions` = n uses: the first is the home. */
export const FUZZ_REGIONS = ["us-east-1", "eu-west-1", "ap-south-1"] as const;

/** The region counts a multi-region history may have. */
export const REGIONS_MIN = 2;
export const REGIONS_MAX = FUZZ_REGIONS.length;

/** An event of a multi-region history: `region` (an index into the history's members) where it runs. */
export type RegionalEvent = FuzzEvent & { readonly region?: number };

export interface RegionsHistory extends Omit<History, "events"> {
    /** How many member regions, FUZZ_REGIONS' first ones (the first is the home). */
    readonly regions: number;
    readonly events: readonly RegionalEvent[];
}

/** The member regions of a history, home first. */
export function membersOf(history: Pick<RegionsHistory, "regions">): string[] {
    return FUZZ_REGIONS.slice(0, history.regions);
}

/** Region `current`'s setting among `members` (the first is the home). */
export function regionsSetting(current: string, members: readonly string[]): RegionsConfig {
    return { current, members: members.map((region, i) => (i === 0 ? { region, role: "home" as const } : { region })) };
}

/**
 * The longest id every member's marker key holds (the region is in the marker's sort key, so it is shorter than one
 * region's LONGEST_ID): the events that drew LONGEST_ID take it, and must count like any other.
 */
export function regionalLongestId(members: readonly string[]): string {
    const most = Math.min(...members.map((region) => markerIdMaxBytes({ ...DEFAULT_LAYOUT, regions: regionsSetting(region, members) })));
    return ID_PREFIX + "x".repeat(most - ID_PREFIX.length);
}

/** Events that run in a region, and so carry one. */
const REGIONAL = new Set<FuzzEvent["op"]>([
    "create",
    "tryCreate",
    "delete",
    "count",
    "consume",
    "redrive",
    "reconcile",
    "settle",
    "backfill",
]);

/** Builds a multi-region history from a seed: same seed and region count, same history. */
export function generateRegionsHistory(options: GenerateOptions & { readonly regions: number }): RegionsHistory {
    if (!Number.isSafeInteger(options.regions) || options.regions < REGIONS_MIN || options.regions > REGIONS_MAX) {
        throw new RangeError(`[regions] must be an integer from ${REGIONS_MIN} to ${REGIONS_MAX} (got ${options.regions})`);
    }
    const base = generateHistory({ ...options, selection: "client", counterShards: 1 });
    // The regions come from a source of their own: generateHistory's draws, and so every existing seed, stay as they were.
    const draw = seededRandom((options.seed ^ 0x4f1bbcdc) >>> 0);
    const events: RegionalEvent[] = [];
    const longest = regionalLongestId(FUZZ_REGIONS.slice(0, options.regions));
    for (const event of base.events) {
        const kept = reduced(event, longest);
        // One draw per event of the base, kept or not: a change to what is kept moves no other event's region.
        const region = Math.floor(draw() * options.regions);
        if (kept !== undefined) {
            events.push(REGIONAL.has(kept.op) ? { ...kept, region } : kept);
        }
    }
    return {
        seed: base.seed,
        mode: base.mode,
        selection: "client",
        // Each region's counter items carry the region in their sort keys, in a counters table of their own.
        placement: "separate",
        faultRate: base.faultRate,
        concurrency: base.concurrency,
        limits: base.limits,
        preexisting: [],
        ...(base.latencyMs === undefined ? {} : { latencyMs: base.latencyMs }),
        regions: options.regions,
        events,
    };
}

/** The event as the multi-region runner drives it, or undefined when it is one the runner does not drive (see the top). */
function reduced(event: FuzzEvent, longest: string): FuzzEvent | undefined {
    const id = (drawn: string) => (drawn === LONGEST_ID ? longest : drawn);
    switch (event.op) {
        case "create":
            return { op: "create", key: event.key, id: id(event.id) };
        case "tryCreate":
            return { op: "tryCreate", key: event.key, id: id(event.id) };
        case "delete":
        case "ttlDelete":
            return { ...event, id: id(event.id) };
        case "consume":
            return { op: "consume", max: event.max, overlap: event.overlap, crash: event.crash };
        case "settle":
            return { op: "settle", keyBudget: event.keyBudget, auditSegments: event.auditSegments };
        case "count":
        case "redrive":
        case "reconcile":
        case "backfill":
        case "ttlDelete":
            return event;
        default:
            return undefined;
    }
}
