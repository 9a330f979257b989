/**
 * The policy pack against hand-written stacks: a happy path, one changed property per failing case,
 * a stack that breaks several policies at once, config, and values unknown during preview.
 */
import * as assert from "node:assert/strict";
import type * as aws from "@pulumi/aws";
import type { Unwrap } from "@pulumi/pulumi";
import type { ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { unknownCheckingProxy, UnknownValueError } from "@pulumi/policy";

import {
    COUNTER_CONSUMER_VARIABLE,
    consumerIamNoWildcardActions,
    dynamodbTablePointInTimeRecovery,
    hybridCounterPolicies,
    POLICY_NAMES,
    PolicyConfigError,
    policyFactories,
    streamMappingBoundedRetries,
    TYPES,
    wildcardGrants,
} from "../policy/index";
import { RecordedResource, runPolicies, unknownValue, withChange, without } from "./support/policy-harness";
import { ENV } from "../runtime/shared/config";

const ACCOUNT = "123456789012";
const REGION = "eu-west-1";
const TABLE_ARN = `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/orders`;
const STREAM_ARN = `${TABLE_ARN}/stream/2026-01-01T00:00:00.000`;
const DLQ_ARN = `arn:aws:sqs:${REGION}:${ACCOUNT}:orders-dlq`;
const FATAL_ARN = `arn:aws:sqs:${REGION}:${ACCOUNT}:orders-fatal-dlq`;
const TOPIC_ARN = `arn:aws:sns:${REGION}:${ACCOUNT}:orders-thresholds`;
/** The variable a counter's function reads its threshold topic from (runtime/shared/config.ts). */
const TOPIC_VARIABLE = ENV.thresholdTopicArn;
const fnArn = (name: string) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${name}`;
const roleArn = (name: string) => `arn:aws:iam::${ACCOUNT}:role/${name}`;

type Inputs<T> = Unwrap<T> & Record<string, unknown>;

function resource<T>(type: string, name: string, inputs: Inputs<T>, propertyDependencies: Record<string, string[]> = {}): RecordedResource {
    return { type, name, inputs, propertyDependencies };
}

const ASSUME_LAMBDA = JSON.stringify({
    Version: "2012-10-17",
    Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }],
});

function document(...statements: object[]): string {
    return JSON.stringify({ Version: "2012-10-17", Statement: statements });
}

/**
 * A stream consumer written by hand, the way the policies want it: table with stream, PITR and SSE;
 * a consumer function whose mapping is bounded, reports item failures, runs one batch per stream shard at a time
 * and has a tumbling window; a first DLQ (on-failure destination) redriven into a fatal DLQ; a redrive function
 * reading the first DLQ; an encrypted threshold topic the consumer may publish to; alarms; exact IAM.
 */
function happyStack(): RecordedResource[] {
    return [
        resource<aws.dynamodb.TableArgs>(TYPES.table, "orders-table", {
            name: "orders",
            billingMode: "PAY_PER_REQUEST",
            hashKey: "pk",
            rangeKey: "sk",
            attributes: [
                { name: "pk", type: "S" },
                { name: "sk", type: "S" },
            ],
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
            pointInTimeRecovery: { enabled: true },
            serverSideEncryption: { enabled: true },
        }),
        resource<aws.sqs.QueueArgs>(TYPES.queue, "orders-fatal-dlq", {
            name: "orders-fatal-dlq",
            messageRetentionSeconds: 1_209_600,
            sqsManagedSseEnabled: true,
        }),
        resource<aws.sqs.QueueArgs>(
            TYPES.queue,
            "orders-dlq",
            {
                name: "orders-dlq",
                messageRetentionSeconds: 1_209_600,
                sqsManagedSseEnabled: true,
                visibilityTimeout: 720,
                redrivePolicy: JSON.stringify({ deadLetterTargetArn: FATAL_ARN, maxReceiveCount: 5 }),
            },
            { redrivePolicy: ["orders-fatal-dlq"] },
        ),
        resource<aws.iam.RoleArgs>(TYPES.role, "orders-consumer-role", { name: "orders-consumer-role", assumeRolePolicy: ASSUME_LAMBDA }),
        resource<aws.iam.RolePolicyArgs>(
            TYPES.rolePolicy,
            "orders-consumer-policy",
            {
                role: "orders-consumer-role",
                policy: document(
                    {
                        Effect: "Allow",
                        Action: ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
                        Resource: STREAM_ARN,
                    },
                    { Effect: "Allow", Action: "dynamodb:ListStreams", Resource: "*" },
                    {
                        Effect: "Allow",
                        Action: ["dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:BatchGetItem"],
                        Resource: TABLE_ARN,
                    },
                    { Effect: "Allow", Action: "sqs:SendMessage", Resource: [DLQ_ARN, FATAL_ARN] },
                    { Effect: "Allow", Action: "sns:Publish", Resource: TOPIC_ARN },
                ),
            },
            { role: ["orders-consumer-role"], policy: ["orders-table", "orders-dlq", "orders-fatal-dlq", "orders-thresholds"] },
        ),
        resource<aws.sns.TopicArgs>(TYPES.topic, "orders-thresholds", { name: "orders-thresholds", kmsMasterKeyId: "alias/aws/sns" }),
        // The counter's consumer (the runtime's stream handler), configured by its environment.
        resource<aws.lambda.FunctionArgs>(
            TYPES.function,
            "orders-consumer",
            {
                name: "orders-consumer",
                role: roleArn("orders-consumer-role"),
                runtime: "nodejs22.x",
                handler: "index.handler",
                timeout: 60,
                environment: { variables: { [COUNTER_CONSUMER_VARIABLE]: "orders", [TOPIC_VARIABLE]: TOPIC_ARN } },
            },
            { role: ["orders-consumer-role"], environment: ["orders-thresholds"] },
        ),
        resource<aws.lambda.EventSourceMappingArgs>(
            TYPES.eventSourceMapping,
            "orders-consumer-mapping",
            {
                eventSourceArn: STREAM_ARN,
                functionName: fnArn("orders-consumer"),
                startingPosition: "TRIM_HORIZON",
                batchSize: 100,
                tumblingWindowInSeconds: 900,
                maximumRetryAttempts: 10,
                maximumRecordAgeInSeconds: 21_600,
                bisectBatchOnFunctionError: true,
                functionResponseTypes: ["ReportBatchItemFailures"],
                destinationConfig: { onFailure: { destinationArn: DLQ_ARN } },
            },
            { eventSourceArn: ["orders-table"], functionName: ["orders-consumer"], destinationConfig: ["orders-dlq"] },
        ),
        resource<aws.iam.RoleArgs>(TYPES.role, "orders-redrive-role", { name: "orders-redrive-role", assumeRolePolicy: ASSUME_LAMBDA }),
        resource<aws.iam.RolePolicyArgs>(
            TYPES.rolePolicy,
            "orders-redrive-policy",
            {
                role: "orders-redrive-role",
                policy: document(
                    { Effect: "Allow", Action: ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"], Resource: DLQ_ARN },
                    { Effect: "Allow", Action: "sqs:SendMessage", Resource: FATAL_ARN },
                    {
                        Effect: "Allow",
                        Action: ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
                        Resource: STREAM_ARN,
                    },
                ),
            },
            { role: ["orders-redrive-role"], policy: ["orders-table", "orders-dlq", "orders-fatal-dlq"] },
        ),
        resource<aws.lambda.FunctionArgs>(
            TYPES.function,
            "orders-redrive",
            { name: "orders-redrive", role: roleArn("orders-redrive-role"), runtime: "nodejs22.x", handler: "index.handler", timeout: 120 },
            { role: ["orders-redrive-role"] },
        ),
        resource<aws.lambda.EventSourceMappingArgs>(
            TYPES.eventSourceMapping,
            "orders-redrive-mapping",
            {
                eventSourceArn: DLQ_ARN,
                functionName: fnArn("orders-redrive"),
                batchSize: 1,
                functionResponseTypes: ["ReportBatchItemFailures"],
            },
            { eventSourceArn: ["orders-dlq"], functionName: ["orders-redrive"] },
        ),
        resource<aws.cloudwatch.MetricAlarmArgs>(
            TYPES.metricAlarm,
            "orders-consumer-iterator-age",
            {
                comparisonOperator: "GreaterThanThreshold",
                evaluationPeriods: 1,
                metricName: "IteratorAge",
                namespace: "AWS/Lambda",
                statistic: "Maximum",
                period: 300,
                threshold: 900_000,
                dimensions: { FunctionName: "orders-consumer" },
            },
            { dimensions: ["orders-consumer"] },
        ),
        resource<aws.cloudwatch.MetricAlarmArgs>(
            TYPES.metricAlarm,
            "orders-dlq-depth",
            {
                comparisonOperator: "GreaterThanThreshold",
                evaluationPeriods: 1,
                metricName: "ApproximateNumberOfMessagesVisible",
                namespace: "AWS/SQS",
                statistic: "Maximum",
                period: 300,
                threshold: 0,
                dimensions: { QueueName: "orders-dlq" },
            },
            { dimensions: ["orders-dlq"] },
        ),
        // The settler: a scheduled function with an errors alarm.
        resource<aws.lambda.FunctionArgs>(TYPES.function, "orders-settler", {
            role: roleArn("orders-settler-role"),
            runtime: "nodejs22.x",
            handler: "index.handler",
        }),
        resource<aws.cloudwatch.EventRuleArgs>("aws:cloudwatch/eventRule:EventRule", "orders-settler-schedule", {
            scheduleExpression: "rate(5 minutes)",
        }),
        resource<aws.cloudwatch.EventTargetArgs>(
            "aws:cloudwatch/eventTarget:EventTarget",
            "orders-settler-target",
            { rule: "orders-settler-schedule", arn: fnArn("orders-settler") },
            { rule: ["orders-settler-schedule"], arn: ["orders-settler"] },
        ),
        resource<aws.cloudwatch.MetricAlarmArgs>(
            TYPES.metricAlarm,
            "orders-settler-errors",
            {
                comparisonOperator: "GreaterThanOrEqualToThreshold",
                evaluationPeriods: 1,
                metricName: "Errors",
                namespace: "AWS/Lambda",
                statistic: "Sum",
                period: 300,
                threshold: 1,
                dimensions: { FunctionName: "orders-settler" },
            },
            { dimensions: ["orders-settler"] },
        ),
    ];
}

const ALL_POLICIES = hybridCounterPolicies();

async function violationsOf(stack: readonly RecordedResource[], policies = ALL_POLICIES, config = {}) {
    const run = await runPolicies(policies, stack, { config });
    assert.deepEqual(run.unknownValueErrors, [], "no policy may stop on an unknown value");
    return run.violations.map(({ policy, resource: name, message }) => ({ policy, resource: name, message }));
}

/** Replaces computed values (ARNs, role names, documents built from ARNs) with unknowns, as in a preview. */
function asPreview(stack: readonly RecordedResource[]): RecordedResource[] {
    const computed = new Set(["eventSourceArn", "functionName", "role", "redrivePolicy", "dimensions"]);
    return stack.map((r) => {
        const inputs: Record<string, unknown> = { ...r.inputs };
        for (const key of Object.keys(inputs)) {
            if (computed.has(key) && r.propertyDependencies?.[key] !== undefined) {
                inputs[key] = key === "dimensions" ? unknownValue.object : unknownValue.string;
            }
        }
        if (r.type === TYPES.eventSourceMapping && inputs.destinationConfig !== undefined) {
            inputs.destinationConfig = { onFailure: { destinationArn: unknownValue.string } };
        }
        if (r.type === TYPES.rolePolicy) {
            inputs.policy = unknownValue.string;
        }
        return { ...r, inputs };
    });
}

describe("policy pack: the hand-written happy path", () => {
    it("passes every policy, and every policy applies to it", async () => {
        // Prepare
        const stack = happyStack();

        // Act
        const run = await runPolicies(ALL_POLICIES, stack);

        // Assess
        assert.deepEqual(run.violations, []);
        assert.deepEqual(run.unknownValueErrors, []);
        assert.deepEqual(run.notApplicable, []);
    });

    it("passes in its preview shape, where ARNs, names and policy documents are unknown", async () => {
        // Prepare
        const stack = asPreview(happyStack());
        assert.equal(stack.find((r) => r.name === "orders-consumer-mapping")?.inputs.eventSourceArn, unknownValue.string);

        // Act
        const run = await runPolicies(ALL_POLICIES, stack);

        // Assess
        assert.deepEqual(run.violations, []);
        assert.deepEqual(run.unknownValueErrors, []);
        assert.deepEqual(run.notApplicable, []);
    });
});

const MAPPING = "event source mapping 'orders-consumer-mapping' (DynamoDB stream)";

interface FailingCase {
    readonly title: string;
    readonly resource: string;
    readonly change: (inputs: Record<string, any>, propertyDependencies: Record<string, string[]>) => void;
    readonly expected: { policy: string; resource: string; message: string };
}

const FAILING_CASES: FailingCase[] = [
    {
        title: "a scheduled function whose only alarm watches another metric",
        resource: "orders-settler-errors",
        change: (i) => (i.metricName = "Duration"),
        expected: {
            policy: "scheduled-function-guarded",
            resource: "orders-settler",
            message:
                "schedule 'orders-settler-schedule' invokes function 'orders-settler', but no alarm with [metricName] Errors has [dimensions] that reference that function",
        },
    },
    {
        title: "a schedule longer than a day",
        resource: "orders-settler-schedule",
        change: (i) => (i.scheduleExpression = "rate(7 days)"),
        expected: {
            policy: "scheduled-function-guarded",
            resource: "orders-settler-schedule",
            message:
                "schedule 'orders-settler-schedule' has [scheduleExpression] \"rate(7 days)\"; it must be rate(<n> <unit>) of at most 1440 minutes",
        },
    },
    {
        title: "a stream view type without the images",
        resource: "orders-table",
        change: (i) => (i.streamViewType = "KEYS_ONLY"),
        expected: {
            policy: "dynamodb-stream-view-type",
            resource: "orders-table",
            message:
                "table 'orders-table' feeds event source mapping 'orders-consumer-mapping' but [streamViewType] is \"KEYS_ONLY\"; the consumer needs a view type that carries NEW_AND_OLD_IMAGES",
        },
    },
    {
        title: "a disabled stream",
        resource: "orders-table",
        change: (i) => (i.streamEnabled = false),
        expected: {
            policy: "dynamodb-stream-view-type",
            resource: "orders-table",
            message:
                "table 'orders-table' feeds event source mapping 'orders-consumer-mapping' but [streamEnabled] is false; it must be true",
        },
    },
    {
        title: "point-in-time recovery off",
        resource: "orders-table",
        change: (i) => (i.pointInTimeRecovery = { enabled: false }),
        expected: {
            policy: "dynamodb-table-point-in-time-recovery",
            resource: "orders-table",
            message: "table 'orders-table' has [pointInTimeRecovery.enabled] false; it must be true",
        },
    },
    {
        title: "a short recovery window",
        resource: "orders-table",
        change: (i) => (i.pointInTimeRecovery.recoveryPeriodInDays = 7),
        expected: {
            policy: "dynamodb-table-point-in-time-recovery",
            resource: "orders-table",
            message: "table 'orders-table' has [pointInTimeRecovery.recoveryPeriodInDays] 7; it must be at least 35",
        },
    },
    {
        title: "no KMS server-side encryption",
        resource: "orders-table",
        change: (i) => delete i.serverSideEncryption,
        expected: {
            policy: "dynamodb-table-encryption",
            resource: "orders-table",
            message: "table 'orders-table' has [serverSideEncryption.enabled] unset; it must be true",
        },
    },
    {
        title: "infinite retries (-1)",
        resource: "orders-consumer-mapping",
        change: (i) => (i.maximumRetryAttempts = -1),
        expected: {
            policy: "stream-mapping-bounded-retries",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has [maximumRetryAttempts] -1, which retries forever; set it between 0 and 10`,
        },
    },
    {
        title: "retries left at Lambda's default",
        resource: "orders-consumer-mapping",
        change: (i) => delete i.maximumRetryAttempts,
        expected: {
            policy: "stream-mapping-bounded-retries",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has [maximumRetryAttempts] unset, which retries forever; set it between 0 and 10`,
        },
    },
    {
        title: "retries above the maximum",
        resource: "orders-consumer-mapping",
        change: (i) => (i.maximumRetryAttempts = 11),
        expected: {
            policy: "stream-mapping-bounded-retries",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has [maximumRetryAttempts] 11, above the maximum 10`,
        },
    },
    {
        title: "an infinite record age (-1)",
        resource: "orders-consumer-mapping",
        change: (i) => (i.maximumRecordAgeInSeconds = -1),
        expected: {
            policy: "stream-mapping-bounded-record-age",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has [maximumRecordAgeInSeconds] -1, which never gives up on a record; set it between 60 and 43200`,
        },
    },
    {
        title: "a record age beyond half the stream retention",
        resource: "orders-consumer-mapping",
        change: (i) => (i.maximumRecordAgeInSeconds = 86_400),
        expected: {
            policy: "stream-mapping-bounded-record-age",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has [maximumRecordAgeInSeconds] 86400, above the maximum 43200`,
        },
    },
    {
        title: "no bisecting on error",
        resource: "orders-consumer-mapping",
        change: (i) => (i.bisectBatchOnFunctionError = false),
        expected: {
            policy: "stream-mapping-bisect-on-error",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has [bisectBatchOnFunctionError] false; it must be true`,
        },
    },
    {
        title: "no ReportBatchItemFailures",
        resource: "orders-consumer-mapping",
        change: (i) => (i.functionResponseTypes = []),
        expected: {
            policy: "stream-mapping-report-batch-item-failures",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has [functionResponseTypes] []; it must include "ReportBatchItemFailures"`,
        },
    },
    {
        title: "no on-failure destination",
        resource: "orders-consumer-mapping",
        change: (i, deps) => {
            delete i.destinationConfig;
            delete deps.destinationConfig;
        },
        expected: {
            policy: "stream-mapping-on-failure-destination",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has no [destinationConfig.onFailure.destinationArn]; failed batches would be dropped`,
        },
    },
    {
        title: "starting at LATEST",
        resource: "orders-consumer-mapping",
        change: (i) => (i.startingPosition = "LATEST"),
        expected: {
            policy: "stream-mapping-trim-horizon",
            resource: "orders-consumer-mapping",
            message: `${MAPPING} has [startingPosition] "LATEST"; it must be one of TRIM_HORIZON`,
        },
    },
    {
        title: "two batches of one stream shard run at once",
        resource: "orders-consumer-mapping",
        change: (i) => (i.parallelizationFactor = 2),
        expected: {
            policy: "stream-mapping-counter-parallelization",
            resource: "orders-consumer-mapping",
            message:
                "event source mapping 'orders-consumer-mapping' (DynamoDB stream) invokes the counter's consumer 'orders-consumer' with [parallelizationFactor] 2; " +
                "the consumer's marks need the batches of one stream shard applied one at a time: set it to 1",
        },
    },
    {
        title: "a counter's mapping without a tumbling window",
        resource: "orders-consumer-mapping",
        change: (i) => delete i.tumblingWindowInSeconds,
        expected: {
            policy: "stream-mapping-counter-tumbling-window",
            resource: "orders-consumer-mapping",
            message:
                "event source mapping 'orders-consumer-mapping' (DynamoDB stream) invokes the counter's consumer 'orders-consumer' with " +
                "[tumblingWindowInSeconds] unset; the event names its stream shard, which the consumer's marks are keyed by, only with a " +
                "tumbling window: set it between 1 and 900",
        },
    },
    {
        title: "an unencrypted threshold topic",
        resource: "orders-thresholds",
        change: (i) => delete i.kmsMasterKeyId,
        expected: {
            policy: "counter-threshold-topic",
            resource: "orders-thresholds",
            message:
                "topic 'orders-thresholds' receives the threshold events of function 'orders-consumer' ([HYBRID_COUNTER_THRESHOLD_TOPIC_ARN]) " +
                "but has [kmsMasterKeyId] unset: the events name the keys; encrypt the topic",
        },
    },
    {
        title: "a consumer whose role may not publish to its threshold topic",
        resource: "orders-consumer-policy",
        change: (i) => {
            const doc = JSON.parse(i.policy as string) as { Statement: Array<{ Action: unknown }> };
            i.policy = JSON.stringify({ ...doc, Statement: doc.Statement.filter((st) => st.Action !== "sns:Publish") });
        },
        expected: {
            policy: "counter-threshold-topic",
            resource: "orders-consumer",
            message:
                `function 'orders-consumer' sends threshold events to ${TOPIC_ARN} ([HYBRID_COUNTER_THRESHOLD_TOPIC_ARN]), but no policy of its role ` +
                "allows sns:Publish there: the events would never be sent",
        },
    },
    {
        title: "a replicated (global) table feeding a counter's consumer that does not say how regions count",
        resource: "orders-table",
        change: (i) => (i.replicas = [{ regionName: "us-west-2" }]),
        expected: {
            policy: "counter-table-replicas",
            resource: "orders-table",
            message:
                "table 'orders-table' has [replicas] in us-west-2 and feeds a hybrid counter through event source mapping 'orders-consumer-mapping', " +
                "but its consumer 'orders-consumer' has no [HYBRID_COUNTER_REGIONS], so each region's stream carries every region's writes " +
                "and a consumer per region counts each write once per region",
        },
    },
    {
        title: "an unencrypted on-failure queue",
        resource: "orders-dlq",
        change: (i) => (i.sqsManagedSseEnabled = false),
        expected: {
            policy: "failure-queue-encryption",
            resource: "orders-dlq",
            message:
                "queue 'orders-dlq' (on-failure destination of event source mapping 'orders-consumer-mapping') has [sqsManagedSseEnabled] false and no [kmsMasterKeyId]; enable server-side encryption",
        },
    },
    {
        title: "a dead-letter target with a short retention",
        resource: "orders-fatal-dlq",
        change: (i) => (i.messageRetentionSeconds = 345_600),
        expected: {
            policy: "failure-queue-retention",
            resource: "orders-fatal-dlq",
            message:
                "queue 'orders-fatal-dlq' (dead-letter target of queue 'orders-dlq') has [messageRetentionSeconds] 345600; it must be at least 1209600",
        },
    },
    {
        title: "an on-failure queue left at the SQS default retention",
        resource: "orders-dlq",
        change: (i) => delete i.messageRetentionSeconds,
        expected: {
            policy: "failure-queue-retention",
            resource: "orders-dlq",
            message:
                "queue 'orders-dlq' (on-failure destination of event source mapping 'orders-consumer-mapping') has [messageRetentionSeconds] unset (SQS keeps 345600); it must be at least 1209600",
        },
    },
    {
        title: "no IteratorAge alarm on the consumer",
        resource: "orders-consumer-iterator-age",
        change: (i) => (i.metricName = "Errors"),
        expected: {
            policy: "stream-consumer-alarms",
            resource: "orders-consumer-mapping",
            message:
                "event source mapping 'orders-consumer-mapping' invokes function 'orders-consumer', but no alarm with [metricName] IteratorAge has [dimensions] that reference that function",
        },
    },
    {
        title: "an IteratorAge alarm that fires too late",
        resource: "orders-consumer-iterator-age",
        change: (i) => (i.threshold = 50_000_000),
        expected: {
            policy: "stream-consumer-alarms",
            resource: "orders-consumer-iterator-age",
            message:
                "IteratorAge alarm 'orders-consumer-iterator-age' on function 'orders-consumer' has [threshold] 50000000 ms, above the maximum 43200000 ms",
        },
    },
    {
        title: "no alarm on the on-failure queue",
        resource: "orders-dlq-depth",
        change: (i, deps) => {
            i.dimensions = { QueueName: "orders-fatal-dlq" };
            deps.dimensions = ["orders-fatal-dlq"];
        },
        expected: {
            policy: "stream-consumer-alarms",
            resource: "orders-consumer-mapping",
            message:
                "event source mapping 'orders-consumer-mapping' sends failed batches to queue 'orders-dlq', but no alarm's [dimensions] reference that queue " +
                "with one of the metrics ApproximateNumberOfMessagesVisible, ApproximateAgeOfOldestMessage, NumberOfMessagesSent",
        },
    },
    {
        title: "a dynamodb wildcard in the consumer's role policy",
        resource: "orders-consumer-policy",
        change: (i) =>
            (i.policy = document(
                { Effect: "Allow", Action: ["dynamodb:*"], Resource: TABLE_ARN },
                { Effect: "Allow", Action: "sns:Publish", Resource: TOPIC_ARN },
            )),
        expected: {
            policy: "consumer-iam-no-wildcard-actions",
            resource: "orders-consumer-policy",
            message:
                "[policy] of 'orders-consumer-policy' (attached to role 'orders-consumer-role' of function 'orders-consumer', which reads a DynamoDB stream through 'orders-consumer-mapping') " +
                "allows wildcard actions: dynamodb:*",
        },
    },
    {
        title: "an sqs wildcard in the redrive's role policy",
        resource: "orders-redrive-policy",
        change: (i) => (i.policy = document({ Effect: "Allow", Action: "SQS:Receive*", Resource: DLQ_ARN })),
        expected: {
            policy: "consumer-iam-no-wildcard-actions",
            resource: "orders-redrive-policy",
            message:
                "[policy] of 'orders-redrive-policy' (attached to role 'orders-redrive-role' of function 'orders-redrive', which reads a failure queue through 'orders-redrive-mapping') " +
                "allows wildcard actions: SQS:Receive*",
        },
    },
    {
        title: "a NotAction grant in the consumer's role policy",
        resource: "orders-consumer-policy",
        change: (i) => (i.policy = document({ Effect: "Allow", NotAction: "iam:*", Resource: "*" })),
        expected: {
            policy: "consumer-iam-no-wildcard-actions",
            resource: "orders-consumer-policy",
            message:
                "[policy] of 'orders-consumer-policy' (attached to role 'orders-consumer-role' of function 'orders-consumer', which reads a DynamoDB stream through 'orders-consumer-mapping') " +
                'allows wildcard actions: NotAction "iam:*"',
        },
    },
    {
        title: "an inline policy granting every action",
        resource: "orders-consumer-role",
        change: (i) => (i.inlinePolicies = [{ name: "debug", policy: document({ Effect: "Allow", Action: "*", Resource: "*" }) }]),
        expected: {
            policy: "consumer-iam-no-wildcard-actions",
            resource: "orders-consumer-role",
            message:
                "[inlinePolicies[0].policy] of 'orders-consumer-role' (attached to role 'orders-consumer-role' of function 'orders-consumer', which reads a DynamoDB stream through 'orders-consumer-mapping') " +
                "allows wildcard actions: *",
        },
    },
    {
        title: "a full-access AWS managed policy on the consumer's role",
        resource: "orders-consumer-role",
        change: (i) => (i.managedPolicyArns = ["arn:aws:iam::aws:policy/AmazonDynamoDBFullAccess"]),
        expected: {
            policy: "consumer-iam-no-wildcard-actions",
            resource: "orders-consumer-role",
            message:
                "[managedPolicyArns] of 'orders-consumer-role' attaches the AWS managed policy AmazonDynamoDBFullAccess to role 'orders-consumer-role' of function 'orders-consumer', " +
                "which reads a DynamoDB stream through 'orders-consumer-mapping'; it allows wildcard actions",
        },
    },
];

describe("policy pack: each policy catches its failure", () => {
    for (const { title, resource: name, change, expected } of FAILING_CASES) {
        it(`${expected.policy} reports ${title}`, async () => {
            // Prepare
            const stack = withChange(happyStack(), name, change);

            // Act
            const violations = await violationsOf(stack);

            // Assess
            assert.deepEqual(violations, [expected]);
        });
    }

    it("covers every policy of the pack", () => {
        // Assess
        assert.deepEqual([...new Set(FAILING_CASES.map((c) => c.expected.policy))].sort(), [...POLICY_NAMES].sort());
    });

    it("consumer-iam-no-wildcard-actions follows a role policy attachment to a customer managed policy", async () => {
        // Prepare
        const stack: RecordedResource[] = [
            ...happyStack(),
            resource<aws.iam.PolicyArgs>(TYPES.policy, "orders-extra-policy", {
                policy: document({ Effect: "Allow", Action: ["dynamodb:Get*", "dynamodb:Query"], Resource: TABLE_ARN }),
            }),
            resource<aws.iam.RolePolicyAttachmentArgs>(
                TYPES.rolePolicyAttachment,
                "orders-extra-attachment",
                { role: "orders-consumer-role", policyArn: `arn:aws:iam::${ACCOUNT}:policy/orders-extra-policy` },
                { role: ["orders-consumer-role"], policyArn: ["orders-extra-policy"] },
            ),
        ];

        // Act
        const violations = await violationsOf(stack);

        // Assess
        assert.deepEqual(violations, [
            {
                policy: "consumer-iam-no-wildcard-actions",
                resource: "orders-extra-policy",
                message:
                    "[policy] of 'orders-extra-policy' (attached to role 'orders-consumer-role' of function 'orders-consumer', which reads a DynamoDB stream through 'orders-consumer-mapping') " +
                    "allows wildcard actions: dynamodb:Get*",
            },
        ]);
    });

    it("consumer-iam-no-wildcard-actions ignores wildcards on other services, deny statements and roles of other functions", async () => {
        // Prepare
        const stack: RecordedResource[] = [
            ...withChange(happyStack(), "orders-consumer-policy", (i) => {
                const doc = JSON.parse(i.policy as string) as { Statement: object[] };
                doc.Statement.push(
                    { Effect: "Allow", Action: "logs:*", Resource: "*" },
                    { Effect: "Deny", Action: "dynamodb:*", Resource: "*" },
                );
                i.policy = JSON.stringify(doc);
            }),
            resource<aws.iam.RoleArgs>(TYPES.role, "api-role", {
                assumeRolePolicy: ASSUME_LAMBDA,
                inlinePolicies: [{ name: "api", policy: document({ Effect: "Allow", Action: "dynamodb:*", Resource: TABLE_ARN }) }],
            }),
            resource<aws.lambda.FunctionArgs>(
                TYPES.function,
                "api",
                { role: roleArn("api-role"), runtime: "nodejs22.x", handler: "index.handler" },
                { role: ["api-role"] },
            ),
        ];

        // Act
        const violations = await violationsOf(stack);

        // Assess
        assert.deepEqual(violations, []);
    });

    it("wildcardGrants names every wildcard an Allow statement grants on the given services", () => {
        // Act
        const grants = wildcardGrants(
            {
                Statement: [
                    { Effect: "Allow", Action: ["dynamodb:GetItem", "dynamodb:Batch?etItem", "sqs:*", "s3:*"] },
                    { Effect: "Allow", Action: "*" },
                    { Effect: "Deny", Action: "dynamodb:*" },
                ],
            },
            ["dynamodb", "sqs"],
        );

        // Assess
        assert.deepEqual(grants, ["dynamodb:Batch?etItem", "sqs:*", "*"]);
    });
});

describe("policy pack: a hand-written table and mapping that break several policies at once", () => {
    it("reports each broken policy on the resource that breaks it", async () => {
        // Prepare: a table with a keys-only stream and nothing else, and a mapping left at Lambda's defaults.
        const stack: RecordedResource[] = [
            resource<aws.dynamodb.TableArgs>(TYPES.table, "events", {
                hashKey: "id",
                attributes: [{ name: "id", type: "S" }],
                streamEnabled: true,
                streamViewType: "KEYS_ONLY",
            }),
            resource<aws.lambda.FunctionArgs>(TYPES.function, "events-handler", {
                role: roleArn("external"),
                runtime: "nodejs22.x",
                handler: "index.handler",
            }),
            resource<aws.lambda.EventSourceMappingArgs>(
                TYPES.eventSourceMapping,
                "events-mapping",
                { eventSourceArn: `${TABLE_ARN}/stream/x`, functionName: fnArn("events-handler"), startingPosition: "LATEST" },
                { eventSourceArn: ["events"], functionName: ["events-handler"] },
            ),
        ];

        // Act
        const run = await runPolicies(ALL_POLICIES, stack);

        // Assess
        const mapping = "event source mapping 'events-mapping' (DynamoDB stream)";
        assert.deepEqual(
            run.violations.map(({ policy, resource: name, message, level }) => ({ policy, resource: name, message, level })),
            [
                {
                    policy: "dynamodb-stream-view-type",
                    resource: "events",
                    message:
                        "table 'events' feeds event source mapping 'events-mapping' but [streamViewType] is \"KEYS_ONLY\"; the consumer needs a view type that carries NEW_AND_OLD_IMAGES",
                    level: "mandatory",
                },
                {
                    policy: "dynamodb-table-point-in-time-recovery",
                    resource: "events",
                    message: "table 'events' has [pointInTimeRecovery.enabled] unset; it must be true",
                    level: "advisory",
                },
                {
                    policy: "dynamodb-table-encryption",
                    resource: "events",
                    message: "table 'events' has [serverSideEncryption.enabled] unset; it must be true",
                    level: "advisory",
                },
                {
                    policy: "stream-mapping-bounded-retries",
                    resource: "events-mapping",
                    message: `${mapping} has [maximumRetryAttempts] unset, which retries forever; set it between 0 and 10`,
                    level: "mandatory",
                },
                {
                    policy: "stream-mapping-bounded-record-age",
                    resource: "events-mapping",
                    message: `${mapping} has [maximumRecordAgeInSeconds] unset, which never gives up on a record; set it between 60 and 43200`,
                    level: "mandatory",
                },
                {
                    policy: "stream-mapping-bisect-on-error",
                    resource: "events-mapping",
                    message: `${mapping} has [bisectBatchOnFunctionError] unset; it must be true`,
                    level: "advisory",
                },
                {
                    policy: "stream-mapping-report-batch-item-failures",
                    resource: "events-mapping",
                    message: `${mapping} has [functionResponseTypes] unset; it must include "ReportBatchItemFailures"`,
                    level: "mandatory",
                },
                {
                    policy: "stream-mapping-on-failure-destination",
                    resource: "events-mapping",
                    message: `${mapping} has no [destinationConfig.onFailure.destinationArn]; failed batches would be dropped`,
                    level: "mandatory",
                },
                {
                    policy: "stream-mapping-trim-horizon",
                    resource: "events-mapping",
                    message: `${mapping} has [startingPosition] "LATEST"; it must be one of TRIM_HORIZON`,
                    level: "mandatory",
                },
                {
                    policy: "stream-consumer-alarms",
                    resource: "events-mapping",
                    message:
                        "event source mapping 'events-mapping' invokes function 'events-handler', but no alarm with [metricName] IteratorAge has [dimensions] that reference that function",
                    level: "advisory",
                },
            ],
        );
        assert.deepEqual(run.notApplicable, [
            {
                policy: "stream-mapping-counter-parallelization",
                reason: "no event source mapping in this stack invokes a hybrid counter's consumer",
            },
            {
                policy: "stream-mapping-counter-tumbling-window",
                reason: "no event source mapping in this stack invokes a hybrid counter's consumer",
            },
            {
                policy: "counter-table-replicas",
                reason: "no event source mapping in this stack invokes a hybrid counter's consumer",
            },
            { policy: "counter-threshold-topic", reason: "no hybrid counter's function in this stack names a threshold topic" },
            { policy: "failure-queue-encryption", reason: "no queue in this stack is an on-failure destination or a dead-letter target" },
            { policy: "failure-queue-retention", reason: "no queue in this stack is an on-failure destination or a dead-letter target" },
            { policy: "scheduled-function-guarded", reason: "no EventBridge schedule in this stack invokes a Lambda function" },
        ]);
        assert.deepEqual(run.unknownValueErrors, []);
    });
});

describe("policy pack: configuration", () => {
    it("a tuned threshold in the pack config changes the outcome", async () => {
        // Prepare
        const stack = happyStack();
        const config = { "stream-mapping-bounded-retries": { maximumRetryAttempts: 5 } };

        // Act
        const violations = await violationsOf(stack, ALL_POLICIES, config);

        // Assess
        assert.deepEqual(violations, [
            {
                policy: "stream-mapping-bounded-retries",
                resource: "orders-consumer-mapping",
                message: `${MAPPING} has [maximumRetryAttempts] 10, above the maximum 5`,
            },
        ]);
    });

    it("a raised threshold in the pack config lets a stack pass that the default rejects", async () => {
        // Prepare
        const stack = withChange(happyStack(), "orders-consumer-mapping", (i) => (i.maximumRecordAgeInSeconds = 86_400));
        const config = { "stream-mapping-bounded-record-age": { maximumRecordAgeInSeconds: 86_400 } };

        // Act
        const byDefault = await violationsOf(stack);
        const tuned = await violationsOf(stack, ALL_POLICIES, config);

        // Assess
        assert.deepEqual(
            byDefault.map((v) => v.policy),
            ["stream-mapping-bounded-record-age"],
        );
        assert.deepEqual(tuned, []);
    });

    it("a threshold tuned in code becomes the policy's default and its schema default", async () => {
        // Prepare
        const policies = hybridCounterPolicies({ "stream-mapping-bounded-retries": { maximumRetryAttempts: 5 } });
        const retries = policies.find((p) => p.name === "stream-mapping-bounded-retries");

        // Act
        const violations = await violationsOf(happyStack(), policies);

        // Assess
        assert.equal(retries?.configSchema?.properties.maximumRetryAttempts.default, 5);
        assert.deepEqual(violations, [
            {
                policy: "stream-mapping-bounded-retries",
                resource: "orders-consumer-mapping",
                message: `${MAPPING} has [maximumRetryAttempts] 10, above the maximum 5`,
            },
        ]);
    });

    it("a configured view type accepts a stream that carries those images and rejects one that does not", async () => {
        // Prepare
        const config = { "dynamodb-stream-view-type": { requiredViewType: "NEW_IMAGE" } };
        const newImage = withChange(happyStack(), "orders-table", (i) => (i.streamViewType = "NEW_IMAGE"));
        const oldImage = withChange(happyStack(), "orders-table", (i) => (i.streamViewType = "OLD_IMAGE"));

        // Act
        const accepted = await violationsOf(newImage, ALL_POLICIES, config);
        const rejected = await violationsOf(oldImage, ALL_POLICIES, config);

        // Assess
        assert.deepEqual(accepted, []);
        assert.deepEqual(rejected, [
            {
                policy: "dynamodb-stream-view-type",
                resource: "orders-table",
                message:
                    "table 'orders-table' feeds event source mapping 'orders-consumer-mapping' but [streamViewType] is \"OLD_IMAGE\"; the consumer needs a view type that carries NEW_IMAGE",
            },
        ]);
    });

    it("a policy disabled in the pack config reports nothing", async () => {
        // Prepare
        const stack = withChange(happyStack(), "orders-consumer-mapping", (i) => (i.startingPosition = "LATEST"));

        // Act
        const run = await runPolicies(ALL_POLICIES, stack, { config: { "stream-mapping-trim-horizon": "disabled" } });

        // Assess
        assert.deepEqual(run.violations, []);
        assert.equal(
            run.notApplicable.some((n) => n.policy === "stream-mapping-trim-horizon"),
            false,
        );
    });

    it("a policy disabled in code reports nothing, stays in the pack and can be enabled again by the pack config", async () => {
        // Prepare
        const stack = withChange(happyStack(), "orders-consumer-mapping", (i) => (i.startingPosition = "LATEST"));
        const policies = hybridCounterPolicies({ "stream-mapping-trim-horizon": "disabled" });

        // Act
        const disabled = await violationsOf(stack, policies);
        const reenabled = await runPolicies(policies, stack, { config: { "stream-mapping-trim-horizon": "mandatory" } });

        // Assess
        assert.equal(policies.find((p) => p.name === "stream-mapping-trim-horizon")?.enforcementLevel, "disabled");
        assert.deepEqual(disabled, []);
        assert.deepEqual(
            reenabled.violations.map((v) => [v.policy, v.level]),
            [["stream-mapping-trim-horizon", "mandatory"]],
        );
    });

    it("`all` sets every level, and a policy's own level wins over it", async () => {
        // Prepare
        const stack = withChange(happyStack(), "orders-consumer-mapping", (i) => {
            i.startingPosition = "LATEST";
            i.bisectBatchOnFunctionError = false;
        });
        const policies = hybridCounterPolicies({ all: "advisory", "stream-mapping-bisect-on-error": "mandatory" });

        // Act
        const run = await runPolicies(policies, stack);

        // Assess
        assert.deepEqual(
            run.violations.map((v) => [v.policy, v.level]),
            [
                ["stream-mapping-bisect-on-error", "mandatory"],
                ["stream-mapping-trim-horizon", "advisory"],
            ],
        );
    });

    it("the pack config raises a level awsguard-style", async () => {
        // Prepare
        const stack = withChange(happyStack(), "orders-consumer-iterator-age", (i) => (i.threshold = 50_000_000));

        // Act
        const byDefault = await runPolicies(ALL_POLICIES, stack);
        const raised = await runPolicies(ALL_POLICIES, stack, { config: { "stream-consumer-alarms": { enforcementLevel: "mandatory" } } });

        // Assess
        assert.deepEqual(
            byDefault.violations.map((v) => [v.policy, v.level]),
            [["stream-consumer-alarms", "advisory"]],
        );
        assert.deepEqual(
            raised.violations.map((v) => [v.policy, v.level]),
            [["stream-consumer-alarms", "mandatory"]],
        );
    });

    it("exemptResources skips the named resources only", async () => {
        // Prepare
        const stack = withChange(
            withChange(happyStack(), "orders-consumer-mapping", (i) => (i.startingPosition = "LATEST")),
            "orders-table",
            (i) => delete i.serverSideEncryption,
        );
        const config = {
            "stream-mapping-trim-horizon": { exemptResources: ["orders-consumer-mapping"] },
            "dynamodb-table-encryption": { exemptResources: ["other-table"] },
        };

        // Act
        const violations = await violationsOf(stack, ALL_POLICIES, config);

        // Assess
        assert.deepEqual(
            violations.map((v) => v.policy),
            ["dynamodb-table-encryption"],
        );
    });

    it("rejects invalid settings in code, naming every problem at once", () => {
        // Act
        const act = () =>
            hybridCounterPolicies({
                "stream-mapping-bounded-retries": { maximumRetryAttempts: -1 },
                "failure-queue-retention": { minimumRetentionSeconds: 2_000_000 },
                "stream-mapping-trim-horizon": { allowedStartingPositions: ["AT_TIMESTAMP"] },
                "dynamodb-table-encryption": "strict" as never,
                "no-such-policy": "mandatory",
            } as never);

        // Assess
        assert.throws(act, (e: unknown) => {
            assert.ok(e instanceof PolicyConfigError);
            assert.deepEqual(e.problems, [
                "[no-such-policy] is not a policy of this pack; policies are " + POLICY_NAMES.join(", "),
                "[dynamodb-table-encryption.enforcementLevel] must be one of advisory, mandatory, remediate, disabled",
                "[stream-mapping-bounded-retries.maximumRetryAttempts] must be at least 0",
                '[stream-mapping-trim-horizon.allowedStartingPositions] must be one of "TRIM_HORIZON", "LATEST"',
                "[failure-queue-retention.minimumRetentionSeconds] must be at most 1209600",
            ]);
            return true;
        });
    });
});

describe("policy pack: metadata", () => {
    it("ships these policies, in this order, at these levels", () => {
        // Assess
        assert.deepEqual(
            ALL_POLICIES.map((p) => [p.name, p.enforcementLevel]),
            [
                ["dynamodb-stream-view-type", "mandatory"],
                ["dynamodb-table-point-in-time-recovery", "advisory"],
                ["dynamodb-table-encryption", "advisory"],
                ["stream-mapping-bounded-retries", "mandatory"],
                ["stream-mapping-bounded-record-age", "mandatory"],
                ["stream-mapping-bisect-on-error", "advisory"],
                ["stream-mapping-report-batch-item-failures", "mandatory"],
                ["stream-mapping-on-failure-destination", "mandatory"],
                ["stream-mapping-trim-horizon", "mandatory"],
                ["stream-mapping-counter-parallelization", "mandatory"],
                ["stream-mapping-counter-tumbling-window", "mandatory"],
                ["counter-table-replicas", "mandatory"],
                ["counter-threshold-topic", "mandatory"],
                ["failure-queue-encryption", "mandatory"],
                ["failure-queue-retention", "mandatory"],
                ["stream-consumer-alarms", "advisory"],
                ["consumer-iam-no-wildcard-actions", "mandatory"],
                ["scheduled-function-guarded", "advisory"],
            ],
        );
    });

    it("ships these config defaults", () => {
        // Assess
        const defaults = Object.fromEntries(POLICY_NAMES.map((name) => [name, policyFactories[name].defaults]));
        assert.deepEqual(defaults, {
            "dynamodb-stream-view-type": { requiredViewType: "NEW_AND_OLD_IMAGES", exemptResources: [] },
            "dynamodb-table-point-in-time-recovery": { minimumRecoveryPeriodInDays: 35, exemptResources: [] },
            "dynamodb-table-encryption": { requireCustomerManagedKey: false, exemptResources: [] },
            "stream-mapping-bounded-retries": { maximumRetryAttempts: 10, exemptResources: [] },
            "stream-mapping-bounded-record-age": { maximumRecordAgeInSeconds: 43_200, exemptResources: [] },
            "stream-mapping-bisect-on-error": { exemptResources: [] },
            "stream-mapping-report-batch-item-failures": { exemptResources: [] },
            "stream-mapping-on-failure-destination": { allowedDestinationServices: ["sqs", "sns", "s3"], exemptResources: [] },
            "stream-mapping-trim-horizon": { allowedStartingPositions: ["TRIM_HORIZON"], exemptResources: [] },
            "stream-mapping-counter-parallelization": { exemptResources: [] },
            "stream-mapping-counter-tumbling-window": { exemptResources: [] },
            "counter-table-replicas": { exemptResources: [] },
            "counter-threshold-topic": { exemptResources: [] },
            "failure-queue-encryption": { exemptResources: [] },
            "failure-queue-retention": { minimumRetentionSeconds: 1_209_600, exemptResources: [] },
            "stream-consumer-alarms": {
                maximumIteratorAgeThresholdMs: 43_200_000,
                queueAlarmMetricNames: ["ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage", "NumberOfMessagesSent"],
                exemptResources: [],
            },
            "consumer-iam-no-wildcard-actions": {
                services: ["dynamodb", "sqs"],
                forbiddenManagedPolicies: ["AdministratorAccess", "PowerUserAccess", "AmazonDynamoDBFullAccess", "AmazonSQSFullAccess"],
                exemptResources: [],
            },
            "scheduled-function-guarded": { maximumScheduleMinutes: 1_440, exemptResources: [] },
        });
    });

    it("gives every policy a kebab-case name, a description of what goes wrong, remediation steps and a config schema with defaults", () => {
        for (const policy of ALL_POLICIES) {
            // Assess
            assert.match(policy.name, /^[a-z0-9]+(-[a-z0-9]+)*$/);
            assert.match(policy.description, /\. Without /, policy.name);
            assert.ok((policy.remediationSteps ?? "").length > 0, policy.name);
            const properties = policy.configSchema?.properties ?? {};
            assert.ok("exemptResources" in properties, policy.name);
            assert.equal("enforcementLevel" in properties, false, `${policy.name}: the engine reserves enforcementLevel`);
            for (const [key, schema] of Object.entries(properties)) {
                assert.notEqual(schema.default, undefined, `${policy.name}.${key} has no default`);
            }
        }
    });

    it("uses resource validation for tables and stack validation for everything that needs the graph", () => {
        // Assess
        const kinds = ALL_POLICIES.map((p) => [p.name, "validateStack" in p ? "stack" : "resource"]);
        assert.deepEqual(
            kinds.filter(([, kind]) => kind === "resource").map(([name]) => name),
            ["dynamodb-table-point-in-time-recovery", "dynamodb-table-encryption"],
        );
        const pitr = dynamodbTablePointInTimeRecovery() as ResourceValidationPolicy & { validateResource: { __pulumiType?: string } };
        assert.equal(pitr.validateResource.__pulumiType, "aws:dynamodb/table:Table");
        const retries: StackValidationPolicy = streamMappingBoundedRetries();
        assert.equal(typeof retries.validateStack, "function");
        assert.equal(typeof consumerIamNoWildcardActions().validateStack, "function");
    });
});

describe("policy pack: values unknown during preview", () => {
    it("the harness hands policies properties that throw on unknown values, as the engine does", () => {
        // Prepare
        const props = unknownCheckingProxy({ eventSourceArn: unknownValue.string }) as Record<string, unknown>;

        // Act and Assess
        assert.throws(() => props.eventSourceArn, UnknownValueError);
    });

    it("a mapping, table, queue, alarm and role policy whose every property is unknown crash nothing and report nothing", async () => {
        // Prepare
        const unknownAll = (inputs: Record<string, any>) => {
            for (const key of Object.keys(inputs)) {
                inputs[key] =
                    typeof inputs[key] === "object"
                        ? unknownValue.object
                        : typeof inputs[key] === "number"
                          ? unknownValue.number
                          : unknownValue.string;
            }
        };
        let stack = happyStack();
        for (const name of [
            "orders-table",
            "orders-dlq",
            "orders-fatal-dlq",
            "orders-consumer-mapping",
            "orders-consumer-iterator-age",
            "orders-consumer-policy",
            "orders-consumer-role",
        ]) {
            stack = withChange(stack, name, unknownAll);
        }

        // Act
        const run = await runPolicies(ALL_POLICIES, stack);

        // Assess
        assert.deepEqual(run.unknownValueErrors, []);
        assert.deepEqual(run.violations, []);
    });

    it("nested unknowns (an unknown PITR flag, an unknown on-failure ARN, an unknown statement) crash nothing", async () => {
        // Prepare
        let stack = withChange(happyStack(), "orders-table", (i) => (i.pointInTimeRecovery = { enabled: unknownValue.boolean }));
        stack = withChange(
            stack,
            "orders-consumer-mapping",
            (i) => (i.destinationConfig = { onFailure: { destinationArn: unknownValue.string } }),
        );
        stack = withChange(
            stack,
            "orders-consumer-role",
            (i) => (i.inlinePolicies = [{ name: "x", policy: { Version: "2012-10-17", Statement: unknownValue.array } }]),
        );

        // Act
        const run = await runPolicies(ALL_POLICIES, stack);

        // Assess
        assert.deepEqual(run.unknownValueErrors, []);
        assert.deepEqual(run.violations, []);
    });

    it("still recognises a stream mapping through its dependency on the table when its ARN is unknown", async () => {
        // Prepare
        const stack = withChange(asPreview(happyStack()), "orders-consumer-mapping", (i) => (i.startingPosition = "LATEST"));

        // Act
        const violations = await violationsOf(stack);

        // Assess
        assert.deepEqual(violations, [
            {
                policy: "stream-mapping-trim-horizon",
                resource: "orders-consumer-mapping",
                message: `${MAPPING} has [startingPosition] "LATEST"; it must be one of TRIM_HORIZON`,
            },
        ]);
    });

    it("does not take a queue mapping with an unknown ARN for a stream mapping", async () => {
        // Prepare: the redrive mapping reads the first DLQ and sets none of the stream settings.
        const stack = asPreview(happyStack());
        const redrive = stack.find((r) => r.name === "orders-redrive-mapping");

        // Act
        const violations = await violationsOf(stack);

        // Assess
        assert.equal(redrive?.inputs.eventSourceArn, unknownValue.string);
        assert.equal(redrive?.inputs.startingPosition, undefined);
        assert.deepEqual(violations, []);
    });
});

describe("policy pack: dependencies", () => {
    it("falls back to plain dependencies when the engine sends no property dependencies", async () => {
        // Prepare
        const flat = (stack: RecordedResource[]): RecordedResource[] =>
            stack.map((r) => ({ ...r, dependencies: Object.values(r.propertyDependencies ?? {}).flat(), propertyDependencies: {} }));
        const happy = flat(asPreview(happyStack()));
        const latest = flat(withChange(asPreview(happyStack()), "orders-consumer-mapping", (i) => (i.startingPosition = "LATEST")));

        // Act
        const passes = await runPolicies(ALL_POLICIES, happy);
        const fails = await violationsOf(latest);

        // Assess
        assert.deepEqual(passes.violations, []);
        assert.deepEqual(passes.notApplicable, []);
        assert.deepEqual(
            fails.map((v) => v.policy),
            ["stream-mapping-trim-horizon"],
        );
    });

    it("matches alarms by dependency, not by equal names: an alarm on a queue name typed by hand does not count", async () => {
        // Prepare
        const stack = withChange(happyStack(), "orders-dlq-depth", (_i, deps) => delete deps.dimensions);

        // Act
        const violations = await violationsOf(stack);

        // Assess
        assert.deepEqual(
            violations.map((v) => [v.policy, v.resource]),
            [["stream-consumer-alarms", "orders-consumer-mapping"]],
        );
    });

    it("marks every stack policy not applicable to a stack without stream mappings", async () => {
        // Prepare
        const stack = without(
            happyStack(),
            "orders-consumer-mapping",
            "orders-redrive-mapping",
            "orders-dlq",
            "orders-fatal-dlq",
            "orders-dlq-depth",
        );

        // Act
        const run = await runPolicies(ALL_POLICIES, stack);

        // Assess
        assert.deepEqual(run.violations, []);
        assert.deepEqual(
            run.notApplicable.map((n) => n.policy),
            [
                "dynamodb-stream-view-type",
                "stream-mapping-bounded-retries",
                "stream-mapping-bounded-record-age",
                "stream-mapping-bisect-on-error",
                "stream-mapping-report-batch-item-failures",
                "stream-mapping-on-failure-destination",
                "stream-mapping-trim-horizon",
                "stream-mapping-counter-parallelization",
                "stream-mapping-counter-tumbling-window",
                "counter-table-replicas",
                "failure-queue-encryption",
                "failure-queue-retention",
                "stream-consumer-alarms",
                "consumer-iam-no-wildcard-actions",
            ],
        );
    });
});
