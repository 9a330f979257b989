import * as assert from "node:assert/strict";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HybridCounterComponent, type HybridCounterComponentArgs } from "../index";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { HybridCounterClient } from "../runtime/client/client";
import { clientConfigFromEnv, layoutWithDefaults } from "../runtime/shared/config";
import { METRIC_NAMES } from "../runtime/shared/telemetry";
import { ConfigurationError } from "../runtime/shared/errors";
import { findResource, outputValue, resourcesOfType, runProgramWithResult, type RecordedResource } from "../local/deployment/pulumi-mocks";

const ACCOUNT = "123456789012";
const TABLE_ARN = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders-table`;
const COUNTERS_TABLE_ARN = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders-counters`;
const STREAM_ARN = `${TABLE_ARN}/stream/2024-01-01T00:00:00.000`;
const FIRST_DLQ_ARN = `arn:aws:sqs:us-east-1:${ACCOUNT}:orders-first-dlq`;
const FATAL_DLQ_ARN = `arn:aws:sqs:us-east-1:${ACCOUNT}:orders-fatal-dlq`;
const FATAL_DLQ_URL = `https://sqs.us-east-1.amazonaws.com/${ACCOUNT}/orders-fatal-dlq`;
const FIRST_DLQ_URL = `https://sqs.us-east-1.amazonaws.com/${ACCOUNT}/orders-first-dlq`;
const logGroupArn = (role: string) => `arn:aws:logs:us-east-1:${ACCOUNT}:log-group:orders-${role}-logs`;

const EXPECTED_DEFAULT_RESOURCES = [
    "hybrid-counter:index:HybridCounterComponent orders",
    "aws:dynamodb/table:Table orders-table",
    "aws:dynamodb/table:Table orders-counters",
    "aws:sqs/queue:Queue orders-fatal-dlq",
    "aws:sqs/queue:Queue orders-first-dlq",
    "aws:sqs/queuePolicy:QueuePolicy orders-first-dlq-policy",
    "aws:sqs/queuePolicy:QueuePolicy orders-fatal-dlq-policy",
    "aws:cloudwatch/logGroup:LogGroup orders-consumer-logs",
    "aws:cloudwatch/logGroup:LogGroup orders-redrive-logs",
    "aws:iam/role:Role orders-consumer-role",
    "aws:iam/role:Role orders-redrive-role",
    "aws:iam/rolePolicy:RolePolicy orders-consumer-policy",
    "aws:iam/rolePolicy:RolePolicy orders-redrive-policy",
    "aws:lambda/function:Function orders-consumer",
    "aws:lambda/function:Function orders-redrive",
    "aws:lambda/eventSourceMapping:EventSourceMapping orders-stream-mapping",
    "aws:lambda/eventSourceMapping:EventSourceMapping orders-redrive-mapping",
    "aws:cloudwatch/metricAlarm:MetricAlarm orders-consumer-iterator-age",
    "aws:cloudwatch/metricAlarm:MetricAlarm orders-consumer-errors",
    "aws:cloudwatch/metricAlarm:MetricAlarm orders-consumer-throttles",
    "aws:cloudwatch/metricAlarm:MetricAlarm orders-first-dlq-depth",
    "aws:cloudwatch/metricAlarm:MetricAlarm orders-first-dlq-age",
    "aws:cloudwatch/metricAlarm:MetricAlarm orders-fatal-dlq-depth",
    "aws:cloudwatch/metricAlarm:MetricAlarm orders-redrive-errors",
    "aws:cloudwatch/dashboard:Dashboard orders-dashboard",
    "aws:cloudwatch/logGroup:LogGroup orders-settler-logs",
    "aws:iam/role:Role orders-settler-role",
    "aws:iam/rolePolicy:RolePolicy orders-settler-policy",
    "aws:lambda/function:Function orders-settler",
    "aws:cloudwatch/eventRule:EventRule orders-settler-schedule",
    "aws:lambda/permission:Permission orders-settler-invoke",
    "aws:cloudwatch/eventTarget:EventTarget orders-settler-target",
    "aws:cloudwatch/metricAlarm:MetricAlarm orders-settler-errors",
];

function run(args: HybridCounterComponentArgs = {}) {
    return runProgramWithResult(() => new HybridCounterComponent("orders", args));
}

function policyOf(resource: RecordedResource): { Statement: Array<{ Sid: string; Effect: string; Action: string[]; Resource?: unknown }> } {
    return JSON.parse(resource.inputs.policy as string);
}

/** The counting statements both stream functions share: their exact calls on each table (components/iam.ts). */
const COUNTING = [
    {
        Sid: "CountInCountersTable",
        Effect: "Allow",
        Action: ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
        Resource: COUNTERS_TABLE_ARN,
    },
    { Sid: "FlagAndRemoveItems", Effect: "Allow", Action: ["dynamodb:UpdateItem", "dynamodb:DeleteItem"], Resource: TABLE_ARN },
];

