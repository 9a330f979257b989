/**
 * `npm run bench`'s command line (bench/run.ts, bench/options.ts): its help, its usage errors (exit 2, one line naming
 * the flag), its defaults, and one tiny fault-free run of the approaches scenario whose JSON report has every field with
 * its type and figures that agree with each other. Costs are asserted where they are counts of requests (a write of an
 * item under 1 KB bills 1 WCU), never a speed.
 */
import { spawnSync } from "node:child_process";
import { strict as assert } from "node:assert";
import * as path from "node:path";
import { BENCH_USAGE, BenchUsageError, parseOptions } from "../bench/run";

const root = path.resolve(__dirname, "..");
const tsx = path.join(root, "node_modules", ".bin", "tsx");

function bench(args: string[]) {
    return spawnSync(tsx, ["bench/run.ts", ...args], { cwd: root, encoding: "utf8", env: { ...process.env, NODE_NO_WARNINGS: "1" } });
}

describe("npm run bench: its flags", function () {
    it("--help prints the options on stdout and exits 0, starting no engine", () => {
        // Act
        const result = bench(["--help"]);
        // Assess
        assert.equal(result.status, 0, result.stderr);
        assert.equal(result.stdout, BENCH_USAGE);
        assert.match(result.stdout, /^Usage: npm run bench -- \[options\]\n/);
        for (const flag of [
            "--ops",
            "--faults",
            "--approaches",
            "--modes",
            "--workloads",
            "--scenario",
            "--counters",
            "--seconds",
            "--shards",
            "--partition-wcu",
            "--json",
            "--help",
        ]) {
            assert.ok(result.stdout.includes(flag), `the help names ${flag}`);
        }
    });

    it("--sweep --help prints the sweep's own options and exits 0, measuring nothing", () => {
        // Act
        const result = bench(["--sweep", "--help"]);
        // Assess
        assert.equal(result.status, 0, result.stderr);
        assert.match(result.stdout, /^Usage: npm run bench -- --sweep \[options\]\n/);
        for (const flag of ["--seconds", "--loads", "--spreads", "--window", "--render", "--json", "--help"]) {
            assert.ok(result.stdout.includes(flag), `the help names ${flag}`);
        }
    });

    it("an unknown flag, or an approach the bench no longer has, exits 2 with one line that names it and no stack", () => {
        for (const [args, line] of [
            [["--bogus"], /^error: Unknown option '--bogus'/],
            [
                ["--approaches", "hybrid-per-record"],
                /^error: --approaches takes a comma-separated list of hybrid, atomic-counter, transaction-crt \(got "hybrid-per-record"\)/,
            ],
        ] as const) {
            // Act
            const result = bench([...args]);
            // Assess
            assert.equal(result.status, 2, result.stderr);
            assert.equal(result.stdout, "");
            const lines = result.stderr.trim().split("\n");
            assert.equal(lines.length, 1, result.stderr);
            assert.match(lines[0]!, line);
        }
    });

    it("a bad value, or a flag of another scenario, is a usage error naming its flag", () => {
        for (const [args, flag] of [
            [["--ops", "abc"], "--ops"],
            [["--ops", "5"], "--ops"],
            [["--faults", "2"], "--faults"],
            [["--scenario", "nope"], "--scenario"],
            [["--counters", "elsewhere"], "--counters"],
            [["--approaches", "magic"], "--approaches"],
            [["--modes", "both"], "--modes"],
            [["--workloads", "all"], "--workloads"],
            [["--scenario", "approaches", "--seconds", "30"], "--seconds"],
            [["--scenario", "approaches", "--shards", "4"], "--shards"],
            [["--partition-wcu", "10"], "--partition-wcu"],
            [["--scenario", "hot-key-ceiling", "--modes", "strict"], "--modes"],
        ] as const) {
            // Assess
            assert.throws(
                () => parseOptions([...args]),
                (error: unknown) => error instanceof BenchUsageError && error.message.startsWith(flag),
                args.join(" "),
            );
        }
    });

    it("runs every scenario but the hot-key ceiling by default, the hybrid in both modes on both workloads, sized by the flags", () => {
        // Act
        const options = parseOptions([]);
        const approaches = parseOptions(["--scenario", "approaches", "--modes", "strict", "--workloads", "hot-key"]);
        const healing = parseOptions(["--seconds", "20", "--shards", "1"]);
        // Assess
        assert.ok(options !== "help" && approaches !== "help" && healing !== "help");
        assert.deepEqual(options.scenarios, { approaches: true, hotTenant: true, backfill: true, healing: true });
        assert.deepEqual(
            [options.approaches, options.modes, options.workloads],
            [
                ["hybrid", "atomic-counter", "transaction-crt"],
                ["utilization", "strict"],
                ["hot-key", "many-keys"],
            ],
        );
        assert.deepEqual([options.ops, options.concurrency, options.faults, options.manyKeys, options.parity], [1_500, 8, 0.02, 64, true]);
        assert.deepEqual(options.busy, { modes: ["utilization", "strict"], seconds: 60, shards: [1, 4], seed: 1 });
        assert.equal(options.ceiling, undefined);
        assert.deepEqual(approaches.scenarios, { approaches: true, hotTenant: false, backfill: false, healing: false });
        assert.deepEqual([approaches.modes, approaches.workloads], [["strict"], ["hot-key"]]);
        assert.deepEqual(
            healing.busy,
            { modes: ["utilization", "strict"], seconds: 20, shards: [1], seed: 1 },
            "--seconds and --shards size the healing rows",
        );
    });
});

