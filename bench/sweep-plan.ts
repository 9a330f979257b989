/**
 * What `npm run bench -- --sweep` measures, decided before anything runs: the options, the points
 * (offered load x key spread x batch settings) and the charts drawn from their results.
 *
 * Invariant: every figure a chart shows is a field of one measured point, and every throughput is a
 * ratio to a yardstick measured on the same engine right before that point.
 */
import { parseArgs } from "node:util";
import { barChartSvg, lineChartSvg, type Series } from "./sweep-svg";

export interface SweepOptions {
    /** Seconds of offered load per load or spread point. */
    readonly seconds: number;
    /** Offered loads for the lag curve, as ratios to the raw PutItem rate. */
    readonly loads: readonly number[];
    /** Key counts for the cost curve. */
    readonly spreads: readonly number[];
    /** Offered load of every spread point, as a ratio to the raw PutItem rate. */
    readonly spreadLoad: number;
    /** The batching window, in seconds, of the "with a window" series. */
    readonly window: number;
    /** Operations written before each throughput point drains them. */
    readonly backlog: number;
    readonly faults: number;
    readonly seed: number;
    /** Directory for sweep.json and the SVG charts. */
    readonly out: string;
    readonly json: boolean;
    /** Redraw the charts from this sweep.json instead of measuring. */
    readonly render?: string;
}

export const SWEEP_DEFAULTS: SweepOptions = Object.freeze({
    seconds: 8,
    loads: [0.02, 0.05, 0.1, 0.15, 0.2, 0.3],
    spreads: [1, 4, 16, 64],
    spreadLoad: 0.2,
    window: 5,
    backlog: 1_200,
    faults: 0,
    seed: 1,
    out: ".local/sweep",
    json: false,
});

export const SWEEP_USAGE = `Usage: npm run bench -- --sweep [options]

Charts how the consumer's lag and cost move with offered load, key spread and the stream mapping's batching,
each point on the system the component deploys and beside its own raw PutItem yardstick.

Options:
  --seconds <n>       seconds of offered load per point (1..600, default ${SWEEP_DEFAULTS.seconds})
  --loads <list>      offered loads of the lag curve, as ratios to raw PutItem (default ${SWEEP_DEFAULTS.loads.join(",")})
  --spreads <list>    key counts of the cost curve (default ${SWEEP_DEFAULTS.spreads.join(",")})
  --spread-load <r>   offered load of every spread point (default ${SWEEP_DEFAULTS.spreadLoad})
  --window <s>        batching window of the "with a window" series (1..300, default ${SWEEP_DEFAULTS.window})
  --backlog <n>       operations each throughput point drains (default ${SWEEP_DEFAULTS.backlog})
  --faults <rate>     injected fault rate (0..1, default ${SWEEP_DEFAULTS.faults})
  --seed <n>          workload seed (default ${SWEEP_DEFAULTS.seed})
  --out <dir>         where sweep.json and the charts go (default ${SWEEP_DEFAULTS.out})
  --render <file>     redraw the charts from a saved sweep.json instead of measuring
  --json              one JSON document on stdout, progress on stderr
  -h, --help          this text
`;

/** The batch sizes the cost and throughput curves compare. */
export const SWEEP_BATCH_SIZES = [100, 1_000] as const;
/** Keys of the load curve, and the hot-key share (as the twin drives them). */
export const LOAD_KEYS = 8;

export class SweepUsageError extends Error {
    override name = "SweepUsageError";
}

