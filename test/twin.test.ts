import { spawnSync } from "node:child_process";
import { strict as assert } from "node:assert";
import * as path from "node:path";
import { HybridCounterComponent } from "../components/component";
import { runProgramWithResult } from "../local/deployment/pulumi-mocks";
import { describeDeployedSystem } from "../local/deployment/system";
import { API_ERRORS_LISTED, parseTwinArgs, UsageError, type TwinReport } from "../local/twin/twin";
import { ENV } from "../runtime/shared/config";
import { CallsInFlight } from "../local/harness/calls";
import { pauseAfterRun } from "../local/twin/settler";
import type { HybridCounterClient } from "../runtime/client/client";

const root = path.resolve(__dirname, "..");
const tsx = path.join(root, "node_modules", ".bin", "tsx");

function twin(args: string[]) {
    return spawnSync(tsx, ["local/twin/twin.ts", ...args], { cwd: root, encoding: "utf8", env: { ...process.env, NODE_NO_WARNINGS: "1" } });
}

describe("the local twin", () => {
    it("reads the deployed system from the component's recorded resources", async () => {
        const run = await runProgramWithResult(() => new HybridCounterComponent("orders", { batchSize: 250, maximumRetryAttempts: 4 }));

        const system = describeDeployedSystem(run.resources);

        assert.deepEqual(system.table, {
            name: system.table.name,
            hashKey: "pk",
            rangeKey: "sk",
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
        });
        assert.deepEqual(
            { ...system.streamMapping, filterPatterns: system.streamMapping.filterPatterns.length },
            {
                batchSize: 250,
                maximumBatchingWindowInSeconds: 0,
                parallelizationFactor: 1,
                maximumRetryAttempts: 4,
                maximumRecordAgeInSeconds: 21_600,
                bisectBatchOnFunctionError: true,
                reportBatchItemFailures: true,
                filterPatterns: 2,
                startingPosition: "TRIM_HORIZON",
            },
        );
        assert.equal(system.consumer.environment[ENV.tableName], system.table.name);
        assert.equal(system.consumer.environment[ENV.fatalQueueUrl], system.fatalDlqUrl);
        assert.equal(system.consumer.handler, "index.handler");
        assert.equal(system.maxReceiveCount, 5);
        assert.notEqual(system.firstDlqUrl, system.fatalDlqUrl);
    });

    it("parses its flags and names each bad one", () => {
        assert.deepEqual(parseTwinArgs(["--ops", "10", "--mode", "strict", "--limit", "3", "--json", "--seed-items", "500"]), {
            ops: 10,
            keys: 8,
            concurrency: 8,
            deleteRatio: 0.3,
            limit: 3,
            mode: "strict",
            faults: 0.02,
            seed: 1,
            durationSeconds: 0,
            json: true,
            chart: path.join("twin-output", "chart.svg"),
            chartKeys: 3,
            seedItems: 500,
        });
        assert.throws(() => parseTwinArgs(["--ops", "0", "--faults", "2", "--mode", "exact"]), {
            name: "UsageError",
            message:
                '--mode must be utilization or strict (got "exact")\n--ops must be an integer from 1 to 10000000 (got "0")\n--faults must be a number from 0 to 1 (got "2")',
        });
        assert.throws(
            () => parseTwinArgs(["--mode", "strict"]),
            (e: unknown) => e instanceof UsageError && /needs --limit/.test(e.message),
        );
        assert.throws(
            () => parseTwinArgs(["--bogus"]),
            (e: unknown) => e instanceof UsageError && /Unknown option '--bogus'/.test(e.message),
        );
    });

    it("exits 2 with a usage message on a bad flag", () => {
        const result = twin(["--concurrency", "zero"]);
        assert.equal(result.status, 2);
        assert.equal(result.stdout, "");
        assert.match(result.stderr, /^error: --concurrency must be an integer from 1 to 256 \(got "zero"\)\n\nUsage: npm start/);
    });

    it("counts the API calls in flight, which the settler runs beside: none is held back for it", async () => {
        // Prepare: calls that end when the test says.
        const ends: Array<() => void> = [];
        const call = () => () => new Promise<never>((_, reject) => ends.push(() => reject(new Error("ended"))));
        const calls = new CallsInFlight();
        const api = calls.wrap({ create: call(), delete: call(), tryCreate: call() } as unknown as HybridCounterClient);
        const settle = (p: Promise<unknown>) => p.catch(() => undefined);
        // Act
        const first = settle(api.create("k", "a"));
        const second = settle(api.delete("k", "b"));
        const during = calls.inFlight;
        ends.shift()!();
        await first;
        const after = calls.inFlight;
        ends.shift()!();
        await second;
        // Assess
        assert.deepEqual([during, after, calls.inFlight], [2, 1, 0]);
    });

    it("pauses after a settler run to the end of its period, and not at all after a run that outlasted it", () => {
        assert.deepEqual(
            [pauseAfterRun(1_000, 100), pauseAfterRun(1_000, 500), pauseAfterRun(1_000, 700), pauseAfterRun(1_000, 3_000)],
            [900, 500, 300, 0],
        );
    });

    it("strict mode in the default placement, no faults: runs to its report (the counters table's first write does not end the stream read)", function () {
        const result = twin(["--json", "--mode", "strict", "--limit", "10", "--ops", "300", "--faults", "0", "--keys", "4", "--seed", "3"]);
        assert.equal(result.status, 0, result.stderr);
        const report = JSON.parse(result.stdout.trim()) as TwinReport;
        assert.equal(report.ops, 300);
        assert.equal(report.exact, true);
        assert.equal(report.apiErrors, 0);
        assert.equal(report.eventual, report.live);
        assert.equal(report.streamReads.errors, 0, report.streamReads.lastError ?? "");
        for (const key of Object.keys(report.liveByKey)) {
            assert.ok(report.liveByKey[key]! <= 10, `${key}: live ${report.liveByKey[key]} within the limit`);
            assert.ok(report.bestEffortByKey[key]! >= report.liveByKey[key]!, `${key}: best-effort >= live`);
        }
        // Held slots over time: one point per observation, the last one the keys' final best-effort - live.
        assert.equal(report.bestEffortDriftOverTime, null);
        const held = report.heldSlotsOverTime!;
        assert.equal(held.length, report.observations + Object.keys(report.liveByKey).length);
        const finalHeld = Object.keys(report.liveByKey).reduce((n, k) => n + report.bestEffortByKey[k]! - report.liveByKey[k]!, 0);
        assert.equal(held.at(-1)![1], finalHeld);
    });

    it("with 5% injected faults over 800 operations on 8 keys: exact, no API error, never an overcount", function () {
        // The whole system on one machine. 800 operations, not 2,000 (this file took 791 s of one worker under heavy
        // shared load, the suite's longest): 100 calls a key still make about two thousand API attempts, so the API
        // meets every kind of fault dozens of times and the consumer meets faults on its side too (runtime-faults
        // counted 13 on the consumer's side for 600 calls), and the settler still runs on its compressed schedule
        // and after the drain.
        const result = twin([
            "--json",
            "--faults",
            "0.05",
            "--ops",
            "800",
            "--keys",
            "8",
            "--seed",
            "7",
            "--chart",
            ".local/test-twin-chart.svg",
        ]);
        assert.equal(result.status, 0, result.stderr);
        const lines = result.stdout.trim().split("\n");
        assert.equal(lines.length, 1, "--json prints the report and nothing else");
        const report = JSON.parse(lines[0]!) as TwinReport;

        assert.equal(report.ops, 800);
        assert.equal(report.exact, true);
        // The contract's errors only. A delete may answer DeadlineExceededError when its writes outlast the
        // client's deadline (a loaded machine can stretch a call past 10 s), and a call may return DynamoDB's
        // own error for its request after every attempt met a fault: neither depends on nothing else going on.
        assert.ok(report.apiErrors <= API_ERRORS_LISTED, `${report.apiErrors} API errors`);
        assert.equal(report.apiErrorList.length, report.apiErrors);
        for (const { operation, error } of report.apiErrorList) {
            const deadline = operation === "delete" && error.startsWith("DeadlineExceededError:");
            const dynamodb =
                /^(ThrottlingException|ProvisionedThroughputExceededException|InternalServerError|TransactionConflictException|TransactionCanceledException|RequestLimitExceeded):/.test(
                    error,
                );
            assert.ok(deadline || dynamodb, `${operation}: ${error} is not an error the contract allows`);
        }
        assert.deepEqual(report.overcountKeys, []);
        assert.equal(report.live, report.created - report.deleted);
        assert.equal(report.eventual, report.live);
        assert.ok(report.bestEffort <= report.live);
        assert.ok(report.faultsInjected.api > 0 && report.faultsInjected.consumer > 0, "faults were injected on both sides");
        assert.ok(report.observations > 0);
        assert.equal(report.chart, path.join(root, ".local", "test-twin-chart.svg"));
        // The settler ran on the component's schedule (compressed), and the report shows every key's counters.
        assert.ok(report.heals.runs > 0, `settler runs: ${report.heals.runs}`);
        assert.deepEqual(Object.keys(report.bestEffortByKey).sort(), Object.keys(report.liveByKey).sort());
        assert.equal(Object.keys(report.liveByKey).length, 8);
        assert.equal(
            Object.values(report.liveByKey).reduce((a, b) => a + b, 0),
            report.live,
        );
        for (const key of Object.keys(report.liveByKey)) {
            assert.ok(report.bestEffortByKey[key]! <= report.liveByKey[key]!, `${key}: best-effort <= live`);
        }
        // Drift over time: one point per observation, the last one the keys' final |best-effort - live|.
        assert.equal(report.heldSlotsOverTime, null);
        const drift = report.bestEffortDriftOverTime!;
        assert.equal(drift.length, report.observations + 8);
        assert.ok(drift.every(([t, d], i) => d >= 0 && (i === 0 || t >= drift[i - 1]![0])));
        const finalDrift = Object.keys(report.liveByKey).reduce(
            (n, k) => n + Math.abs(report.bestEffortByKey[k]! - report.liveByKey[k]!),
            0,
        );
        assert.equal(drift.at(-1)![1], finalDrift);
    });
});
