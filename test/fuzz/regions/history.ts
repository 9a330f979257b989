/**
 * Multi-region histories: a counter on a global table, each region with its replica of the user's table and of the
 * counters table, its client, consumer, redrive and settler; replication between the replicas delayed and
 * last-writer-wins; each replica's TTL deleting what has expired there; the limit changed in one region and read in
 * every other once replicated; a region joining the members, region by region as the deployments roll out (a region
 * not yet a member in its own deployment runs nothing).
 *
 * Swarm testing as for one region: each seed draws its own shape (mode, regions, shards, faults, how far replication
 * lags, whether the members change), then its events.
 */
import { seededRandom } from "../../../local/engine/faults";
import type { Mode } from "../history";

export const REGION_NAMES = ["us-east-1", "eu-west-1", "ap-south-1"] as const;

export type RegionsEvent =
    | { readonly op: "create" | "tryCreate"; readonly region: string; readonly key: string; readonly id: string }
    | { readonly op: "delete"; readonly region: string; readonly key: string; readonly id: string }
    | { readonly op: "count"; readonly region: string; readonly key: string }
    /** One delivery of up to `max` records of the region's stream; `crash` fails it unrun. */
    | { readonly op: "consume"; readonly region: string; readonly max: number; readonly crash: boolean }
    | { readonly op: "redrive"; readonly region: string }
    | { readonly op: "settle"; readonly region: string }
    /** Replication applies up to `writes` pending writes, oldest first in each lane the seed picks. */
    | { readonly op: "replicate"; readonly writes: number }
    /** The region's replica of the counters table deletes what has expired there (TTL). */
    | { readonly op: "ttl"; readonly region: string }
    | { readonly op: "advance"; readonly ms: number }
    /** The key's stored limit, written in `region`. */
    | { readonly op: "setLimit"; readonly region: string; readonly key: string; readonly limit: number }
    /** The region's deployment takes a new member list (its clients and functions run with it from now on). */
    | { readonly op: "adopt"; readonly region: string; readonly members: readonly string[] };

export interface RegionsHistory {
    readonly seed: number;
    readonly mode: Mode;
    /** Every region with replicas; the first is the home. */
    readonly regions: readonly string[];
    /** The members every region starts with (the home among them). */
    readonly members: readonly string[];
    readonly counterShards: number;
    readonly faultRate: number;
    readonly concurrency: number;
    /** Each key's stored limit at the start. */
    readonly limits: Readonly<Record<string, number>>;
    readonly events: readonly RegionsEvent[];
    /** The most virtual ms a released request takes. @default 20 */
    readonly latencyMs?: number;
}

export interface RegionsOptions {
    readonly ops: number;
    readonly mode?: Mode;
    readonly faultRate?: number;
    readonly regions?: number;
}

const HOUR = 3_600_000;

export function generateRegionsHistory(seed: number, options: RegionsOptions): RegionsHistory {
    const random = seededRandom((seed ^ 0x7f4a7c15) >>> 0);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    const mode: Mode = options.mode ?? (random() < 0.6 ? "strict" : "utilization");
    const regions = REGION_NAMES.slice(0, options.regions ?? pick([2, 3]));
    // Some seeds start with a region that is not a member yet (it joins in the history), some change none.
    const joining = regions.length === 3 && random() < 0.5;
    const members = joining ? regions.slice(0, 2) : [...regions];
    const keys = ["k0", "k1"].slice(0, 1 + Math.floor(random() * 2));
    const ids = Array.from({ length: 4 + Math.floor(random() * 3) }, (_, i) => `i${i}`);
    const limits = Object.fromEntries(keys.map((key) => [key, 1 + Math.floor(random() * ids.length)]));
    const lag = pick([1, 2, 4]);
    const events: RegionsEvent[] = [];
    for (let i = 0; i < options.ops; i++) {
        events.push(drawEvent(random, pick, { regions, keys, ids, lag, joining, members }));
    }
    return {
        seed,
        mode,
        regions,
        members,
        counterShards: pick([1, 1, 2]),
        faultRate: options.faultRate ?? pick([0, 0.02, 0.05, 0.1]),
        concurrency: 2 + Math.floor(random() * 3),
        limits,
        events,
    };
}

interface Shape {
    readonly regions: readonly string[];
    readonly keys: readonly string[];
    readonly ids: readonly string[];
    /** How many writes a replicate event applies: a lagging seed applies few. */
    readonly lag: number;
    readonly joining: boolean;
    readonly members: readonly string[];
}

function drawEvent(random: () => number, pick: <T>(values: readonly T[]) => T, shape: Shape): RegionsEvent {
    const region = pick(shape.regions);
    const key = pick(shape.keys);
    const id = pick(shape.ids);
    const roll = random();
    if (roll < 0.18) {
        return { op: "tryCreate", region, key, id };
    }
    if (roll < 0.24 && key !== "k0") {
        return { op: "create", region, key, id };
    }
    if (roll < 0.4) {
        return { op: "delete", region, key, id };
    }
    if (roll < 0.43) {
        return { op: "count", region, key };
    }
    if (roll < 0.55) {
        return { op: "consume", region, max: 1 + Math.floor(random() * 10), crash: random() < 0.1 };
    }
    if (roll < 0.57) {
        return { op: "redrive", region };
    }
    if (roll < 0.62) {
        return { op: "settle", region };
    }
    if (roll < 0.8) {
        return { op: "replicate", writes: shape.lag * (1 + Math.floor(random() * 3)) };
    }
    if (roll < 0.84) {
        return { op: "ttl", region };
    }
    if (roll < 0.89) {
        return { op: "advance", ms: pick([60_000, 10 * 60_000, HOUR, 12 * HOUR, 30 * HOUR, 50 * HOUR]) };
    }
    if (roll < 0.95) {
        return { op: "setLimit", region, key, limit: Math.floor(random() * (shape.ids.length + 1)) };
    }
    // The joining region added to the members, one region's deployment at a time (the joining region's own first).
    if (shape.joining) {
        return { op: "adopt", region, members: [...shape.regions] };
    }
    return { op: "count", region, key };
}
