import { strict as assert } from "node:assert";
import { measurePoint, paced } from "../bench/sweep";
import {
    LOAD_KEYS,
    modelWcuPerRecord,
    parseSweepArgs,
    recordsPerBatchFor,
    planSweep,
    sweepCharts,
    SWEEP_DEFAULTS,
    SweepUsageError,
    type PointResult,
    type SweepPoint,
} from "../bench/sweep-plan";
import { barChartSvg, escapeXml, lineChartSvg, niceStep } from "../bench/sweep-svg";
import { useEngine } from "./support/engine";
import { startLocalSqs, type LocalSqs } from "../local/aws/sqs";

const lag = (p50: number, p99: number) => ({ p50, p99, max: p99 });

function result(point: SweepPoint, overrides: Partial<PointResult> = {}): PointResult {
    return {
        point,
        rawPutPerSec: 500,
        offeredOpsPerSec: point.kind === "throughput" ? null : 50,
        achievedOpsPerSec: 50,
        achievedRatio: 0.1,
        ops: 100,
        recordsCounted: 100,
        invocations: 10,
        recordsPerInvocation: 10,
        consumerWcuPerRecord: 2.5,
        lagMs: { total: lag(100, 400), stream: lag(40, 200), pipeline: lag(60, 300) },
        consumerRecordsPerSec: point.kind === "throughput" ? 500 : null,
        consumerRatioToRawPut: point.kind === "throughput" ? 2 : null,
        exact: true,
        ...overrides,
    };
}

describe("the sweep's plan", () => {
    it("runs at its defaults without flags", () => {
        assert.deepEqual(parseSweepArgs([]), SWEEP_DEFAULTS);
    });

    it("takes every size setting from a flag, lists sorted and without repeats", () => {
        const options = parseSweepArgs([
            "--seconds",
            "3",
            "--loads",
            "0.3,0.1,0.1",
            "--spreads",
            "64,1",
            "--spread-load",
            "0.15",
            "--window",
            "5",
            "--backlog",
            "500",
            "--out",
            "docs",
            "--json",
        ]);

        assert.equal(options.seconds, 3);
        assert.deepEqual(options.loads, [0.1, 0.3]);
        assert.deepEqual(options.spreads, [1, 64]);
        assert.equal(options.spreadLoad, 0.15);
        assert.equal(options.window, 5);
        assert.equal(options.backlog, 500);
        assert.equal(options.out, "docs");
        assert.equal(options.json, true);
    });

    it("names every bad flag in one error", () => {
        assert.throws(
            () => parseSweepArgs(["--seconds", "0", "--spreads", "1,x", "--window", "0.5"]),
            (error: unknown) =>
                error instanceof SweepUsageError &&
                error.message ===
                    [
                        '--seconds must be a number from 1 to 600 (got "0")',
                        '--spreads must be an integer from 1 to 10000 (got "x")',
                        '--window must be an integer from 1 to 300 (got "0.5")',
                    ].join("\n"),
        );
        assert.throws(() => parseSweepArgs(["--bogus"]), SweepUsageError);
    });

    it("plans the load curve at the component's batching, then spread x batch size x window, then throughput at both ends", () => {
        const points = planSweep(
            { ...SWEEP_DEFAULTS, loads: [0.1, 0.2], spreads: [1, 64], window: 5 },
            { batchSize: 100, windowSeconds: 0 },
        );

        assert.deepEqual(points, [
            { kind: "load", load: 0.1, keys: LOAD_KEYS, batchSize: 100, windowSeconds: 0 },
            { kind: "load", load: 0.2, keys: LOAD_KEYS, batchSize: 100, windowSeconds: 0 },
            { kind: "spread", load: 0.2, keys: 1, batchSize: 100, windowSeconds: 0 },
            { kind: "spread", load: 0.2, keys: 64, batchSize: 100, windowSeconds: 0 },
            { kind: "spread", load: 0.2, keys: 1, batchSize: 100, windowSeconds: 5 },
            { kind: "spread", load: 0.2, keys: 64, batchSize: 100, windowSeconds: 5 },
            { kind: "spread", load: 0.2, keys: 1, batchSize: 1000, windowSeconds: 0 },
            { kind: "spread", load: 0.2, keys: 64, batchSize: 1000, windowSeconds: 0 },
            { kind: "spread", load: 0.2, keys: 1, batchSize: 1000, windowSeconds: 5 },
            { kind: "spread", load: 0.2, keys: 64, batchSize: 1000, windowSeconds: 5 },
            { kind: "throughput", keys: 1, batchSize: 100, windowSeconds: 0 },
            { kind: "throughput", keys: 64, batchSize: 100, windowSeconds: 0 },
            { kind: "throughput", keys: 1, batchSize: 1000, windowSeconds: 0 },
            { kind: "throughput", keys: 64, batchSize: 1000, windowSeconds: 0 },
        ]);
    });

    it("draws each chart from the points' own figures", () => {
        const options = { ...SWEEP_DEFAULTS, loads: [0.1], spreads: [1, 64], window: 5 };
        const points = planSweep(options, { batchSize: 100, windowSeconds: 0 });
        const results = points.map((p) =>
            result(p, {
                consumerWcuPerRecord: p.kind === "spread" ? (p.keys === 64 ? 3.25 : 2.1) : 2,
                consumerRatioToRawPut: p.kind === "throughput" ? (p.batchSize === 100 ? 1.5 : 2.75) : null,
            }),
        );

        const charts = sweepCharts(results, options);

        assert.deepEqual(Object.keys(charts).sort(), [
            "sweep-lag-vs-load.svg",
            "sweep-lag-vs-spread.svg",
            "sweep-throughput.svg",
            "sweep-wcu-vs-spread.svg",
        ]);
        const wcu = charts["sweep-wcu-vs-spread.svg"]!;
        for (const name of ["batch 100, no window", "batch 100, 5 s window", "batch 1000, no window", "batch 1000, 5 s window"]) {
            assert.ok(wcu.includes(`>${name}</text>`), name);
        }
        assert.ok(wcu.includes(">model, 100 records per batch</text>") && wcu.includes(">model, 500 records per batch</text>"));
        assert.equal((wcu.match(/<circle /g) ?? []).length, 12, "two spreads for each of four measured series and two model lines");
        assert.ok(charts["sweep-throughput.svg"]!.includes(">2.75</text>"));
        assert.ok(charts["sweep-throughput.svg"]!.includes(">1.5</text>"));
        assert.equal((charts["sweep-lag-vs-load.svg"]!.match(/<circle /g) ?? []).length, 4, "one load, four lag series");
        assert.ok(charts["sweep-lag-vs-load.svg"]!.startsWith("<svg "));
    });
});

