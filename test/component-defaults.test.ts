import * as assert from "node:assert/strict";
import { HYBRID_COUNTER_DEFAULTS as D, HybridCounterComponent, hybridCounterArgsProblems } from "../index";
import { findResource, resourcesOfType, runProgram, type RecordedResource } from "../local/deployment/pulumi-mocks";

/** Each default, proven on its own against a default instance (and pinned to its documented value). */
describe("HybridCounterComponent defaults", () => {
    let resources: RecordedResource[];
    const input = (type: string, name: string, key: string) => findResource(resources, type, name).inputs[key];
    const table = (key: string) => input("aws:dynamodb/table:Table", "orders-table", key);
    const mapping = (key: string) => input("aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping", key);
    const consumer = (key: string) => input("aws:lambda/function:Function", "orders-consumer", key);
    const redrive = (key: string) => input("aws:lambda/function:Function", "orders-redrive", key);
    const settler = (key: string) => input("aws:lambda/function:Function", "orders-settler", key);
    const settlerEnv = (name: string) => settler("environment").variables[name];
    const alarm = (name: string) => input("aws:cloudwatch/metricAlarm:MetricAlarm", `orders-${name}`, "threshold");
    const consumerEnv = (name: string) => consumer("environment").variables[name];
    /** The shortest ledger period the default args accept. */
    const smallestAcceptedPeriod = () => {
        let period = 1;
        while (hybridCounterArgsProblems({ healQuietWindowSeconds: period }).length > 0) {
            period++;
        }
        return period;
    };

    before(async () => {
        resources = await runProgram(() => new HybridCounterComponent("orders", {}));
    });

    const cases: Array<[string, () => unknown, unknown, unknown]> = [
        ["billingMode is PAY_PER_REQUEST", () => table("billingMode"), D.billingMode, "PAY_PER_REQUEST"],
        ["deletion protection is off", () => table("deletionProtectionEnabled"), D.deletionProtection, false],
        ["the stream view is NEW_AND_OLD_IMAGES", () => table("streamViewType"), D.streamViewType, "NEW_AND_OLD_IMAGES"],
        [
            "the counter items live in a counters table of their own",
            () =>
                consumer("environment").variables.HYBRID_COUNTER_COUNTERS_TABLE_NAME === "orders-counters" &&
                resourcesOfType(resources, "aws:dynamodb/table:Table").some((t) => t.name === "orders-counters")
                    ? "separate"
                    : "same-table",
            D.counterPlacement,
            "separate",
        ],
        [
            "each key's counting is one shard: no function, nor the API, is told a shard count",
            () =>
                ["orders-consumer", "orders-redrive", "orders-settler"].some(
                    (fn) => "HYBRID_COUNTER_COUNTER_SHARDS" in input("aws:lambda/function:Function", fn, "environment").variables,
                )
                    ? "sharded"
                    : 1,
            D.counterShards,
            1,
        ],
        ["the runtime is nodejs22.x", () => consumer("runtime"), D.lambdaRuntime, "nodejs22.x"],
        ["the architecture is arm64", () => consumer("architectures")[0], D.architecture, "arm64"],
        ["the consumer has 256 MB", () => consumer("memorySize"), D.consumerMemorySize, 256],
        ["the consumer times out after 60 s", () => consumer("timeout"), D.consumerTimeout, 60],
        ["the redrive has 256 MB", () => redrive("memorySize"), D.redriveMemorySize, 256],
        ["the redrive times out after 120 s", () => redrive("timeout"), D.redriveTimeout, 120],
        ["tracing is off", () => consumer("tracingConfig").mode === "Active", D.tracing, false],
        [
            "logs are kept 30 days",
            () => input("aws:cloudwatch/logGroup:LogGroup", "orders-consumer-logs", "retentionInDays"),
            D.logRetentionInDays,
            30,
        ],
        [
            "the metrics namespace is HybridCounter",
            () => consumer("environment").variables.HYBRID_COUNTER_METRICS_NAMESPACE,
            D.metricsNamespace,
            "HybridCounter",
        ],
        ["batchSize is 100", () => mapping("batchSize"), D.batchSize, 100],
        ["the batching window is 0 s", () => mapping("maximumBatchingWindowInSeconds"), D.maximumBatchingWindowInSeconds, 0],
        ["the parallelization factor is 1", () => mapping("parallelizationFactor"), D.parallelizationFactor, 1],
        ["a batch is retried 10 times", () => mapping("maximumRetryAttempts"), D.maximumRetryAttempts, 10],
        [
            "records older than 6 hours leave the stream path",
            () => mapping("maximumRecordAgeInSeconds"),
            D.maximumRecordAgeInSeconds,
            21_600,
        ],
        [
            "a first-DLQ message is received 5 times before the fatal DLQ",
            () => JSON.parse(input("aws:sqs/queue:Queue", "orders-first-dlq", "redrivePolicy")).maxReceiveCount,
            D.redriveMaxReceiveCount,
            5,
        ],
        ["the lag alarm fires above 15 minutes", () => alarm("consumer-iterator-age"), D.iteratorAgeAlarmThresholdMs, 900_000],
        ["the consumer errors alarm fires at 1", () => alarm("consumer-errors"), D.consumerErrorsAlarmThreshold, 1],
        ["the consumer throttles alarm fires at 1", () => alarm("consumer-throttles"), D.consumerThrottlesAlarmThreshold, 1],
        ["the first DLQ alarm fires above 0", () => alarm("first-dlq-depth"), D.firstDlqAlarmThreshold, 0],
        [
            "the first DLQ age alarm fires when a message waits over an hour",
            () => alarm("first-dlq-age"),
            D.firstDlqAgeAlarmThresholdSeconds,
            3_600,
        ],
        ["the fatal DLQ alarm fires above 0", () => alarm("fatal-dlq-depth"), D.fatalDlqAlarmThreshold, 0],
        ["the redrive errors alarm fires at 1", () => alarm("redrive-errors"), D.redriveErrorsAlarmThreshold, 1],
        ["no alarm topic is created", () => resourcesOfType(resources, "aws:sns/topic:Topic").length > 0, D.createAlarmTopic, false],
        [
            "the settler is deployed",
            () => resourcesOfType(resources, "aws:lambda/function:Function").some((f) => f.name === "orders-settler"),
            D.settlerEnabled,
            true,
        ],
        [
            "the settler runs every 5 minutes",
            () => input("aws:cloudwatch/eventRule:EventRule", "orders-settler-schedule", "scheduleExpression"),
            D.settlerSchedule,
            "rate(5 minutes)",
        ],
        [
            "the ledger period is 600 s, in every function",
            () =>
                [consumerEnv, settlerEnv].every((env) => env("HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS") === "600")
                    ? Number(consumerEnv("HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS"))
                    : "differs",
            D.healQuietWindowSeconds,
            600,
        ],
        [
            // The floor is deadline + 300 s + 2 x 60 s, and the smallest period above it is accepted: 431 s for 10 s.
            "the period is checked against a client deadline of 10 s, the client's own default",
            () => (smallestAcceptedPeriod() - 1) * 1000 - 420_000,
            D.clientDeadlineMs,
            10_000,
        ],
        [
            "the counter runs in utilization mode, in every function",
            () => ([consumerEnv, settlerEnv].every((env) => env("HYBRID_COUNTER_MODE") === "utilization") ? "utilization" : "differs"),
            D.counterMode,
            "utilization",
        ],
        [
            "the settler heals at most 200 keys a run",
            () => Number(settlerEnv("HYBRID_COUNTER_SETTLER_KEY_BUDGET")),
            D.settlerKeyBudget,
            200,
        ],
        ["the settler has 256 MB", () => settler("memorySize"), D.settlerMemorySize, 256],
        ["the settler times out after 300 s", () => settler("timeout"), D.settlerTimeout, 300],
        ["the settler errors alarm fires at 1", () => alarm("settler-errors"), D.settlerErrorsAlarmThreshold, 1],
        [
            "threshold events are recorded at 80% and 100% of a key's limit",
            () => consumerEnv("HYBRID_COUNTER_THRESHOLDS").split(",").map(Number),
            D.thresholds,
            [0.8, 1],
        ],
        [
            "no threshold topic is created, and no function is told one",
            () =>
                resourcesOfType(resources, "aws:sns/topic:Topic").length > 0 ||
                resourcesOfType(resources, "aws:lambda/function:Function").some(
                    (f) => "HYBRID_COUNTER_THRESHOLD_TOPIC_ARN" in f.inputs.environment.variables,
                ),
            D.createThresholdTopic,
            false,
        ],
        ["90 days of usage history are kept", () => Number(consumerEnv("HYBRID_COUNTER_USAGE_RETENTION_DAYS")), D.usageRetentionDays, 90],
    ];

    for (const [title, actual, defaultValue, documented] of cases) {
        it(title, () => {
            // Assess
            assert.deepEqual(defaultValue, documented);
            assert.deepEqual(actual(), documented);
        });
    }

    it("the redrive's concurrency is unreserved", () => {
        // Assess: no default value; the function gets no reservation.
        assert.equal("redriveReservedConcurrency" in D, false);
        assert.equal(redrive("reservedConcurrentExecutions"), undefined);
    });

    it("every default is covered above", () => {
        // Assess
        assert.equal(Object.keys(D).length, cases.length);
    });
});
