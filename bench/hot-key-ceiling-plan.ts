/**
 * The pure half of the hot-key ceiling (`npm run bench -- --scenario hot-key-ceiling`): its flags, the
 * search over offered rates, and the shape of its report. No engine, no clock: `bench/hot-key-ceiling.ts`
 * runs the steps this module plans, and test/hot-key-ceiling.test.ts checks the planning.
 *
 * The ceiling of a key is the highest steady create rate at which fewer than `THROTTLED_SHARE_LIMIT` of
 * the API's best-effort write requests are throttled. The search doubles the offered rate while a step
 * stays under that share, then bisects between the highest rate accepted and the lowest refused, and
 * stops after `maxSteps` steps or once the two are within `resolution` of each other.
 */
import type { CounterMode } from "../runtime/client/client";
import { COUNTER_SHARDS_MAX } from "../runtime/shared/config";
import { barChartSvg } from "./sweep-svg";

/** A best-effort share at or above this refuses a rate. */
export const THROTTLED_SHARE_LIMIT = 0.01;

/** The shard counts measured when `--shards` is not given: the unsharded key, and two spreads of it. */
export const DEFAULT_SHARD_COUNTS: readonly number[] = [1, 4, 16];

/** The modes measured, each with its own bound. */
export const CEILING_MODES: readonly CounterMode[] = ["utilization", "strict"];

/** A bad value of one of the scenario's flags: one line naming the flag. */
export class CeilingUsageError extends Error {}

/**
 * `--shards <list>`: comma-separated shard counts of each key's counting, each from 1 to the component's
 * most (runtime/shards/layout.ts), passed to the component as `counterShards` (hot-key-ceiling.ts).
 */
export function parseShards(raw: string | undefined): number[] {
    const shards = raw === undefined ? DEFAULT_SHARD_COUNTS.map(String) : raw.split(",").map((s) => s.trim());
    const counts: number[] = [];
    for (const s of shards) {
        const n = Number(s);
        if (!/^\d+$/.test(s) || n < 1) {
            throw new CeilingUsageError(`--shards takes a comma-separated list of shard counts (got "${s}")`);
        }
        if (n > COUNTER_SHARDS_MAX) {
            throw new CeilingUsageError(`--shards ${n}: a key's counting spreads over at most ${COUNTER_SHARDS_MAX} shards`);
        }
        if (!counts.includes(n)) {
            counts.push(n);
        }
    }
    return counts;
}

/** One step's figures, measured at one offered rate. */
export interface CeilingStep {
    readonly offeredOpsPerSec: number;
    /** Creates the API completed per second of the step. */
    readonly sustainedOpsPerSec: number;
    /** Best-effort write requests the partition throttled, over all best-effort write requests of the step. */
    readonly throttledBestEffortShare: number;
    /** After the pipeline drained: the eventual counter equals the live items. */
    readonly exact: boolean;
    /** Observations (during the step and after the drain) at which the mode's bound did not hold. */
    readonly boundViolations: number;
    /** Errors the client surfaced to the API's callers. */
    readonly apiErrors: number;
    /** Read capacity one `count()` consumed, after the drain. */
    readonly countRcu: number;
}

export interface SearchOptions {
    /** The first offered rate (creates per second). */
    readonly startRate: number;
    /** Steps at most, each one measurement. */
    readonly maxSteps: number;
    /** Stop bisecting once (refused - accepted) / accepted is at most this. @default 0.1 */
    readonly resolution?: number;
    /** No rate below this is tried when even the first is refused. @default startRate / 16 */
    readonly minRate?: number;
}

export interface SearchResult<T> {
    /** The highest accepted rate and what it measured; undefined when no rate was accepted. */
    readonly best: { readonly rate: number; readonly result: T } | undefined;
    /** Every step, in the order measured. */
    readonly steps: ReadonlyArray<{ readonly rate: number; readonly share: number; readonly accepted: boolean; readonly result: T }>;
}

/** The rate after a step: doubling while nothing was refused, halving while nothing was accepted, else the midpoint. */
export function nextRate(accepted: number | undefined, refused: number | undefined, last: number): number {
    if (refused === undefined) {
        return last * 2;
    }
    if (accepted === undefined) {
        return last / 2;
    }
    return (accepted + refused) / 2;
}

/**
 * Searches for the highest offered rate whose throttled share stays under the limit. `measure` runs one
 * step at a rate; `share` reads its throttled share. Bounded by `maxSteps` measurements.
 */