export function parseSweepArgs(argv: readonly string[]): SweepOptions {
    let values;
    try {
        values = parseArgs({
            args: [...argv],
            strict: true,
            allowPositionals: false,
            options: {
                seconds: { type: "string" },
                loads: { type: "string" },
                spreads: { type: "string" },
                "spread-load": { type: "string" },
                window: { type: "string" },
                backlog: { type: "string" },
                faults: { type: "string" },
                seed: { type: "string" },
                out: { type: "string" },
                json: { type: "boolean" },
                render: { type: "string" },
            },
        }).values;
    } catch (error) {
        throw new SweepUsageError((error as Error).message);
    }
    const problems: string[] = [];
    const number = (name: string, raw: string | undefined, fallback: number, min: number, max: number, integer = false): number => {
        if (raw === undefined) {
            return fallback;
        }
        const n = Number(raw);
        if (raw.trim() === "" || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
            problems.push(`--${name} must be ${integer ? "an integer" : "a number"} from ${min} to ${max} (got "${raw}")`);
            return fallback;
        }
        return n;
    };
    const list = (name: string, raw: string | undefined, fallback: readonly number[], min: number, max: number, integer = false) => {
        if (raw === undefined) {
            return fallback;
        }
        const items = raw.split(",").map((part) => number(name, part, NaN, min, max, integer));
        return [...new Set(items)].sort((a, b) => a - b);
    };
    const d = SWEEP_DEFAULTS;
    const options: SweepOptions = {
        seconds: number("seconds", values.seconds, d.seconds, 1, 600),
        loads: list("loads", values.loads, d.loads, 0.001, 2),
        spreads: list("spreads", values.spreads, d.spreads, 1, 10_000, true),
        spreadLoad: number("spread-load", values["spread-load"], d.spreadLoad, 0.001, 2),
        window: number("window", values.window, d.window, 1, 300, true),
        backlog: number("backlog", values.backlog, d.backlog, 10, 1_000_000, true),
        faults: number("faults", values.faults, d.faults, 0, 1),
        seed: number("seed", values.seed, d.seed, 0, 2 ** 31, true),
        out: values.out ?? d.out,
        json: values.json ?? false,
        ...(values.render === undefined ? {} : { render: values.render }),
    };
    if (problems.length > 0) {
        throw new SweepUsageError(problems.join("\n"));
    }
    return options;
}

export type SweepPoint =
    | { readonly kind: "load"; readonly load: number; readonly keys: number; readonly batchSize: number; readonly windowSeconds: number }
    | { readonly kind: "spread"; readonly load: number; readonly keys: number; readonly batchSize: number; readonly windowSeconds: number }
    | { readonly kind: "throughput"; readonly keys: number; readonly batchSize: number; readonly windowSeconds: number };

/** The component's own mapping settings, which the load curve runs at. */
export interface DefaultBatching {
    readonly batchSize: number;
    readonly windowSeconds: number;
}

export function planSweep(options: SweepOptions, defaults: DefaultBatching): SweepPoint[] {
    const points: SweepPoint[] = options.loads.map((load) => ({ kind: "load", load, keys: LOAD_KEYS, ...defaults }));
    for (const batchSize of SWEEP_BATCH_SIZES) {
        for (const windowSeconds of [0, options.window]) {
            for (const keys of options.spreads) {
                points.push({ kind: "spread", load: options.spreadLoad, keys, batchSize, windowSeconds });
            }
        }
    }
    const ends = [...new Set([options.spreads[0]!, options.spreads.at(-1)!])];
    for (const batchSize of SWEEP_BATCH_SIZES) {
        for (const keys of ends) {
            points.push({ kind: "throughput", keys, batchSize, windowSeconds: 0 });
        }
    }
    return points;
}

/**
 * The consumer's cost model (docs/design/core.md): each batch writes each distinct key it holds once (its eventual
 * item, 1 WCU) and its stream shard's progress item once (1 WCU). With `keys` written uniformly and `records` per
 * batch, a batch holds keys x (1 - e^(-records/keys)) distinct keys on average. A write that also lists the key for a
 * heal (a young tombstone left for the settler) writes the heal index's entry too, so measured figures can sit above
 * the model when the workload deletes.
 */
export function modelWcuPerRecord(keys: number, records: number): number {
    const distinct = keys * (1 - Math.exp(-records / keys));
    return (distinct + 1) / records;
}

/** Records per batch needed for the model to reach `target` WCU per record at `keys` keys. */
export function recordsPerBatchFor(keys: number, target: number): number {
    let records = 1;
    while (modelWcuPerRecord(keys, records) > target && records < 1_000_000) {
        records++;
    }
    return records;
}

export interface LagSummary {
    readonly p50: number;
    readonly p99: number;
    readonly max: number;
}

export interface PointResult {
    readonly point: SweepPoint;
    /** Raw PutItem/s measured on the same engine right before the point. */
    readonly rawPutPerSec: number;
    readonly offeredOpsPerSec: number | null;
    readonly achievedOpsPerSec: number;
    /** Achieved API ops/s ÷ raw PutItem/s. */
    readonly achievedRatio: number;
    readonly ops: number;
    readonly recordsCounted: number;
    readonly invocations: number;
    readonly recordsPerInvocation: number;
    readonly consumerWcuPerRecord: number;
    /** Lag from the API call's return to the commit of the count; and its stream / pipeline parts. */
    readonly lagMs: { readonly total: LagSummary; readonly stream: LagSummary; readonly pipeline: LagSummary };
    /** Throughput points: records counted per second while draining, and as a ratio to raw PutItem/s. */
    readonly consumerRecordsPerSec: number | null;
    readonly consumerRatioToRawPut: number | null;
    readonly exact: boolean;
}