describe("the consumer's cost model", () => {
    it("costs one write per distinct key a batch holds and one of its shard's progress, spread over its records", () => {
        // Assess: one key, 100 records: 2 writes; 64 keys, 100 records: about 50 distinct keys + 1.
        assert.equal(modelWcuPerRecord(1, 100), 0.02);
        assert.equal(Math.round(modelWcuPerRecord(64, 100) * 100) / 100, 0.52);
        assert.equal(Math.round(modelWcuPerRecord(64, 1_000) * 1000) / 1000, 0.065);
    });

    it("reaches 1 WCU per record at 12 records per batch on 64 keys, and at 2 on one key", () => {
        // Assess
        assert.equal(recordsPerBatchFor(64, 1), 12);
        assert.equal(recordsPerBatchFor(1, 1), 2);
        assert.ok(modelWcuPerRecord(64, 11) > 1);
    });
});

describe("the sweep's SVG", () => {
    it("escapes text and picks round tick steps", () => {
        assert.equal(escapeXml(`a<b & "c">`), "a&lt;b &amp; &quot;c&quot;&gt;");
        assert.equal(niceStep(1_000), 200);
        assert.equal(niceStep(3.3), 1);
        assert.equal(niceStep(0), 1);
    });

    it("places points on a base-2 logarithmic axis evenly by doubling", () => {
        const svg = lineChartSvg({
            title: "t",
            xLabel: "x",
            yLabel: "y",
            xScale: "log2",
            series: [
                {
                    name: "s",
                    color: "#000",
                    points: [
                        [1, 1],
                        [4, 1],
                        [16, 1],
                    ],
                },
            ],
        });

        const xs = [...svg.matchAll(/<circle cx="([\d.]+)"/g)].map((m) => Number(m[1]));
        assert.deepEqual(xs, [70, 355, 640]);
    });

    it("draws one bar per value, labelled with it", () => {
        const svg = barChartSvg({
            title: "t",
            yLabel: "y",
            groups: [
                {
                    label: "g",
                    bars: [
                        { name: "a", value: 2 },
                        { name: "b", value: 3 },
                    ],
                },
            ],
            colors: { a: "#111", b: "#222" },
        });

        assert.equal((svg.match(/<rect x=/g) ?? []).length, 2);
        assert.ok(svg.includes(">2</text>") && svg.includes(">3</text>"));
    });

    it("paces calls to the offered rate whoever makes them", async () => {
        const calls: number[] = [];
        const target = paced(
            {
                create: async () => (calls.push(Date.now()), { created: true }),
                delete: async () => ({ deleted: true }),
                tryCreate: async () => ({ created: true }) as never,
            },
            20,
        );

        const started = Date.now();
        await Promise.all(Array.from({ length: 5 }, (_, i) => target.create("k", `i${i}`)));

        // A timer never fires early: call i comes no sooner than i slots of 50 ms after the start.
        const offsets = calls.map((t) => t - started);
        assert.ok(
            offsets.every((o, i) => o >= 50 * i - 2),
            `offsets ${offsets.join(", ")}`,
        );
    });
});

describe("a sweep point on DynamoDB Local", () => {
    const engine = useEngine();
    let sqs: LocalSqs | undefined;
    before(async () => {
        sqs = await startLocalSqs();
    });
    after(async () => {
        await sqs?.stop();
    });

    it("measures a throughput point beside its yardstick on the component's system, ends exact, and counts every write", async function () {
        // Prepare: a yardstick, a backlog and its drain on a shared 2-core machine: slow, never timed.
        const options = { ...SWEEP_DEFAULTS, backlog: 20 };
        // Act
        const drain = await measurePoint(
            { engine: engine(), sqs: sqs! },
            { kind: "throughput", keys: 2, batchSize: 1000, windowSeconds: 0 },
            options,
            20,
        );
        // Assess
        assert.equal(drain.exact, true);
        assert.equal(drain.ops, 20);
        assert.equal(drain.recordsCounted, 20, "every operation wrote one creation or one deletion, counted once");
        assert.ok(drain.rawPutPerSec > 0);
        assert.ok(drain.consumerRecordsPerSec! > 0 && drain.consumerRatioToRawPut! > 0);
        assert.ok(drain.consumerWcuPerRecord > 0);
        assert.equal(drain.offeredOpsPerSec, null);
        // Delivered records per invocation: at least the counted ones (a delete's claim is delivered and changes nothing).
        assert.ok(drain.recordsPerInvocation >= Math.round((drain.recordsCounted / drain.invocations) * 100) / 100);
    });
});