export async function searchCeiling<T>(
    measure: (rate: number) => Promise<T>,
    share: (result: T) => number,
    options: SearchOptions,
): Promise<SearchResult<T>> {
    const resolution = options.resolution ?? 0.1;
    const minRate = options.minRate ?? options.startRate / 16;
    const steps: Array<{ rate: number; share: number; accepted: boolean; result: T }> = [];
    let best: { rate: number; result: T } | undefined;
    let refused: number | undefined;
    let rate = options.startRate;
    for (let i = 0; i < options.maxSteps; i++) {
        const result = await measure(rate);
        const s = share(result);
        const accepted = s < THROTTLED_SHARE_LIMIT;
        steps.push({ rate, share: s, accepted, result });
        if (accepted && (best === undefined || rate > best.rate)) {
            best = { rate, result };
        } else if (!accepted && (refused === undefined || rate < refused)) {
            refused = rate;
        }
        if (best !== undefined && refused !== undefined && (refused - best.rate) / best.rate <= resolution) {
            break;
        }
        rate = nextRate(best?.rate, refused, rate);
        if (rate < minRate) {
            break;
        }
    }
    return { best, steps };
}

/** One row of the report: a mode and a shard count, at its ceiling. */
export interface CeilingRow {
    mode: CounterMode;
    shards: number;
    sustainedOpsPerSec: number;
    throttledBestEffortShare: number;
    exact: boolean;
    boundViolations: number;
    apiErrors: number;
    countRcu: number;
}

/**
 * What a strict `tryCreate` refused at its limit costs, per shard count: the unsharded key's one refused
 * conditional write is the floor; a sharded key tries each shard with a quota, then reads a snapshot of them.
 */
export interface RefusalCost {
    shards: number;
    /** The limit the key was filled to. */
    limit: number;
    /** Requests one refused call sent, on average (writes and reads). */
    requestsPerRefusal: number;
    /** Write units one refused call consumed (a refused conditional write consumes one). */
    writeUnitsPerRefusal: number;
    /** Read units one refused call consumed (a TransactGetItems reads 2 per item). */
    readUnitsPerRefusal: number;
    /** Every refused call answered "limit" with the key's count, and the key held exactly `limit`. */
    exact: boolean;
}

export interface CeilingReport {
    partitionWcu: number;
    rows: CeilingRow[];
    /** Strict mode at its limit, per shard count measured (hot-key-ceiling.ts `measureRefusals`). */
    atLimit?: RefusalCost[];
}

const round = (n: number, digits: number) => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * The row of a search: the figures of its highest accepted step. When no rate was accepted, the lowest
 * rate measured stands in, with a sustained rate of 0.
 */
export function ceilingRow(mode: CounterMode, shards: number, search: SearchResult<CeilingStep>): CeilingRow {
    const lowest = [...search.steps].sort((a, b) => a.rate - b.rate)[0];
    const step = search.best?.result ?? lowest?.result;
    if (step === undefined) {
        throw new Error("the search measured no step");
    }
    return {
        mode,
        shards,
        sustainedOpsPerSec: search.best === undefined ? 0 : round(step.sustainedOpsPerSec, 2),
        throttledBestEffortShare: round(step.throttledBestEffortShare, 4),
        exact: step.exact,
        boundViolations: step.boundViolations,
        apiErrors: step.apiErrors,
        countRcu: step.countRcu,
    };
}

/** Two counters of a key read in the order `observeBound` reads them (hot-key-ceiling.ts). */
export interface BoundObservation {
    readonly bestEffort: number;
    readonly live: number;
}

/**
 * The mode's bound on best-effort (runtime/client/client.ts states both): in utilization best-effort never
 * counts an item that is not live (best-effort <= live); in strict it holds a slot for every live item
 * and never passes the limit (live <= best-effort <= limit).
 */
export function boundHolds(mode: CounterMode, observation: BoundObservation, limit: number): boolean {
    return mode === "utilization"
        ? observation.bestEffort <= observation.live
        : observation.live <= observation.bestEffort && observation.bestEffort <= limit;
}

/** The report as a bar chart: per shard count, each mode's sustained creates a second (docs/hot-key-ceiling.svg). */
export function ceilingChartSvg(report: CeilingReport): string {
    const shards = [...new Set(report.rows.map((r) => r.shards))].sort((a, b) => a - b);
    return barChartSvg({
        title: `One key's ceiling: creates/s with < 1% of best-effort writes throttled, partitions at ${report.partitionWcu} WCU/s`,
        yLabel: "sustained creates/s",
        groups: shards.map((n) => ({
            label: `${n} shard${n === 1 ? "" : "s"}`,
            bars: CEILING_MODES.flatMap((mode) => {
                const row = report.rows.find((r) => r.shards === n && r.mode === mode);
                return row === undefined ? [] : [{ name: mode, value: row.sustainedOpsPerSec }];
            }),
        })),
        colors: { utilization: "#1f77b4", strict: "#d62728" },
    });
}
