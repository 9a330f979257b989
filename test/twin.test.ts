import { spawnSync } from "node:child_process";
import { strict as assert } from "node:assert";
import * as path from "node:path";
import { HybridCounterComponent } from "../components/component";
import { runProgramWithResult } from "../local/deployment/pulumi-mocks";
import { describeDeployedSystem } from "../local/deployment/system";
import { API_ERRORS_LISTED, parseTwinArgs, UsageError, type TwinReport } from "../local/twin/twin";
import { ENV } from "../runtime/shared/config";
import { CallsInFlight } from "../local/harness/calls";
import { pauseAfterRun, rateMinutes, settlerPeriodMs } from "../local/twin/settler";
import type { HybridCounterClient } from "../runtime/client/client";

const root = path.resolve(__dirname, "..");
const tsx = path.join(root, "node_modules", ".bin", "tsx");

function twin(args: string[]) {
    return spawnSync(tsx, ["local/twin/twin.ts", ...args], { cwd: root, encoding: "utf8", env: { ...process.env, NODE_NO_WARNINGS: "1" } });
}

/** The one JSON line `--json` prints. */
function reportOf(result: ReturnType<typeof twin>): TwinReport {
    assert.equal(result.status, 0, result.stderr);
    const lines = result.stdout.trim().split("\n");
    assert.equal(lines.length, 1, "--json prints the report and nothing else");
    return JSON.parse(lines[0]!) as TwinReport;
}

/** What every run must show: every key exact, every crossing received, every key's usage what the stream says. */
function assertPasses(report: TwinReport): void {
    assert.equal(report.exact, true);
    assert.equal(report.eventual, report.live);
    assert.equal(report.live, report.created - report.deleted);
    assert.deepEqual(report.drift, []);
    assert.equal(
        Object.values(report.liveByKey).reduce((a, b) => a + b, 0),
        report.live,
    );
    assert.ok(report.thresholds.events > 0, "the keys crossed their thresholds and the subscriber heard of it");
    assert.ok(report.thresholds.crossings > 0);
    assert.equal(report.thresholds.missed, 0);
    assert.equal(report.thresholds.unmatched, 0);
    assert.ok(report.thresholds.events >= report.thresholds.crossings);
    assert.equal(report.usage.exact, true);
    // One day of usage per key, two for a key whose traffic crossed midnight UTC.
    assert.ok(report.usage.days >= report.keys && report.usage.days <= 2 * report.keys, `${report.usage.days} key-days`);
    assert.equal(report.streamReads.errors, 0, report.streamReads.lastError ?? "");
    assert.equal(report.lagSplitMs.unmatched, 0, "every write's count was seen committed");
}

