import * as assert from "node:assert/strict";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HybridCounterArgsError, HybridCounterComponent, type HybridCounterComponentArgs } from "../index";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { HybridCounterClient } from "../runtime/client/client";
import { clientConfigFromEnv, layoutWithDefaults } from "../runtime/shared/config";
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

function consumerStatements(extra: object[] = []) {
    return [
        {
            Sid: "ReadOwnStream",
            Effect: "Allow",
            Action: ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"],
            Resource: STREAM_ARN,
        },
        { Sid: "ListStreams", Effect: "Allow", Action: ["dynamodb:ListStreams"], Resource: "*" },
        {
            Sid: "CountInCountersTable",
            Effect: "Allow",
            Action: ["dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
            Resource: COUNTERS_TABLE_ARN,
        },
        { Sid: "RemoveSoftDeletedItems", Effect: "Allow", Action: ["dynamodb:DeleteItem"], Resource: TABLE_ARN },
        { Sid: "SendFailedBatchesToFirstDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: FIRST_DLQ_ARN },
        { Sid: "SendPoisonRecordsToFatalDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: FATAL_DLQ_ARN },
        {
            Sid: "WriteOwnLogs",
            Effect: "Allow",
            Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
            Resource: `${logGroupArn("consumer")}:*`,
        },
        ...extra,
    ];
}

function redriveStatements(extra: object[] = []) {
    return [
        {
            Sid: "ReadOwnStream",
            Effect: "Allow",
            Action: ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"],
            Resource: STREAM_ARN,
        },
        {
            Sid: "CountInCountersTable",
            Effect: "Allow",
            Action: ["dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
            Resource: COUNTERS_TABLE_ARN,
        },
        { Sid: "RemoveSoftDeletedItems", Effect: "Allow", Action: ["dynamodb:DeleteItem"], Resource: TABLE_ARN },
        {
            Sid: "ConsumeFirstDlq",
            Effect: "Allow",
            Action: ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
            Resource: FIRST_DLQ_ARN,
        },
        { Sid: "SendExpiredBatchesToFatalDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: FATAL_DLQ_ARN },
        {
            Sid: "WriteOwnLogs",
            Effect: "Allow",
            Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
            Resource: `${logGroupArn("redrive")}:*`,
        },
        ...extra,
    ];
}

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

        it("creates the counters table beside it: same string keys, on-demand, PITR, SSE, TTL on the tombstones, no stream", () => {
            // Assess
            assert.deepEqual(get("aws:dynamodb/table:Table", "orders-counters").inputs, {
                attributes: [
                    { name: "pk", type: "S" },
                    { name: "sk", type: "S" },
                    { name: "hc_heal", type: "S" },
                    { name: "hc_due_at", type: "N" },
                ],
                hashKey: "pk",
                rangeKey: "sk",
                globalSecondaryIndexes: [{ name: "heal-index", hashKey: "hc_heal", rangeKey: "hc_due_at", projectionType: "KEYS_ONLY" }],
                billingMode: "PAY_PER_REQUEST",
                pointInTimeRecovery: { enabled: true },
                serverSideEncryption: { enabled: true },
                ttl: { attributeName: "hc_expires_at", enabled: true },
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
                        Action: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"],
                        Resource: TABLE_ARN,
                    },
                    {
                        Sid: "ReadAndWriteCounters",
                        Effect: "Allow",
                        Action: ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query"],
                        Resource: COUNTERS_TABLE_ARN,
                    },
                ],
            });
            // The environment reads back as the clientConfig output describes it (the selection flat there).
            const fromOutput = await outputValue(component.clientConfig);
            assert.deepEqual(clientConfigFromEnv(await outputValue(component.apiEnvironment)), {
                ...layoutWithDefaults(fromOutput),
                tableName: fromOutput.tableName,
                countersTableName: fromOutput.countersTableName,
                healQuietWindowSeconds: fromOutput.healQuietWindowSeconds,
            });
        });

        it("gives clients the deployed quiet window, so a client whose deadline it does not cover is refused at construction", async () => {
            // Act
            const { result } = await runProgramWithResult(() => new HybridCounterComponent("orders", { healQuietWindowSeconds: 400 }));
            const { result: without } = await runProgramWithResult(() => new HybridCounterComponent("orders", { settlerEnabled: false }));

            // Assess
            const config = await outputValue(result.clientConfig);
            assert.equal(config.healQuietWindowSeconds, 400);
            assert.equal(clientConfigFromEnv(await outputValue(result.apiEnvironment)).healQuietWindowSeconds, 400);
            const dynamodb = new DynamoDBClient({ region: "us-east-1", endpoint: "http://127.0.0.1:9" });
            assert.throws(
                () => new HybridCounterClient({ ...config, dynamodb, deadlineMs: 40_000 }),
                (e: unknown) =>
                    e instanceof ConfigurationError && e.problems.length === 1 && e.problems[0]!.startsWith("[deadlineMs] must be below"),
            );
            new HybridCounterClient({ ...config, dynamodb, deadlineMs: 39_999 });
            // No settler, no heal: nothing for a deadline to cover.
            assert.equal("healQuietWindowSeconds" in (await outputValue(without.clientConfig)), false);
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

        it("maps the stream with bounded retries, bisection, partial failures, filters and the first DLQ", () => {
            // Assess
            assert.deepEqual(get("aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs, {
                functionName: `arn:aws:lambda:us-east-1:${ACCOUNT}:function:orders-consumer`,
                eventSourceArn: STREAM_ARN,
                startingPosition: "TRIM_HORIZON",
                batchSize: 100,
                maximumBatchingWindowInSeconds: 0,
                parallelizationFactor: 1,
                bisectBatchOnFunctionError: true,
                maximumRetryAttempts: 10,
                maximumRecordAgeInSeconds: 21_600,
                functionResponseTypes: ["ReportBatchItemFailures"],
                filterCriteria: {
                    filters: [
                        { pattern: '{"dynamodb":{"NewImage":{"counter_token":{"S":[{"exists":true}]}}}}' },
                        { pattern: '{"dynamodb":{"OldImage":{"counter_token":{"S":[{"exists":true}]}}}}' },
                    ],
                },
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

            // Assess
            assert.equal(documents.length, 8);
            assert.equal(allows.length, 21);
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

        it("deploys both bundles on arm64 nodejs22.x with their log groups and the handler environment", async () => {
            // Prepare
            const environment = {
                HYBRID_COUNTER_TABLE_NAME: "orders-table",
                HYBRID_COUNTER_COUNTERS_TABLE_NAME: "orders-counters",
                HYBRID_COUNTER_PARTITION_KEY: "pk",
                HYBRID_COUNTER_SORT_KEY: "sk",
                HYBRID_COUNTER_DELETED_ATTRIBUTE: "deleted",
                HYBRID_COUNTER_TOKEN_ATTRIBUTE: "counter_token",
                HYBRID_COUNTER_PREFIX: "#counter#",
                HYBRID_COUNTER_COUNT_ATTRIBUTE: "count",
                HYBRID_COUNTER_COUNTED_ITEMS: "client",
                HYBRID_COUNTER_FATAL_QUEUE_URL: FATAL_DLQ_URL,
                HYBRID_COUNTER_METRICS_NAMESPACE: "HybridCounter",
            };
            const expected = (role: string, memorySize: number, timeout: number) => ({
                handler: "index.handler",
                runtime: "nodejs22.x",
                architectures: ["arm64"],
                environment: { variables: environment },
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
                    "Table writes and conflicts",
                    "Records counted",
                    "Duplicates skipped",
                    "Transaction retries",
                    "Poison records (to the fatal DLQ)",
                    "Batches redriven",
                    "text",
                    "Settler runs",
                    "Heals",
                    "Settler cost",
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
                "AWS/DynamoDB TransactionConflict TableName orders-table",
                "AWS/DynamoDB WriteThrottleEvents TableName orders-table",
                "HybridCounter RecordsCounted service hybrid-counter-consumer",
                "HybridCounter RecordsCounted service hybrid-counter-redrive",
                "HybridCounter DuplicatesSkipped service hybrid-counter-consumer",
                "HybridCounter DuplicatesSkipped service hybrid-counter-redrive",
                "HybridCounter TransactionRetries service hybrid-counter-consumer",
                "HybridCounter TransactionRetries service hybrid-counter-redrive",
                "HybridCounter PoisonRecords service hybrid-counter-consumer",
                "HybridCounter PoisonRecords service hybrid-counter-redrive",
                "HybridCounter BatchesExpired service hybrid-counter-redrive",
                "HybridCounter BatchesRedriven service hybrid-counter-redrive",
                "AWS/Lambda Invocations FunctionName orders-settler",
                "AWS/Lambda Errors FunctionName orders-settler",
                "HybridCounter KeysHealed service hybrid-counter-settler",
                "HybridCounter KeysCorrected service hybrid-counter-settler",
                "HybridCounter HealDrift service hybrid-counter-settler",
                "HybridCounter SettlerReadUnits service hybrid-counter-settler",
                "HybridCounter SettlerWriteUnits service hybrid-counter-settler",
            ]);
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
                dashboardName: await outputValue(component.dashboardName),
                clientConfig: await outputValue(component.clientConfig),
                countersTableName: await outputValue(component.countersTableName),
                countersTableArn: await outputValue(component.countersTableArn),
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
                    healQuietWindowSeconds: 600,
                },
                countersTableName: "orders-counters",
                countersTableArn: COUNTERS_TABLE_ARN,
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
        assert.deepEqual(
            mapping.inputs.filterCriteria.filters.map((f: { pattern: string }) => f.pattern),
            ['{"dynamodb":{"Keys":{"SK":{"S":[{"prefix":"ORDER#"}]}}}}'],
        );
        assert.deepEqual(findResource(resources, "aws:dynamodb/table:Table", "orders-counters").inputs, {
            attributes: [
                { name: "PK", type: "S" },
                { name: "SK", type: "S" },
                { name: "hc_heal", type: "S" },
                { name: "hc_due_at", type: "N" },
            ],
            hashKey: "PK",
            rangeKey: "SK",
            globalSecondaryIndexes: [{ name: "heal-index", hashKey: "hc_heal", rangeKey: "hc_due_at", projectionType: "KEYS_ONLY" }],
            billingMode: "PAY_PER_REQUEST",
            pointInTimeRecovery: { enabled: true },
            serverSideEncryption: { enabled: true, kmsKeyArn: `arn:aws:kms:us-east-1:${ACCOUNT}:key/table-key` },
            ttl: { attributeName: "hc_expires_at", enabled: true },
            deletionProtectionEnabled: true,
        });
        const variables = findResource(resources, "aws:lambda/function:Function", "orders-consumer").inputs.environment.variables;
        assert.deepEqual(
            [variables.HYBRID_COUNTER_COUNTED_ITEMS, variables.HYBRID_COUNTER_COUNTED_SORT_KEY_PREFIX],
            ["sortKeyPrefix", "ORDER#"],
        );
    });

    it("keeps the counter items in the user's table in the same-table placement", async () => {
        // Act
        const { resources, result } = await run({ counterPlacement: "same-table" });

        // Assess
        assert.deepEqual(
            resourcesOfType(resources, "aws:dynamodb/table:Table").map((t) => t.name),
            ["orders-table"],
        );
        assert.equal(resources.length, 32);
        assert.equal(await outputValue(result.countersTableName), "orders-table");
        const statements = policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-consumer-policy")).Statement;
        assert.deepEqual(
            statements.filter((st) => st.Sid === "CountInCountersTable" || st.Sid === "RemoveSoftDeletedItems").map((st) => st.Resource),
            [TABLE_ARN, TABLE_ARN],
        );
    });

    it("passes every mapping and function setting through", async () => {
        // Act
        const { resources } = await run({
            batchSize: 500,
            maximumBatchingWindowInSeconds: 5,
            parallelizationFactor: 4,
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
                mapping.maximumRetryAttempts,
                mapping.maximumRecordAgeInSeconds,
            ],
            [500, 5, 4, 3, 3600],
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

    describe("attached to a table the program manages", () => {
        const tableArgs = (overrides: Partial<aws.dynamodb.TableArgs> = {}): aws.dynamodb.TableArgs => ({
            name: "app-table",
            hashKey: "pk",
            rangeKey: "sk",
            attributes: [
                { name: "pk", type: "S" },
                { name: "sk", type: "S" },
            ],
            billingMode: "PAY_PER_REQUEST",
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
            ...overrides,
        });

        /** What getTable (or Table.get) answers for `legacy-orders`: pk/sk string keys, its stream on, with `overrides`. */
        const legacyOrders = (overrides: Record<string, unknown> = {}): Record<string, unknown> => {
            const arn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/legacy-orders`;
            return {
                name: "legacy-orders",
                arn,
                hashKey: "pk",
                rangeKey: "sk",
                attributes: [
                    { name: "pk", type: "S" },
                    { name: "sk", type: "S" },
                ],
                streamEnabled: true,
                streamViewType: "NEW_AND_OLD_IMAGES",
                streamArn: `${arn}/stream/2020`,
                ...overrides,
            };
        };
        /** The refusal of a table with replicas in `regions` (components/regions/validation.ts). */
        const replicatedProblem = (regions: string): string =>
            `[table] must not have replicas (found ${regions}) unless [regions] says how regions count: it is a global table, whose ` +
            "stream in each region carries every region's writes, so a consumer per region would count each write once per region, " +
            "and two regions' updates of one counter item would lose one to last-writer-wins. Set [regions] in every region's " +
            "component; see docs/design/global-tables.md";
        /** ready()'s outcome, handled at once as a unit test would: "resolved", or the error it rejected with. */
        const outcomeOf = (component: HybridCounterComponent): Promise<unknown> =>
            component.ready().then(
                () => "resolved",
                (error: unknown) => error,
            );

        it("creates no user table, takes the table's keys, and points the mapping, roles and outputs at the user's table", async () => {
            // Act
            const { resources, result } = await runProgramWithResult(() => {
                const table = new aws.dynamodb.Table(
                    "app",
                    tableArgs({
                        hashKey: "tenantId",
                        rangeKey: "orderId",
                        attributes: [
                            { name: "tenantId", type: "S" },
                            { name: "orderId", type: "S" },
                        ],
                    }),
                );
                return new HybridCounterComponent("orders", { table });
            });

            // Assess
            const arn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/app-table`;
            const stream = `${arn}/stream/2024-01-01T00:00:00.000`;
            assert.deepEqual(
                resourcesOfType(resources, "aws:dynamodb/table:Table").map((t) => t.name),
                ["app", "orders-counters"],
            );
            const counters = findResource(resources, "aws:dynamodb/table:Table", "orders-counters").inputs;
            assert.deepEqual([counters.hashKey, counters.rangeKey], ["tenantId", "orderId"]);
            assert.equal(resources.length, 33);
            const mapping = findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs;
            assert.deepEqual([mapping.eventSourceArn, mapping.enabled], [stream, true]);
            assert.equal(await result.ready(), undefined);
            const statements = policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-consumer-policy")).Statement;
            assert.deepEqual(
                statements
                    .filter((s) => ["ReadOwnStream", "CountInCountersTable", "RemoveSoftDeletedItems"].includes(s.Sid))
                    .map((s) => s.Resource),
                [stream, COUNTERS_TABLE_ARN, arn],
            );
            assert.deepEqual(await outputValue(result.clientConfig), {
                tableName: "app-table",
                countersTableName: "orders-counters",
                partitionKey: "tenantId",
                sortKey: "orderId",
                deletedAttribute: "deleted",
                tokenAttribute: "counter_token",
                counterPrefix: "#counter#",
                countAttribute: "count",
                countedItems: "client",
                healQuietWindowSeconds: 600,
            });
        });

        it("attaches a table the program does not manage by ARN, reading its settings with getTable", async () => {
            // Act
            const arn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/legacy-orders`;
            const { resources, result, invokes } = await runProgramWithResult(
                () => new HybridCounterComponent("orders", { tableArn: arn }),
                {
                    invokes: { "aws:dynamodb/getTable:getTable": (inputs) => ({ ...legacyOrders(), name: inputs.name }) },
                },
            );

            // Assess
            assert.deepEqual(
                invokes.map((i) => [i.token, i.inputs.name]),
                [["aws:dynamodb/getTable:getTable", "legacy-orders"]],
            );
            assert.deepEqual(
                resourcesOfType(resources, "aws:dynamodb/table:Table").map((t) => t.name),
                ["orders-counters"],
            );
            assert.equal(
                findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs.eventSourceArn,
                `${arn}/stream/2020`,
            );
            assert.equal(await outputValue(result.tableName), "legacy-orders");
        });

        it("attaches a table by name, read with aws.dynamodb.Table.get, taking its keys", async () => {
            // Act
            const arn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/legacy-orders`;
            const { resources, result } = await runProgramWithResult(
                () => new HybridCounterComponent("orders", { table: aws.dynamodb.Table.get("legacy", "legacy-orders") }),
                {
                    reads: {
                        "aws:dynamodb/table:Table": (id) =>
                            legacyOrders({
                                name: id,
                                hashKey: "tenantId",
                                rangeKey: "orderId",
                                attributes: [
                                    { name: "tenantId", type: "S" },
                                    { name: "orderId", type: "S" },
                                ],
                                streamArn: `${arn}/stream/2021`,
                            }),
                    },
                },
            );

            // Assess
            assert.equal(await result.ready(), undefined);
            const mapping = findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs;
            assert.deepEqual([mapping.eventSourceArn, mapping.enabled], [`${arn}/stream/2021`, true]);
            const config = await outputValue(result.clientConfig);
            assert.deepEqual([config.tableName, config.partitionKey, config.sortKey], ["legacy-orders", "tenantId", "orderId"]);
        });

        it("refuses a table attached by ARN whose stream is off, through ready(), with no unhandled rejection", async () => {
            // Act
            const arn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/legacy-orders`;
            let outcome: Promise<unknown> = Promise.resolve("not attached");
            const { resources, errors } = await runProgramWithResult(
                () => {
                    const component = new HybridCounterComponent("orders", { tableArn: arn });
                    outcome = outcomeOf(component);
                    return component;
                },
                {
                    captureErrors: true,
                    invokes: {
                        "aws:dynamodb/getTable:getTable": (inputs) => ({
                            ...legacyOrders({ streamEnabled: false, streamViewType: undefined, streamArn: "" }),
                            name: inputs.name,
                        }),
                    },
                },
            );
            const error = await outcome;

            // Assess
            assert.deepEqual(errors, []);
            assert.ok(error instanceof HybridCounterArgsError);
            assert.deepEqual(error.problems, [
                '[table] must have streamEnabled: true and streamViewType: "NEW_AND_OLD_IMAGES" (found streamEnabled: false, streamViewType: "")',
            ]);
            assert.equal(
                findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs.enabled,
                false,
            );
        });

        for (const [title, attach] of [
            ["by ARN, read with getTable", { tableArn: `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/legacy-orders` }],
            ["by name, read with aws.dynamodb.Table.get", "Table.get"],
        ] as Array<[string, HybridCounterComponentArgs | "Table.get"]>) {
            it(`refuses a table attached ${title} whose description shows replicas, through ready(), with the mapping disabled`, async () => {
                // Prepare: the happy-path table's description, with one property changed: two replicas.
                const described = (name: string) =>
                    legacyOrders({
                        name,
                        replicas: [
                            { regionName: "eu-west-1", kmsKeyArn: "" },
                            { regionName: "ap-south-1", kmsKeyArn: "" },
                        ],
                    });

                // Act
                let outcome: Promise<unknown> = Promise.resolve("not attached");
                const { resources, errors } = await runProgramWithResult(
                    () => {
                        const component = new HybridCounterComponent("orders", {
                            backfillOnDeploy: true,
                            ...(attach === "Table.get" ? { table: aws.dynamodb.Table.get("legacy", "legacy-orders") } : attach),
                        });
                        outcome = outcomeOf(component);
                        return component;
                    },
                    {
                        captureErrors: true,
                        invokes: { "aws:dynamodb/getTable:getTable": (inputs) => described(inputs.name as string) },
                        reads: { "aws:dynamodb/table:Table": (id) => described(id) },
                    },
                );
                const error = await outcome;

                // Assess
                assert.deepEqual(errors, []);
                assert.ok(error instanceof HybridCounterArgsError);
                assert.deepEqual(error.problems, [replicatedProblem('"eu-west-1", "ap-south-1"')]);
                assert.equal(
                    findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs.enabled,
                    false,
                );
                assert.deepEqual(
                    JSON.parse(findResource(resources, "aws:lambda/invocation:Invocation", "orders-backfill-start").inputs.input as string),
                    { action: "skip", runId: "deploy-1" },
                );
            });
        }

        it("refuses a table that is not a Table resource before creating anything", async () => {
            // Act
            const { resources, errors } = await runProgramWithResult(
                () => {
                    assert.throws(
                        () =>
                            new HybridCounterComponent("orders", {
                                table: "orders" as unknown as aws.dynamodb.Table,
                                tableName: "x-table",
                            }),
                        (e: unknown) =>
                            e instanceof HybridCounterArgsError &&
                            e.problems.join(" | ") ===
                                '[table] must be an aws.dynamodb.Table resource of this program (got the string "orders"); attach a table by ARN with [tableArn], or by name with aws.dynamodb.Table.get(name, tableName) | [tableName] must not be set together with [table]',
                    );
                },
                { captureErrors: true },
            );

            // Assess
            assert.deepEqual(resources, []);
            assert.deepEqual(errors, []);
        });

        for (const [title, overrides, problems, given] of [
            [
                "without a stream",
                { streamEnabled: false, streamViewType: undefined },
                [
                    '[table] must have streamEnabled: true and streamViewType: "NEW_AND_OLD_IMAGES" (found streamEnabled: false, streamViewType: "")',
                ],
                {},
            ],
            [
                "with a KEYS_ONLY stream",
                { streamViewType: "KEYS_ONLY" },
                [
                    '[table] must have streamEnabled: true and streamViewType: "NEW_AND_OLD_IMAGES" (found streamEnabled: true, streamViewType: "KEYS_ONLY")',
                ],
                {},
            ],
            [
                "with other keys than the ones given",
                { hashKey: "id", rangeKey: "sk" },
                ['[table] must have hashKey "pk" ([partitionKey]); found "id"'],
                { partitionKey: "pk" },
            ],
            [
                "with a number key",
                {
                    attributes: [
                        { name: "pk", type: "S" },
                        { name: "sk", type: "N" },
                    ],
                },
                ['[table] must have a string (S) key "sk"; found type N'],
                {},
            ],
            [
                "without a sort key",
                { rangeKey: undefined, attributes: [{ name: "pk", type: "S" }] },
                ["[table] must have a range key: a resource's id is its sort key; found none"],
                {},
            ],
            [
                "with replicas (a global table)",
                { replicas: [{ regionName: "us-west-2" }, { regionName: "eu-west-1" }] },
                [replicatedProblem('"us-west-2", "eu-west-1"')],
                {},
            ],
        ] as Array<[string, Partial<aws.dynamodb.TableArgs>, string[], HybridCounterComponentArgs]>) {
            it(`ready() rejects naming [table] for a table ${title}, with no unhandled rejection, and the mapping registered disabled`, async () => {
                // Act: a unit test of the user's program awaits ready() beside the component.
                let outcome: Promise<unknown> = Promise.resolve("not attached");
                const { resources, errors } = await runProgramWithResult(
                    () => {
                        const component = new HybridCounterComponent("orders", {
                            ...given,
                            backfillOnDeploy: true,
                            table: new aws.dynamodb.Table("app", tableArgs(overrides)),
                        });
                        outcome = outcomeOf(component);
                        return component;
                    },
                    { captureErrors: true },
                );
                const error = await outcome;

                // Assess
                assert.deepEqual(errors, []);
                assert.ok(error instanceof HybridCounterArgsError);
                assert.ok(pulumi.RunError.isInstance(error), "a RunError: Pulumi reports it without a stack trace");
                assert.deepEqual(error.problems, problems);
                assert.equal(error.message, `invalid HybridCounterComponent args:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
                assert.equal(
                    findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs.enabled,
                    false,
                );
                assert.deepEqual(
                    JSON.parse(findResource(resources, "aws:lambda/invocation:Invocation", "orders-backfill-start").inputs.input as string),
                    { action: "skip", runId: "deploy-1" },
                );
            });

            it(`fails the program naming [table] for a table ${title} when ready() is not awaited, and only once`, async () => {
                // Act
                const { errors } = await runProgramWithResult(
                    () => new HybridCounterComponent("orders", { ...given, table: new aws.dynamodb.Table("app", tableArgs(overrides)) }),
                    { captureErrors: true },
                );

                // Assess: the one rejection Pulumi's program host turns into a failed update.
                assert.equal(errors.length, 1);
                assert.ok(errors[0] instanceof HybridCounterArgsError);
                assert.deepEqual(errors[0].problems, problems);
            });
        }
    });
});