type Row = {
    scenario: string;
    approach: string;
    mode: string | null;
    ops: number;
    opsPerSec: number;
    rawPutPerSec: number;
    ratioToRawPut: number;
    ratioWithConsumer: number | null;
    wcuPerOp: { create: number; delete: number; api: number; consumer: number; settler: number | null; total: number };
    consumerWcuPerRecord: { delivered: number; counted: number } | null;
    consumerWcuPerRecordWithConsumer: { delivered: number; counted: number } | null;
    apiErrors: number;
    accuracy: { exactKeys: number; keys: number; overcount: number; undercount: number };
    bestEffort: { under: number; over: number } | null;
    tombstonesLeft: number | null;
    consumerLagMs: { p50: number; p99: number } | null;
    consumerRecordsPerSec: number | null;
    stream: { read: number; delivered: number; counted: number } | null;
};

describe("npm run bench: a tiny fault-free run (DynamoDB Local)", function () {
    let report: {
        ops: number;
        faultRate: number;
        rows: Row[];
        streamNoise: { separate: Row["stream"]; sameTable: Row["stream"] };
        hotTenant: null;
        backfill: null;
        healing: null;
    };
    let stderr = "";

    before(() => {
        // Act: the hot key, the hybrid in strict mode and AWS's atomic counter; four runs on fresh servers.
        const result = bench([
            "--scenario",
            "approaches",
            "--workloads",
            "hot-key",
            "--approaches",
            "hybrid,atomic-counter",
            "--modes",
            "strict",
            "--ops",
            "40",
            "--faults",
            "0",
            "--json",
        ]);
        assert.equal(result.status, 0, result.stderr);
        stderr = result.stderr;
        report = JSON.parse(result.stdout) as typeof report;
    });

    it("reports one row per approach and mode, and nothing of the scenarios it did not run", () => {
        // Assess
        assert.deepEqual(
            report.rows.map((r) => [r.scenario, r.approach, r.mode]),
            [
                ["hot key", "hybrid", "strict"],
                ["hot key", "atomic-counter", null],
            ],
        );
        assert.deepEqual([report.ops, report.faultRate, report.hotTenant, report.backfill, report.healing], [40, 0, null, null, null]);
        assert.match(stderr, /hot key {2}hybrid strict {6}done: /);
    });

    it("prices the hybrid's calls by their writes: reserve + put per create, soft delete + release per delete", () => {
        // Assess
        const hybrid = report.rows[0]!;
        assert.deepEqual([hybrid.wcuPerOp.create, hybrid.wcuPerOp.delete], [2, 2]);
        assert.equal(hybrid.wcuPerOp.api, 2);
        assert.ok(hybrid.wcuPerOp.consumer > 0 && hybrid.wcuPerOp.settler! > 0, JSON.stringify(hybrid.wcuPerOp));
        assert.ok(Math.abs(hybrid.wcuPerOp.total - (hybrid.wcuPerOp.api + hybrid.wcuPerOp.consumer + hybrid.wcuPerOp.settler!)) <= 0.02);
        // The backlog drained in full batches: one write per key and one of the shard's progress, spread over them.
        assert.ok(hybrid.consumerWcuPerRecord!.counted <= 1, JSON.stringify(hybrid.consumerWcuPerRecord));
        assert.ok(hybrid.consumerWcuPerRecord!.delivered <= hybrid.consumerWcuPerRecord!.counted);
        assert.ok(hybrid.consumerWcuPerRecordWithConsumer!.counted > 0);
    });

    it("ends exact: every operation counted once, no tombstone left, best-effort on its items", () => {
        // Assess
        const hybrid = report.rows[0]!;
        assert.equal(hybrid.ops, 40);
        assert.equal(hybrid.apiErrors, 0);
        assert.deepEqual(hybrid.accuracy, { exactKeys: 1, keys: 1, overcount: 0, undercount: 0 });
        assert.deepEqual(hybrid.bestEffort, { under: 0, over: 0 });
        assert.equal(hybrid.tombstonesLeft, 0);
        assert.equal(hybrid.stream!.counted, 40, "each create and each delete moved the count once");
        assert.ok(hybrid.stream!.read >= hybrid.stream!.delivered && hybrid.stream!.delivered >= hybrid.stream!.counted);
    });

    it("measures rates as ratios to the same run's raw PutItem, and the lag with the consumer beside the API", () => {
        // Assess
        for (const row of report.rows) {
            assert.ok(row.rawPutPerSec > 0 && row.opsPerSec > 0, JSON.stringify(row));
            assert.ok(Math.abs(row.ratioToRawPut - row.opsPerSec / row.rawPutPerSec) <= 0.01, JSON.stringify(row));
        }
        const hybrid = report.rows[0]!;
        assert.ok(hybrid.ratioWithConsumer! > 0 && hybrid.consumerRecordsPerSec! > 0);
        assert.ok(hybrid.consumerLagMs!.p99 >= hybrid.consumerLagMs!.p50 && hybrid.consumerLagMs!.p50 >= 0);
    });

    it("reports the atomic counter's two writes per call, with no consumer, lag or stream", () => {
        // Assess
        const atomic = report.rows[1]!;
        assert.deepEqual(atomic.wcuPerOp, { create: 2, delete: 2, api: 2, consumer: 0, settler: null, total: 2 });
        assert.deepEqual(atomic.accuracy, { exactKeys: 1, keys: 1, overcount: 0, undercount: 0 });
        assert.deepEqual(
            [
                atomic.ratioWithConsumer,
                atomic.consumerWcuPerRecord,
                atomic.bestEffort,
                atomic.tombstonesLeft,
                atomic.consumerLagMs,
                atomic.stream,
            ],
            [null, null, null, null, null, null],
        );
    });

    it("gives the consumer the counter items' own records only in the same-table placement", () => {
        // Assess
        const { separate, sameTable } = report.streamNoise;
        assert.deepEqual([separate!.counted, sameTable!.counted], [40, 40]);
        assert.ok(sameTable!.delivered > separate!.delivered, JSON.stringify(report.streamNoise));
        assert.ok(sameTable!.read >= sameTable!.delivered && separate!.read >= separate!.delivered);
    });
});