describe("the local twin", () => {
    it("reads the deployed system from the component's recorded resources", async () => {
        // Act
        const run = await runProgramWithResult(
            () => new HybridCounterComponent("orders", { batchSize: 250, maximumRetryAttempts: 4, createThresholdTopic: true }),
        );
        const system = describeDeployedSystem(run.resources);

        // Assess
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
                // No filter: records the consumer counts nothing for cost no write, and a filter would hide the
                // records whose frontier the consumer keeps.
                filterPatterns: 0,
                startingPosition: "TRIM_HORIZON",
                tumblingWindowInSeconds: 900,
            },
        );
        assert.equal(system.consumer.environment[ENV.tableName], system.table.name);
        assert.equal(system.consumer.environment[ENV.fatalQueueUrl], system.fatalDlqUrl);
        assert.equal(system.consumer.handler, "index.handler");
        assert.equal(system.maxReceiveCount, 5);
        assert.notEqual(system.firstDlqUrl, system.fatalDlqUrl);
        const topics = run.resources.filter((r) => r.type === "aws:sns/topic:Topic" && r.state.arn === system.thresholdTopicArn);
        assert.equal(topics.length, 1, "the consumer publishes to the topic the component created");
        assert.equal(system.redrive.environment[ENV.thresholdTopicArn], system.thresholdTopicArn);
        assert.equal(system.settler?.scheduleExpression, "rate(5 minutes)");
        assert.equal(system.settler?.function.environment[ENV.thresholdTopicArn], system.thresholdTopicArn);
    });

    it("reads no threshold topic and no settler from a component that deploys neither", async () => {
        const run = await runProgramWithResult(() => new HybridCounterComponent("plain", { settlerEnabled: false }));

        const system = describeDeployedSystem(run.resources);

        assert.deepEqual([system.thresholdTopicArn, system.settler], [undefined, undefined]);
        assert.equal(system.consumer.environment[ENV.thresholdTopicArn], undefined);
    });

    it("parses its flags and names each bad one; without --ops it runs a minute", () => {
        assert.deepEqual(parseTwinArgs(["--ops", "10", "--mode", "strict", "--limit", "3", "--json", "--seed-items", "500"]), {
            ops: 10,
            durationSeconds: 0,
            keys: 8,
            concurrency: 8,
            deleteRatio: 0.3,
            limit: 3,
            mode: "strict",
            faults: 0.02,
            seed: 1,
            json: true,
            chart: path.join("twin-output", "chart.svg"),
            chartKeys: 3,
            seedItems: 500,
        });
        const defaults = parseTwinArgs([]);
        assert.ok(defaults !== "help");
        assert.deepEqual([defaults.ops, defaults.durationSeconds, defaults.limit, defaults.mode], [0, 60, 20, "utilization"]);
        const watch = parseTwinArgs(["--watch"]);
        assert.ok(watch !== "help");
        assert.equal(watch.durationSeconds, Infinity);
        assert.throws(() => parseTwinArgs(["--ops", "0", "--faults", "2", "--mode", "exact"]), {
            name: "UsageError",
            message:
                '--mode must be utilization or strict (got "exact")\n--ops must be an integer from 1 to 10000000 (got "0")\n--faults must be a number from 0 to 1 (got "2")',
        });
        assert.throws(() => parseTwinArgs(["--ops", "5", "--duration", "5"]), {
            name: "UsageError",
            message: "--ops and --duration exclude each other",
        });
        assert.throws(() => parseTwinArgs(["--limit", "0"]), {
            name: "UsageError",
            message: '--limit must be an integer from 1 to 1000000 (got "0")',
        });
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

    it("runs the settler on the component's schedule compressed, and pauses after a run to the end of its period", () => {
        assert.deepEqual([rateMinutes("rate(5 minutes)"), rateMinutes("rate(1 hour)"), rateMinutes("rate(2 days)")], [5, 60, 2_880]);
        assert.throws(() => rateMinutes("cron(0 * * * ? *)"), /is not a rate\(\) expression/);
        const fn = { name: "settler", environment: {}, timeoutSeconds: 300, handler: "index.handler" };
        assert.equal(settlerPeriodMs({ settler: { scheduleExpression: "rate(5 minutes)", function: fn } }, 60), 5_000);
        assert.equal(settlerPeriodMs({}, 60), undefined);
        assert.deepEqual(
            [pauseAfterRun(1_000, 100), pauseAfterRun(1_000, 500), pauseAfterRun(1_000, 700), pauseAfterRun(1_000, 3_000)],
            [900, 500, 300, 0],
        );
    });

    it("strict mode, no faults: exact, no API error, no key over its stored limit, every crossing received, usage as the stream says", function () {
        // Act
        const report = reportOf(
            twin(["--json", "--mode", "strict", "--limit", "10", "--ops", "300", "--faults", "0", "--keys", "4", "--seed", "3"]),
        );

        // Assess
        assert.equal(report.ops, 300);
        assert.equal(report.limit, 10);
        assertPasses(report);
        assert.equal(report.apiErrors, 0);
        assert.deepEqual(report.limitExceededKeys, []);
        for (const key of Object.keys(report.liveByKey)) {
            assert.ok(report.liveByKey[key]! <= 10, `${key}: live ${report.liveByKey[key]} within the limit`);
            assert.ok(report.bestEffortByKey[key]! >= report.liveByKey[key]!, `${key}: best-effort >= live`);
        }
        assert.deepEqual(report.settings, {
            batchSize: 100,
            maximumRetryAttempts: 10,
            maximumRecordAgeInSeconds: 21_600,
            parallelizationFactor: 1,
            tumblingWindowInSeconds: 900,
        });
        // Held slots over time: one point per observation and one per key at the end, the last the keys' final best-effort - live.
        assert.equal(report.bestEffortDriftOverTime, null);
        const held = report.heldSlotsOverTime!;
        assert.equal(held.length, report.observations + Object.keys(report.liveByKey).length);
        const finalHeld = Object.keys(report.liveByKey).reduce((n, k) => n + report.bestEffortByKey[k]! - report.liveByKey[k]!, 0);
        assert.equal(held.at(-1)![1], finalHeld);
        assert.ok(report.heals.runs >= 1, "the settler's run after the drain");
    });

    it("utilization with 5% injected faults over 800 operations on 8 keys: exact, never an overcount, every crossing received, usage as the stream says", function () {
        // Act
        const report = reportOf(
            twin([
                "--json",
                "--faults",
                "0.05",
                "--ops",
                "800",
                "--keys",
                "8",
                "--limit",
                "12",
                "--seed",
                "7",
                "--chart",
                ".local/test-twin-chart.svg",
            ]),
        );

        // Assess
        assert.equal(report.ops, 800);
        assertPasses(report);
        // The contract's errors only. A delete may answer DeadlineExceededError when its writes outlast the client's
        // deadline (a loaded machine can stretch a call past 10 s), and a call may return DynamoDB's own error for its
        // request after every attempt met a fault: neither depends on nothing else going on.
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
        assert.ok(report.bestEffort <= report.live);
        assert.ok(report.faultsInjected.api > 0 && report.faultsInjected.consumer > 0, "faults were injected on both sides");
        assert.equal(report.chart, path.join(root, ".local", "test-twin-chart.svg"));
        assert.ok(report.heals.runs >= 1, "the settler's run after the drain");
        assert.deepEqual(Object.keys(report.bestEffortByKey).sort(), Object.keys(report.liveByKey).sort());
        assert.equal(Object.keys(report.liveByKey).length, 8);
        for (const key of Object.keys(report.liveByKey)) {
            assert.ok(report.bestEffortByKey[key]! <= report.liveByKey[key]!, `${key}: best-effort <= live`);
        }
        // Drift over time: one point per observation and one per key at the end, the last the keys' final |best-effort - live|.
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