const COLORS = { b100w0: "#1f77b4", b100w: "#aec7e8", b1000w0: "#d62728", b1000w: "#ff9896" };

function seriesName(batchSize: number, windowSeconds: number): string {
    return `batch ${batchSize}, ${windowSeconds === 0 ? "no window" : `${windowSeconds} s window`}`;
}

function seriesColor(batchSize: number, windowSeconds: number): string {
    return batchSize === 100 ? (windowSeconds === 0 ? COLORS.b100w0 : COLORS.b100w) : windowSeconds === 0 ? COLORS.b1000w0 : COLORS.b1000w;
}

/** The charts, by file name. */
export function sweepCharts(results: readonly PointResult[], options: Pick<SweepOptions, "window" | "spreadLoad">): Record<string, string> {
    const load = results.filter((r) => r.point.kind === "load");
    const spread = results.filter((r) => r.point.kind === "spread");
    const throughput = results.filter((r) => r.point.kind === "throughput");
    const byLoad = (pick: (r: PointResult) => number) => load.map((r) => [(r.point as { load: number }).load, pick(r)] as const);
    const spreadSeries = (pick: (r: PointResult) => number): Series[] =>
        SWEEP_BATCH_SIZES.flatMap((batchSize) =>
            [0, options.window].map((windowSeconds) => ({
                name: seriesName(batchSize, windowSeconds),
                color: seriesColor(batchSize, windowSeconds),
                dashed: windowSeconds > 0,
                points: spread
                    .filter((r) => r.point.batchSize === batchSize && r.point.windowSeconds === windowSeconds)
                    .map((r) => [r.point.keys, pick(r)] as const),
            })),
        );
    return {
        "sweep-lag-vs-load.svg": lineChartSvg({
            title: `Lag against offered load (${LOAD_KEYS} keys, the component's default batching)`,
            xLabel: "offered load, as a ratio to the raw PutItem rate",
            yLabel: "lag, ms",
            xScale: "linear",
            series: [
                { name: "p50, write to commit", color: "#1f77b4", points: byLoad((r) => r.lagMs.total.p50) },
                { name: "p99, write to commit", color: "#d62728", points: byLoad((r) => r.lagMs.total.p99) },
                { name: "p99, pipeline (read to commit)", color: "#2ca02c", points: byLoad((r) => r.lagMs.pipeline.p99), dashed: true },
                { name: "p99, stream (write to read)", color: "#9467bd", points: byLoad((r) => r.lagMs.stream.p99), dashed: true },
            ],
            references: [{ y: 1_000, label: "1 s" }],
        }),
        "sweep-wcu-vs-spread.svg": lineChartSvg({
            title: `Consumer WCU per record against key spread (offered load ${options.spreadLoad} x raw PutItem)`,
            xLabel: "counter keys written to (log scale)",
            yLabel: "consumer WCU per record",
            xScale: "log2",
            series: [
                ...spreadSeries((r) => r.consumerWcuPerRecord),
                ...[100, 500].map((records) => ({
                    name: `model, ${records} records per batch`,
                    color: records === 100 ? "#7f7f7f" : "#bcbd22",
                    dashed: true,
                    points: [...new Set(spread.map((r) => r.point.keys))].map((keys) => [keys, modelWcuPerRecord(keys, records)] as const),
                })),
            ],
            references: [{ y: 1, label: "1 WCU per record" }],
        }),
        "sweep-lag-vs-spread.svg": lineChartSvg({
            title: "What a batching window costs: lag p99 against key spread",
            xLabel: "counter keys written to (log scale)",
            yLabel: "lag p99, write to commit, ms",
            xScale: "log2",
            series: spreadSeries((r) => r.lagMs.total.p99),
        }),
        "sweep-throughput.svg": barChartSvg({
            title: "Consumer's sustainable records/s, as a ratio to raw PutItem/s",
            yLabel: "records/s ÷ raw PutItem/s",
            groups: [...new Set(throughput.map((r) => r.point.keys))].map((keys) => ({
                label: `${keys} key${keys === 1 ? "" : "s"}`,
                bars: throughput
                    .filter((r) => r.point.keys === keys)
                    .map((r) => ({ name: `batch ${r.point.batchSize}`, value: r.consumerRatioToRawPut ?? 0 })),
            })),
            colors: { "batch 100": COLORS.b100w0, "batch 1000": COLORS.b1000w0 },
        }),
    };
}