function consumerStatements(extra: object[] = [], publish: object[] = []) {
    return [
        {
            Sid: "ReadOwnStream",
            Effect: "Allow",
            Action: ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"],
            Resource: STREAM_ARN,
        },
        { Sid: "ListStreams", Effect: "Allow", Action: ["dynamodb:ListStreams"], Resource: "*" },
        ...COUNTING,
        { Sid: "SendFailedBatchesToFirstDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: FIRST_DLQ_ARN },
        { Sid: "SendPoisonRecordsToFatalDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: FATAL_DLQ_ARN },
        ...publish,
        {
            Sid: "WriteOwnLogs",
            Effect: "Allow",
            Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
            Resource: `${logGroupArn("consumer")}:*`,
        },
        ...extra,
    ];
}

function redriveStatements(extra: object[] = [], publish: object[] = []) {
    return [
        { Sid: "ReadOwnStream", Effect: "Allow", Action: ["dynamodb:GetShardIterator", "dynamodb:GetRecords"], Resource: STREAM_ARN },
        ...COUNTING,
        {
            Sid: "ConsumeFirstDlq",
            Effect: "Allow",
            Action: ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
            Resource: FIRST_DLQ_ARN,
        },
        { Sid: "SendExpiredRangesToFatalDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: FATAL_DLQ_ARN },
        ...publish,
        {
            Sid: "WriteOwnLogs",
            Effect: "Allow",
            Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
            Resource: `${logGroupArn("redrive")}:*`,
        },
        ...extra,
    ];
}

/** The environment every function reads the counter's configuration from, for the default args. */
const COUNTER_ENVIRONMENT = {
    HYBRID_COUNTER_TABLE_NAME: "orders-table",
    HYBRID_COUNTER_COUNTERS_TABLE_NAME: "orders-counters",
    HYBRID_COUNTER_PARTITION_KEY: "pk",
    HYBRID_COUNTER_SORT_KEY: "sk",
    HYBRID_COUNTER_DELETED_ATTRIBUTE: "deleted",
    HYBRID_COUNTER_TOKEN_ATTRIBUTE: "counter_token",
    HYBRID_COUNTER_PREFIX: "#counter#",
    HYBRID_COUNTER_COUNT_ATTRIBUTE: "count",
    HYBRID_COUNTER_COUNTED_ITEMS: "client",
    HYBRID_COUNTER_MODE: "utilization",
    HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS: "600",
};

/** The consumer's and the redrive's environment for the default args. */
const HANDLER_ENVIRONMENT = {
    ...COUNTER_ENVIRONMENT,
    HYBRID_COUNTER_FATAL_QUEUE_URL: FATAL_DLQ_URL,
    HYBRID_COUNTER_METRICS_NAMESPACE: "HybridCounter",
    HYBRID_COUNTER_THRESHOLDS: "0.8,1",
    HYBRID_COUNTER_USAGE_RETENTION_DAYS: "90",
};

/** The settler's metrics (runtime/lambda/settler.ts settlerMetrics). */
const SETTLER_METRICS = [
    "KeysHealed",
    "KeysCorrected",
    "HealDrift",
    "HealsRaced",
    "TombstonesRemoved",
    "KeysAudited",
    "KeysAuditHealed",
    "HealFailures",
];

const TLS_ONLY = (arn: string) => ({
    Version: "2012-10-17",
    Statement: [
        {
            Sid: "DenyInsecureTransport",
            Effect: "Deny",
            Principal: "*",
            Action: ["sqs:*"],
            Resource: arn,
            Condition: { Bool: { "aws:SecureTransport": "false" } },
        },
    ],
});

describe("HybridCounterComponent", () => {
    describe("a default instance", () => {
        let resources: RecordedResource[];
        let component: HybridCounterComponent;
        const get = (type: string, name: string) => findResource(resources, type, name);

        before(async () => {
            const result = await run();
            resources = result.resources;
            component = result.result;
        });

        it("creates exactly 33 resources: the component and 32 children", () => {
            // Assess
            assert.deepEqual(resources.map((r) => `${r.type} ${r.name}`).sort(), [...EXPECTED_DEFAULT_RESOURCES].sort());
            assert.equal(resources.length, 33);
        });

        it("creates the counters table beside it: same string keys, the heal index, TTL on hc_expires, on-demand, PITR, SSE, no stream", () => {
            // Assess
            assert.deepEqual(get("aws:dynamodb/table:Table", "orders-counters").inputs, {
                attributes: [
                    { name: "pk", type: "S" },
                    { name: "sk", type: "S" },
                    { name: "hc_heal", type: "S" },
                    { name: "hc_due", type: "N" },
                ],
                hashKey: "pk",
                rangeKey: "sk",
                globalSecondaryIndexes: [{ name: "heal-index", hashKey: "hc_heal", rangeKey: "hc_due", projectionType: "KEYS_ONLY" }],
                billingMode: "PAY_PER_REQUEST",
                pointInTimeRecovery: { enabled: true },
                serverSideEncryption: { enabled: true },
                ttl: { attributeName: "hc_expires", enabled: true },
                deletionProtectionEnabled: false,
            });
        });

        it("gives the API exactly the client's actions on both tables", async () => {
            // Assess
            assert.deepEqual(JSON.parse(await outputValue(component.apiPolicyDocument)), {
                Version: "2012-10-17",
                Statement: [
                    {
                        Sid: "WriteResourceItems",
                        Effect: "Allow",
                        Action: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                        Resource: TABLE_ARN,
                    },
                    {
                        Sid: "ReadAndWriteCounters",
                        Effect: "Allow",
                        Action: [
                            "dynamodb:GetItem",
                            "dynamodb:BatchGetItem",
                            "dynamodb:Query",
                            "dynamodb:PutItem",
                            "dynamodb:UpdateItem",
                            "dynamodb:DeleteItem",
                            "dynamodb:ConditionCheckItem",
                        ],
                        Resource: COUNTERS_TABLE_ARN,
                    },
                ],
            });
        });

        it("gives the API the counter's environment, which reads back as the clientConfig output describes it", async () => {
            // Act
            const environment = await outputValue(component.apiEnvironment);
            const fromOutput = await outputValue(component.clientConfig);

            // Assess: the selection is flat in clientConfig, an object once read back.
            assert.deepEqual(environment, COUNTER_ENVIRONMENT);
            assert.deepEqual(clientConfigFromEnv(environment), {
                ...layoutWithDefaults(fromOutput),
                tableName: fromOutput.tableName,
                countersTableName: fromOutput.countersTableName,
                counterMode: "utilization",
                healQuietWindowSeconds: 600,
            });
        });

        it("builds a client from clientConfig alone, with the deployed mode, and refuses one told another mode", async () => {
            // Act
            const { result } = await run({ counterMode: "strict" });
            const config = await outputValue(result.clientConfig);
            const dynamodb = new DynamoDBClient({ region: "us-east-1", endpoint: "http://127.0.0.1:9" });

            // Assess
            assert.equal(config.counterMode, "strict");
            assert.equal(clientConfigFromEnv(await outputValue(result.apiEnvironment)).counterMode, "strict");
            assert.equal(new HybridCounterClient({ ...config, dynamodb }).mode, "strict");
            assert.throws(
                () => new HybridCounterClient({ ...config, dynamodb, mode: "utilization" }),
                (e: unknown) =>
                    e instanceof ConfigurationError &&
                    e.problems.length === 1 &&
                    e.problems[0]!.startsWith(
                        '[mode] must be the counter\'s own mode, "strict" (clientConfig.counterMode), not "utilization"',
                    ),
            );
            dynamodb.destroy();
        });

        it("gives clients the deployed ledger period, with or without a settler, so a client whose deadline it does not cover is refused", async () => {
            // Act: 450 s covers a deadline below 450 - 300 - 120 = 30 s.
            const { result } = await run({ healQuietWindowSeconds: 450 });
            const { result: without } = await run({ settlerEnabled: false });

            // Assess
            const config = await outputValue(result.clientConfig);
            assert.equal(config.healQuietWindowSeconds, 450);
            assert.equal(clientConfigFromEnv(await outputValue(result.apiEnvironment)).healQuietWindowSeconds, 450);
            const dynamodb = new DynamoDBClient({ region: "us-east-1", endpoint: "http://127.0.0.1:9" });
            assert.throws(
                () => new HybridCounterClient({ ...config, dynamodb, deadlineMs: 30_000 }),
                (e: unknown) =>
                    e instanceof ConfigurationError &&
                    e.problems.length === 1 &&
                    e.problems[0] ===
                        "[deadlineMs] 30000 needs [healQuietWindowSeconds] of at least 451 s (deadline + 300 s request lifetime + twice the 60 s clock skew); the counter's is 450 s",
            );
            assert.equal(new HybridCounterClient({ ...config, dynamodb, deadlineMs: 29_999 }).mode, "utilization");
            // The period is the ledger's, not the settler's: it travels without one.
            assert.equal((await outputValue(without.clientConfig)).healQuietWindowSeconds, 600);
            dynamodb.destroy();
        });

        it("grants an API's role the client's policy, given the Role or its name", async () => {
            // Act
            const { resources } = await runProgramWithResult(() => {
                const counter = new HybridCounterComponent("orders", {});
                const role = new aws.iam.Role("api-role", { name: "api-role", assumeRolePolicy: "{}" });
                counter.grantApiAccess("api-counter", role);
                counter.grantApiAccess("worker-counter", "worker-role");
                return counter;
            });

            // Assess
            const grants = resourcesOfType(resources, "aws:iam/rolePolicy:RolePolicy").filter((r) => r.name.endsWith("-counter"));
            assert.deepEqual(grants.map((g) => [g.name, g.inputs.role, g.parent]).sort(), [
                ["api-counter", "api-role", findResource(resources, "hybrid-counter:index:HybridCounterComponent", "orders").urn],
                ["worker-counter", "worker-role", findResource(resources, "hybrid-counter:index:HybridCounterComponent", "orders").urn],
            ]);
            for (const grant of grants) {
                assert.deepEqual(
                    (JSON.parse(grant.inputs.policy as string) as { Statement: Array<{ Sid: string }> }).Statement.map((s) => s.Sid),
                    ["WriteResourceItems", "ReadAndWriteCounters"],
                );
            }
        });

        it("parents every child to the component", () => {
            // Prepare
            const root = get("hybrid-counter:index:HybridCounterComponent", "orders");

            // Assess
            assert.equal(root.urn, "urn:pulumi:test::hybrid-counter-test::hybrid-counter:index:HybridCounterComponent::orders");
            for (const child of resources.filter((r) => r !== root)) {
                assert.equal(child.parent, root.urn, child.name);
            }
        });

        it("creates the table with string keys, NEW_AND_OLD_IMAGES stream, on-demand billing, PITR and SSE", () => {
            // Assess
            assert.deepEqual(get("aws:dynamodb/table:Table", "orders-table").inputs, {
                attributes: [
                    { name: "pk", type: "S" },
                    { name: "sk", type: "S" },
                ],
                hashKey: "pk",
                rangeKey: "sk",
                billingMode: "PAY_PER_REQUEST",
                streamEnabled: true,
                streamViewType: "NEW_AND_OLD_IMAGES",
                pointInTimeRecovery: { enabled: true },
                serverSideEncryption: { enabled: true },
                deletionProtectionEnabled: false,
            });
        });

        it("maps the stream one batch per shard at a time, with a tumbling window, bounded retries, bisection, partial failures, filters and the first DLQ", () => {
            // Assess: the tumbling window makes every event name its stream shard, which the consumer's marks are keyed by.
            assert.deepEqual(get("aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs, {
                functionName: `arn:aws:lambda:us-east-1:${ACCOUNT}:function:orders-consumer`,
                eventSourceArn: STREAM_ARN,
                startingPosition: "TRIM_HORIZON",
                batchSize: 100,
                maximumBatchingWindowInSeconds: 0,
                parallelizationFactor: 1,
                tumblingWindowInSeconds: 900,
                bisectBatchOnFunctionError: true,
                maximumRetryAttempts: 10,
                maximumRecordAgeInSeconds: 21_600,
                functionResponseTypes: ["ReportBatchItemFailures"],
                destinationConfig: { onFailure: { destinationArn: FIRST_DLQ_ARN } },
            });
        });

        it("maps the first DLQ to the redrive one message at a time with partial failures", () => {
            // Assess
            assert.deepEqual(get("aws:lambda/eventSourceMapping:EventSourceMapping", "orders-redrive-mapping").inputs, {
                functionName: `arn:aws:lambda:us-east-1:${ACCOUNT}:function:orders-redrive`,
                eventSourceArn: FIRST_DLQ_ARN,
                batchSize: 1,
                functionResponseTypes: ["ReportBatchItemFailures"],
            });
        });

        it("creates both queues encrypted with 14-day retention, the first redriving to the fatal one", () => {
            // Assess
            assert.deepEqual(get("aws:sqs/queue:Queue", "orders-fatal-dlq").inputs, {
                messageRetentionSeconds: 1_209_600,
                sqsManagedSseEnabled: true,
            });
            assert.deepEqual(get("aws:sqs/queue:Queue", "orders-first-dlq").inputs, {
                messageRetentionSeconds: 1_209_600,
                visibilityTimeoutSeconds: 720,
                redrivePolicy: JSON.stringify({ deadLetterTargetArn: FATAL_DLQ_ARN, maxReceiveCount: 5 }),
                sqsManagedSseEnabled: true,
            });
        });

        it("denies non-TLS access to both queues", () => {
            // Assess
            const first = get("aws:sqs/queuePolicy:QueuePolicy", "orders-first-dlq-policy");
            const fatal = get("aws:sqs/queuePolicy:QueuePolicy", "orders-fatal-dlq-policy");
            assert.equal(first.inputs.queueUrl, FIRST_DLQ_URL);
            assert.deepEqual(JSON.parse(first.inputs.policy), TLS_ONLY(FIRST_DLQ_ARN));
            assert.equal(fatal.inputs.queueUrl, FATAL_DLQ_URL);
            assert.deepEqual(JSON.parse(fatal.inputs.policy), TLS_ONLY(FATAL_DLQ_ARN));
        });

        it("lets only Lambda assume the two roles", () => {
            // Assess
            for (const role of ["orders-consumer-role", "orders-redrive-role"]) {
                assert.deepEqual(JSON.parse(get("aws:iam/role:Role", role).inputs.assumeRolePolicy), {
                    Version: "2012-10-17",
                    Statement: [
                        {
                            Sid: "LambdaAssumeRole",
                            Effect: "Allow",
                            Principal: { Service: "lambda.amazonaws.com" },
                            Action: ["sts:AssumeRole"],
                        },
                    ],
                });
            }
        });

        it("grants the consumer exactly its stream, table, queues and log group", () => {
            // Prepare
            const policy = get("aws:iam/rolePolicy:RolePolicy", "orders-consumer-policy");

            // Assess
            assert.equal(policy.inputs.role, "orders-consumer-role");
            assert.deepEqual(JSON.parse(policy.inputs.policy), { Version: "2012-10-17", Statement: consumerStatements() });
        });

        it("grants the redrive exactly its stream, table, queues and log group", () => {
            // Prepare
            const policy = get("aws:iam/rolePolicy:RolePolicy", "orders-redrive-policy");

            // Assess
            assert.equal(policy.inputs.role, "orders-redrive-role");
            assert.deepEqual(JSON.parse(policy.inputs.policy), { Version: "2012-10-17", Statement: redriveStatements() });
        });

        it("allows no wildcard action and no wildcard resource except ListStreams", () => {
            // Prepare
            const documents = [
                ...resourcesOfType(resources, "aws:iam/rolePolicy:RolePolicy").map(policyOf),
                ...resourcesOfType(resources, "aws:iam/role:Role").map((r) => JSON.parse(r.inputs.assumeRolePolicy as string)),
                ...resourcesOfType(resources, "aws:sqs/queuePolicy:QueuePolicy").map(policyOf),
            ];
            const allows = documents.flatMap((d) => d.Statement).filter((s: { Effect: string }) => s.Effect === "Allow");

            // Assess: three roles' trust statements, and the consumer's 7, the redrive's 6 and the settler's 4 grants.
            assert.equal(documents.length, 8);
            assert.equal(allows.length, 20);
            for (const statement of allows) {
                for (const action of statement.Action as string[]) {
                    assert.equal(action.includes("*"), false, `${statement.Sid}: ${action}`);
                }
            }
            assert.deepEqual(
                allows.filter((s: { Resource?: unknown }) => s.Resource === "*").map((s: { Action: string[] }) => s.Action),
                [["dynamodb:ListStreams"]],
            );
        });

        it("deploys both bundles on arm64 nodejs22.x with their log groups and the handler environment (mode, period, thresholds, retention)", async () => {
            // Prepare
            const expected = (role: string, memorySize: number, timeout: number) => ({
                handler: "index.handler",
                runtime: "nodejs22.x",
                architectures: ["arm64"],
                environment: { variables: HANDLER_ENVIRONMENT },
                loggingConfig: { logFormat: "Text", logGroup: `orders-${role}-logs` },
                tracingConfig: { mode: "PassThrough" },
                role: `arn:aws:iam::${ACCOUNT}:role/orders-${role}-role`,
                memorySize,
                timeout,
            });

            const codeOf = async (name: string) => {
                const { code } = get("aws:lambda/function:Function", name).inputs;
                assert.ok(code instanceof pulumi.asset.AssetArchive);
                const assets = (await code.assets) as Record<string, pulumi.asset.FileAsset>;
                assert.deepEqual(Object.keys(assets), ["index.js"]);
                assert.ok(assets["index.js"] instanceof pulumi.asset.FileAsset);
                return await assets["index.js"].path;
            };
            const withoutCode = (name: string) => {
                const { code: _code, ...rest } = get("aws:lambda/function:Function", name).inputs;
                return rest;
            };

            // Assess
            assert.deepEqual(withoutCode("orders-consumer"), expected("consumer", 256, 60));
            assert.deepEqual(withoutCode("orders-redrive"), expected("redrive", 256, 120));
            assert.equal(await codeOf("orders-consumer"), HybridCounterComponent.bundlePaths.streamConsumer);
            assert.equal(await codeOf("orders-redrive"), HybridCounterComponent.bundlePaths.redrive);
        });

        it("orders each function after its log group and policy, and each mapping after its policy", () => {
            // Prepare
            const urn = (type: string, name: string) => get(type, name).urn;
            const deps = (type: string, name: string) => get(type, name).dependencies;

            // Assess
            for (const role of ["consumer", "redrive"]) {
                const fn = deps("aws:lambda/function:Function", `orders-${role}`);
                assert.ok(fn.includes(urn("aws:cloudwatch/logGroup:LogGroup", `orders-${role}-logs`)), role);
                assert.ok(fn.includes(urn("aws:iam/rolePolicy:RolePolicy", `orders-${role}-policy`)), role);
            }
            assert.ok(
                deps("aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").includes(
                    urn("aws:iam/rolePolicy:RolePolicy", "orders-consumer-policy"),
                ),
            );
            assert.ok(
                deps("aws:lambda/eventSourceMapping:EventSourceMapping", "orders-redrive-mapping").includes(
                    urn("aws:iam/rolePolicy:RolePolicy", "orders-redrive-policy"),
                ),
            );
        });

        it("keeps both log groups for 30 days", () => {
            // Assess
            assert.deepEqual(get("aws:cloudwatch/logGroup:LogGroup", "orders-consumer-logs").inputs, { retentionInDays: 30 });
            assert.deepEqual(get("aws:cloudwatch/logGroup:LogGroup", "orders-redrive-logs").inputs, { retentionInDays: 30 });
        });

        it("alarms on lag, errors, throttles and both DLQs with the default thresholds and no actions", () => {
            // Prepare
            const alarm = (name: string) => {
                const { alarmDescription, ...inputs } = get("aws:cloudwatch/metricAlarm:MetricAlarm", name).inputs;
                assert.equal(typeof alarmDescription, "string");
                return inputs;
            };
            const common = { period: 300, evaluationPeriods: 1, treatMissingData: "notBreaching", alarmActions: [], okActions: [] };

            // Assess
            assert.deepEqual(alarm("orders-consumer-iterator-age"), {
                ...common,
                namespace: "AWS/Lambda",
                metricName: "IteratorAge",
                dimensions: { FunctionName: "orders-consumer" },
                statistic: "Maximum",
                comparisonOperator: "GreaterThanThreshold",
                threshold: 900_000,
            });
            assert.deepEqual(alarm("orders-consumer-errors"), {
                ...common,
                namespace: "AWS/Lambda",
                metricName: "Errors",
                dimensions: { FunctionName: "orders-consumer" },
                statistic: "Sum",
                comparisonOperator: "GreaterThanOrEqualToThreshold",
                threshold: 1,
            });
            assert.deepEqual(alarm("orders-consumer-throttles"), {
                ...common,
                namespace: "AWS/Lambda",
                metricName: "Throttles",
                dimensions: { FunctionName: "orders-consumer" },
                statistic: "Sum",
                comparisonOperator: "GreaterThanOrEqualToThreshold",
                threshold: 1,
            });
            assert.deepEqual(alarm("orders-first-dlq-depth"), {
                ...common,
                namespace: "AWS/SQS",
                metricName: "ApproximateNumberOfMessagesVisible",
                dimensions: { QueueName: "orders-first-dlq" },
                statistic: "Maximum",
                comparisonOperator: "GreaterThanThreshold",
                threshold: 0,
            });
            assert.deepEqual(alarm("orders-fatal-dlq-depth"), {
                ...common,
                namespace: "AWS/SQS",
                metricName: "ApproximateNumberOfMessagesVisible",
                dimensions: { QueueName: "orders-fatal-dlq" },
                statistic: "Maximum",
                comparisonOperator: "GreaterThanThreshold",
                threshold: 0,
            });
            assert.deepEqual(alarm("orders-redrive-errors"), {
                ...common,
                namespace: "AWS/Lambda",
                metricName: "Errors",
                dimensions: { FunctionName: "orders-redrive" },
                statistic: "Sum",
                comparisonOperator: "GreaterThanOrEqualToThreshold",
                threshold: 1,
            });
        });

        it("builds a dashboard of the pipeline in the table's region", () => {
            // Prepare
            const dashboard = get("aws:cloudwatch/dashboard:Dashboard", "orders-dashboard");
            const body = JSON.parse(dashboard.inputs.dashboardBody as string) as {
                widgets: Array<{ type: string; properties: { title?: string; region?: string; metrics?: unknown[][] } }>;
            };
            const metrics = body.widgets.flatMap((w) => w.properties.metrics ?? []).map((m) => m.slice(0, 4).join(" "));

            // Assess
            assert.equal(dashboard.inputs.dashboardName, "hybrid-counter-hybrid-counter-test-test-orders");
            assert.deepEqual(
                body.widgets.map((w) => w.properties.title ?? w.type),
                [
                    "Consumer lag (IteratorAge, ms)",
                    "Consumer invocations",
                    "Consumer duration (ms)",
                    "Dead-letter queues (visible messages)",
                    "Redrive invocations",
                    "Table writes",
                    "Records counted",
                    "Duplicates skipped",
                    "Keys listed for a heal",
                    "Poison records and expired ranges (to the fatal DLQ)",
                    "Ranges Lambda gave up on, applied",
                    "Batch item failures",
                    "text",
                    "Settler runs",
                    "Heals",
                    "Audit and tombstones",
                ],
            );
            assert.deepEqual(
                new Set(body.widgets.filter((w) => w.type === "metric").map((w) => w.properties.region)),
                new Set(["us-east-1"]),
            );
            assert.deepEqual(metrics, [
                "AWS/Lambda IteratorAge FunctionName orders-consumer",
                "AWS/Lambda Invocations FunctionName orders-consumer",
                "AWS/Lambda Errors FunctionName orders-consumer",
                "AWS/Lambda Throttles FunctionName orders-consumer",
                "AWS/Lambda Duration FunctionName orders-consumer",
                "AWS/SQS ApproximateNumberOfMessagesVisible QueueName orders-first-dlq",
                "AWS/SQS ApproximateNumberOfMessagesVisible QueueName orders-fatal-dlq",
                "AWS/Lambda Invocations FunctionName orders-redrive",
                "AWS/Lambda Errors FunctionName orders-redrive",
                "AWS/DynamoDB ConsumedWriteCapacityUnits TableName orders-table",
                "AWS/DynamoDB WriteThrottleEvents TableName orders-table",
                "AWS/DynamoDB ConsumedWriteCapacityUnits TableName orders-counters",
                "AWS/DynamoDB ConditionalCheckFailedRequests TableName orders-counters",
                "HybridCounter RecordsCounted service hybrid-counter-consumer",
                "HybridCounter RecordsCounted service hybrid-counter-redrive",
                "HybridCounter DuplicatesSkipped service hybrid-counter-consumer",
                "HybridCounter DuplicatesSkipped service hybrid-counter-redrive",
                "HybridCounter KeysMarkedDue service hybrid-counter-consumer",
                "HybridCounter KeysMarkedDue service hybrid-counter-redrive",
                "HybridCounter PoisonRecords service hybrid-counter-consumer",
                "HybridCounter PoisonRecords service hybrid-counter-redrive",
                "HybridCounter RangesExpired service hybrid-counter-consumer",
                "HybridCounter RangesExpired service hybrid-counter-redrive",
                "HybridCounter RangesRedriven service hybrid-counter-consumer",
                "HybridCounter RangesRedriven service hybrid-counter-redrive",
                "HybridCounter BatchItemFailures service hybrid-counter-consumer",
                "HybridCounter BatchItemFailures service hybrid-counter-redrive",
                "AWS/Lambda Invocations FunctionName orders-settler",
                "AWS/Lambda Errors FunctionName orders-settler",
                "HybridCounter HealFailures service hybrid-counter-settler",
                "HybridCounter KeysHealed service hybrid-counter-settler",
                "HybridCounter KeysCorrected service hybrid-counter-settler",
                "HybridCounter HealDrift service hybrid-counter-settler",
                "HybridCounter HealsRaced service hybrid-counter-settler",
                "HybridCounter KeysAudited service hybrid-counter-settler",
                "HybridCounter KeysAuditHealed service hybrid-counter-settler",
                "HybridCounter TombstonesRemoved service hybrid-counter-settler",
            ]);
            // Every metric the consumer and the redrive emit (METRIC_NAMES), and every one the settler emits
            // (runtime/lambda/settler.ts settlerMetrics; that module reads its environment when loaded), has its line.
            const emitted = metrics.filter((m) => m.startsWith("HybridCounter ")).map((m) => m.split(" ")[1]);
            assert.deepEqual(new Set(emitted), new Set([...METRIC_NAMES, ...SETTLER_METRICS]));
        });

        it("exposes every output, including the client configuration", async () => {
            // Act
            const outputs = {
                tableName: await outputValue(component.tableName),
                tableArn: await outputValue(component.tableArn),
                tableStreamArn: await outputValue(component.tableStreamArn),
                consumerFunctionName: await outputValue(component.consumerFunctionName),
                consumerFunctionArn: await outputValue(component.consumerFunctionArn),
                redriveFunctionName: await outputValue(component.redriveFunctionName),
                redriveFunctionArn: await outputValue(component.redriveFunctionArn),
                firstDlqUrl: await outputValue(component.firstDlqUrl),
                firstDlqArn: await outputValue(component.firstDlqArn),
                fatalDlqUrl: await outputValue(component.fatalDlqUrl),
                fatalDlqArn: await outputValue(component.fatalDlqArn),
                alarmArns: await outputValue(component.alarmArns),
                alarmTopicArn: await outputValue(component.alarmTopicArn),
                thresholdTopicArn: await outputValue(component.thresholdTopicArn),
                dashboardName: await outputValue(component.dashboardName),
                clientConfig: await outputValue(component.clientConfig),
                countersTableName: await outputValue(component.countersTableName),
                countersTableArn: await outputValue(component.countersTableArn),
                thresholds: await outputValue(component.thresholds),
                usageRetentionDays: await outputValue(component.usageRetentionDays),
            };

            // Assess
            const alarm = (n: string) => `arn:aws:cloudwatch:us-east-1:${ACCOUNT}:alarm:orders-${n}`;
            assert.deepEqual(outputs, {
                tableName: "orders-table",
                tableArn: TABLE_ARN,
                tableStreamArn: STREAM_ARN,
                consumerFunctionName: "orders-consumer",
                consumerFunctionArn: `arn:aws:lambda:us-east-1:${ACCOUNT}:function:orders-consumer`,
                redriveFunctionName: "orders-redrive",
                redriveFunctionArn: `arn:aws:lambda:us-east-1:${ACCOUNT}:function:orders-redrive`,
                firstDlqUrl: FIRST_DLQ_URL,
                firstDlqArn: FIRST_DLQ_ARN,
                fatalDlqUrl: FATAL_DLQ_URL,
                fatalDlqArn: FATAL_DLQ_ARN,
                alarmArns: {
                    consumerIteratorAge: alarm("consumer-iterator-age"),
                    consumerErrors: alarm("consumer-errors"),
                    consumerThrottles: alarm("consumer-throttles"),
                    firstDlqDepth: alarm("first-dlq-depth"),
                    firstDlqAge: alarm("first-dlq-age"),
                    fatalDlqDepth: alarm("fatal-dlq-depth"),
                    redriveErrors: alarm("redrive-errors"),
                },
                alarmTopicArn: undefined,
                thresholdTopicArn: undefined,
                dashboardName: "hybrid-counter-hybrid-counter-test-test-orders",
                clientConfig: {
                    tableName: "orders-table",
                    countersTableName: "orders-counters",
                    partitionKey: "pk",
                    sortKey: "sk",
                    deletedAttribute: "deleted",
                    tokenAttribute: "counter_token",
                    counterPrefix: "#counter#",
                    countAttribute: "count",
                    countedItems: "client",
                    counterMode: "utilization",
                    healQuietWindowSeconds: 600,
                },
                countersTableName: "orders-counters",
                countersTableArn: COUNTERS_TABLE_ARN,
                thresholds: [0.8, 1],
                usageRetentionDays: 90,
            });
        });
    });

    it("exposes the absolute bundle paths as plain strings", () => {
        // Assess
        assert.match(HybridCounterComponent.bundlePaths.streamConsumer, /^\/.*\/dist\/bundles\/stream-consumer\/index\.js$/);
        assert.match(HybridCounterComponent.bundlePaths.redrive, /^\/.*\/dist\/bundles\/redrive\/index\.js$/);
    });

    it("creates an SNS topic on request and sends every alarm's ALARM and OK there", async () => {
        // Act
        const { resources, result } = await run({ createAlarmTopic: true });

        // Assess
        const topicArn = `arn:aws:sns:us-east-1:${ACCOUNT}:orders-alarm-topic`;
        const topic = findResource(resources, "aws:sns/topic:Topic", "orders-alarm-topic");
        assert.deepEqual(topic.inputs, { kmsMasterKeyId: "alias/aws/sns" });
        const alarms = resourcesOfType(resources, "aws:cloudwatch/metricAlarm:MetricAlarm");
        assert.equal(alarms.length, 8);
        for (const alarm of alarms) {
            assert.deepEqual(alarm.inputs.alarmActions, [topicArn], alarm.name);
            assert.deepEqual(alarm.inputs.okActions, [topicArn], alarm.name);
        }
        assert.equal(resources.length, 34);
        assert.equal(await outputValue(result.alarmTopicArn), topicArn);
    });

    it("sends alarms to a topic the user passes, creating no topic", async () => {
        // Prepare
        const topicArn = `arn:aws:sns:us-east-1:${ACCOUNT}:ops`;

        // Act
        const { resources, result } = await run({ alarmTopicArn: topicArn });

        // Assess
        assert.deepEqual(resourcesOfType(resources, "aws:sns/topic:Topic"), []);
        for (const alarm of resourcesOfType(resources, "aws:cloudwatch/metricAlarm:MetricAlarm")) {
            assert.deepEqual(alarm.inputs.alarmActions, [topicArn], alarm.name);
        }
        assert.equal(await outputValue(result.alarmTopicArn), topicArn);
    });

    it("creates only the alarms not disabled, with the thresholds given", async () => {
        // Act
        const { resources, result } = await run({
            disabledAlarms: ["consumerThrottles", "redriveErrors"],
            iteratorAgeAlarmThresholdMs: 60_000,
            consumerErrorsAlarmThreshold: 3,
            firstDlqAlarmThreshold: 2,
            fatalDlqAlarmThreshold: 4,
            firstDlqAgeAlarmThresholdSeconds: 7_200,
        });

        // Assess
        const alarms = resourcesOfType(resources, "aws:cloudwatch/metricAlarm:MetricAlarm");
        assert.deepEqual(alarms.map((a) => [a.name, a.inputs.threshold]).sort(), [
            ["orders-consumer-errors", 3],
            ["orders-consumer-iterator-age", 60_000],
            ["orders-fatal-dlq-depth", 4],
            ["orders-first-dlq-age", 7_200],
            ["orders-first-dlq-depth", 2],
            ["orders-settler-errors", 1],
        ]);
        assert.deepEqual(Object.keys(await outputValue(result.alarmArns)), [
            "consumerIteratorAge",
            "consumerErrors",
            "firstDlqDepth",
            "firstDlqAge",
            "fatalDlqDepth",
        ]);
    });

    it("adds X-Ray to both functions and roles only when tracing is on", async () => {
        // Act
        const { resources } = await run({ tracing: true });

        // Assess
        const xray = { Sid: "WriteTraces", Effect: "Allow", Action: ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], Resource: "*" };
        assert.deepEqual(
            policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-consumer-policy")).Statement,
            consumerStatements([xray]),
        );
        assert.deepEqual(
            policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-redrive-policy")).Statement,
            redriveStatements([xray]),
        );
        for (const fn of resourcesOfType(resources, "aws:lambda/function:Function")) {
            assert.deepEqual(fn.inputs.tracingConfig, { mode: "Active" }, fn.name);
        }
    });

    it("encrypts both queues with a customer key and lets both functions use it", async () => {
        // Prepare
        const key = `arn:aws:kms:us-east-1:${ACCOUNT}:key/queue-key`;

        // Act
        const { resources } = await run({ queueKmsKeyArn: key });

        // Assess
        for (const name of ["orders-first-dlq", "orders-fatal-dlq"]) {
            const queue = findResource(resources, "aws:sqs/queue:Queue", name);
            assert.equal(queue.inputs.kmsMasterKeyId, key);
            assert.equal(queue.inputs.sqsManagedSseEnabled, undefined);
        }
        const kms = { Sid: "UseQueueKey", Effect: "Allow", Action: ["kms:GenerateDataKey", "kms:Decrypt"], Resource: key };
        assert.deepEqual(
            policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-consumer-policy")).Statement,
            consumerStatements([kms]),
        );
        assert.deepEqual(
            policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-redrive-policy")).Statement,
            redriveStatements([kms]),
        );
    });

    it("creates a provisioned, KMS-encrypted, deletion-protected, named table in a custom layout", async () => {
        // Act
        const { resources } = await run({
            tableName: "orders-counter",
            billingMode: "PROVISIONED",
            readCapacity: 5,
            writeCapacity: 7,
            tableKmsKeyArn: `arn:aws:kms:us-east-1:${ACCOUNT}:key/table-key`,
            deletionProtection: true,
            partitionKey: "PK",
            sortKey: "SK",
            deletedAttribute: "gone",
            countedItems: "sortKeyPrefix",
            countedSortKeyPrefix: "ORDER#",
        });

        // Assess
        assert.deepEqual(findResource(resources, "aws:dynamodb/table:Table", "orders-table").inputs, {
            name: "orders-counter",
            attributes: [
                { name: "PK", type: "S" },
                { name: "SK", type: "S" },
            ],
            hashKey: "PK",
            rangeKey: "SK",
            billingMode: "PROVISIONED",
            readCapacity: 5,
            writeCapacity: 7,
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
            pointInTimeRecovery: { enabled: true },
            serverSideEncryption: { enabled: true, kmsKeyArn: `arn:aws:kms:us-east-1:${ACCOUNT}:key/table-key` },
            deletionProtectionEnabled: true,
        });
        const mapping = findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping");
        // No filter: the consumer's frontier needs every record of a shard in its batches.
        assert.equal(mapping.inputs.filterCriteria, undefined);
        assert.deepEqual(findResource(resources, "aws:dynamodb/table:Table", "orders-counters").inputs, {
            attributes: [
                { name: "PK", type: "S" },
                { name: "SK", type: "S" },
                { name: "hc_heal", type: "S" },
                { name: "hc_due", type: "N" },
            ],
            hashKey: "PK",
            rangeKey: "SK",
            globalSecondaryIndexes: [{ name: "heal-index", hashKey: "hc_heal", rangeKey: "hc_due", projectionType: "KEYS_ONLY" }],
            billingMode: "PAY_PER_REQUEST",
            pointInTimeRecovery: { enabled: true },
            serverSideEncryption: { enabled: true, kmsKeyArn: `arn:aws:kms:us-east-1:${ACCOUNT}:key/table-key` },
            ttl: { attributeName: "hc_expires", enabled: true },
            deletionProtectionEnabled: true,
        });
        const variables = findResource(resources, "aws:lambda/function:Function", "orders-consumer").inputs.environment.variables;
        assert.deepEqual(
            [variables.HYBRID_COUNTER_COUNTED_ITEMS, variables.HYBRID_COUNTER_COUNTED_SORT_KEY_PREFIX],
            ["sortKeyPrefix", "ORDER#"],
        );
    });

    it("keeps the counter items in the user's table in the same-table placement, giving it the heal index and TTL on hc_expires", async () => {
        // Act
        const { resources, result } = await run({ counterPlacement: "same-table" });

        // Assess
        assert.deepEqual(
            resourcesOfType(resources, "aws:dynamodb/table:Table").map((t) => t.name),
            ["orders-table"],
        );
        assert.deepEqual(findResource(resources, "aws:dynamodb/table:Table", "orders-table").inputs, {
            attributes: [
                { name: "pk", type: "S" },
                { name: "sk", type: "S" },
                { name: "hc_heal", type: "S" },
                { name: "hc_due", type: "N" },
            ],
            hashKey: "pk",
            rangeKey: "sk",
            globalSecondaryIndexes: [{ name: "heal-index", hashKey: "hc_heal", rangeKey: "hc_due", projectionType: "KEYS_ONLY" }],
            billingMode: "PAY_PER_REQUEST",
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
            pointInTimeRecovery: { enabled: true },
            serverSideEncryption: { enabled: true },
            ttl: { attributeName: "hc_expires", enabled: true },
            deletionProtectionEnabled: false,
        });
        assert.equal(resources.length, 32);
        assert.equal(await outputValue(result.countersTableName), "orders-table");
        const statements = policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-consumer-policy")).Statement;
        assert.deepEqual(
            statements.filter((st) => st.Sid === "CountInCountersTable" || st.Sid === "FlagAndRemoveItems").map((st) => st.Resource),
            [TABLE_ARN, TABLE_ARN],
        );
    });

    it("gives the same-table heal index the created table's provisioned capacity", async () => {
        // Act
        const { resources } = await run({ counterPlacement: "same-table", billingMode: "PROVISIONED", readCapacity: 5, writeCapacity: 7 });

        // Assess
        assert.deepEqual(findResource(resources, "aws:dynamodb/table:Table", "orders-table").inputs.globalSecondaryIndexes, [
            { name: "heal-index", hashKey: "hc_heal", rangeKey: "hc_due", projectionType: "KEYS_ONLY", readCapacity: 5, writeCapacity: 7 },
        ]);
    });

    it("passes every mapping and function setting through, keeping one batch per shard at a time and the tumbling window", async () => {
        // Act
        const { resources } = await run({
            batchSize: 500,
            maximumBatchingWindowInSeconds: 5,
            parallelizationFactor: 1,
            maximumRetryAttempts: 3,
            maximumRecordAgeInSeconds: 3600,
            consumerMemorySize: 512,
            consumerTimeout: 30,
            consumerReservedConcurrency: 20,
            redriveMemorySize: 1024,
            redriveTimeout: 300,
            redriveMaxReceiveCount: 9,
            redriveReservedConcurrency: pulumi.output(2),
            architecture: "x86_64",
            lambdaRuntime: "nodejs24.x",
            logRetentionInDays: 7,
            iteratorAgeAlarmThresholdMs: 60_000,
            dashboardName: "orders_board",
        });

        // Assess
        const mapping = findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs;
        assert.deepEqual(
            [
                mapping.batchSize,
                mapping.maximumBatchingWindowInSeconds,
                mapping.parallelizationFactor,
                mapping.tumblingWindowInSeconds,
                mapping.maximumRetryAttempts,
                mapping.maximumRecordAgeInSeconds,
            ],
            [500, 5, 1, 900, 3, 3600],
        );
        const consumer = findResource(resources, "aws:lambda/function:Function", "orders-consumer").inputs;
        const redrive = findResource(resources, "aws:lambda/function:Function", "orders-redrive").inputs;
        assert.deepEqual(
            [consumer.memorySize, consumer.timeout, consumer.reservedConcurrentExecutions, consumer.architectures, consumer.runtime],
            [512, 30, 20, ["x86_64"], "nodejs24.x"],
        );
        assert.deepEqual(
            [redrive.memorySize, redrive.timeout, redrive.reservedConcurrentExecutions, redrive.architectures],
            [1024, 300, 2, ["x86_64"]],
        );
        const firstDlq = findResource(resources, "aws:sqs/queue:Queue", "orders-first-dlq").inputs;
        assert.equal(firstDlq.visibilityTimeoutSeconds, 1800);
        assert.equal(firstDlq.redrivePolicy, JSON.stringify({ deadLetterTargetArn: FATAL_DLQ_ARN, maxReceiveCount: 9 }));
        for (const group of resourcesOfType(resources, "aws:cloudwatch/logGroup:LogGroup")) {
            assert.equal(group.inputs.retentionInDays, 7, group.name);
        }
        assert.equal(
            findResource(resources, "aws:cloudwatch/dashboard:Dashboard", "orders-dashboard").inputs.dashboardName,
            "orders_board",
        );
    });

    it("tags every child that takes tags", async () => {
        // Prepare
        const tags = { team: "payments", env: "prod" };
        const untaggable = new Set([
            "aws:iam/rolePolicy:RolePolicy",
            "aws:sqs/queuePolicy:QueuePolicy",
            "aws:cloudwatch/dashboard:Dashboard",
            "aws:lambda/permission:Permission",
            "aws:cloudwatch/eventTarget:EventTarget",
        ]);

        // Act
        const { resources } = await run({ tags, createAlarmTopic: true });

        // Assess
        const children = resources.filter((r) => r.custom);
        assert.equal(children.length, 33);
        for (const child of children) {
            assert.deepEqual(child.inputs.tags, untaggable.has(child.type) ? undefined : tags, `${child.type} ${child.name}`);
        }
    });

    it("uses an explicit provider for every child", async () => {
        // Act
        const { resources } = await runProgramWithResult(() => {
            const provider = new aws.Provider("eu", { region: "eu-west-1" });
            return new HybridCounterComponent("orders", {}, { providers: { aws: provider } });
        });

        // Assess
        const provider = findResource(resources, "pulumi:providers:aws", "eu");
        assert.equal(provider.inputs.region, "eu-west-1");
        const children = resources.filter((r) => r.custom && r.type.startsWith("aws:"));
        assert.equal(children.length, 32);
        for (const child of children) {
            assert.equal(child.provider, `${provider.urn}::eu-provider-id`, child.name);
        }
    });

    it("accepts the usual ComponentResourceOptions and honours dependsOn", async () => {
        // Act
        const { resources } = await runProgramWithResult(() => {
            const first = new aws.sqs.Queue("before");
            return new HybridCounterComponent("orders", {}, { dependsOn: [first], protect: true, aliases: [{ name: "old-orders" }] });
        });

        // Assess
        const before = findResource(resources, "aws:sqs/queue:Queue", "before");
        const root = findResource(resources, "hybrid-counter:index:HybridCounterComponent", "orders");
        assert.ok(root.dependencies.includes(before.urn));
        assert.equal(resources.length, 34);
    });
});
