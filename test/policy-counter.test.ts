/**
 * The policies on what a hybrid counter's own consumer needs, against a hand-written counter: its table, its consumer
 * (named by the counter's environment variables) with its role, the mapping between them, and its threshold topic.
 * Each case changes one property: the mapping's parallelizationFactor or tumblingWindowInSeconds, the topic's
 * encryption, the grant of the consumer's role.
 */
import * as assert from "node:assert/strict";
import type * as aws from "@pulumi/aws";
import type { Unwrap } from "@pulumi/pulumi";
import { unknownCheckingProxy, type PolicyResource } from "@pulumi/policy";

import {
    COUNTER_CONSUMER_VARIABLE,
    COUNTER_SHARDS_MAX,
    COUNTER_SHARDS_VARIABLE,
    counterShardsOf,
    counterThresholdTopic,
    streamMappingCounterParallelization,
    streamMappingCounterTumblingWindow,
    TYPES,
} from "../policy/index";
import { RecordedResource, runPolicies, unknownValue, withChange } from "./support/policy-harness";
import { COUNTER_SHARDS_MAX as RUNTIME_COUNTER_SHARDS_MAX, ENV } from "../runtime/shared/config";

const ACCOUNT = "123456789012";
const REGION = "eu-west-1";
const TABLE_ARN = `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/orders`;
const STREAM_ARN = `${TABLE_ARN}/stream/2026-01-01T00:00:00.000`;
const TOPIC_ARN = `arn:aws:sns:${REGION}:${ACCOUNT}:orders-thresholds`;
/** The variable a counter's function reads its threshold topic from (runtime/shared/config.ts). */
const TOPIC_VARIABLE = ENV.thresholdTopicArn;

type Inputs<T> = Unwrap<T> & Record<string, unknown>;

function resource<T>(type: string, name: string, inputs: Inputs<T>, propertyDependencies: Record<string, string[]> = {}): RecordedResource {
    return { type, name, inputs, propertyDependencies };
}

function document(...statements: object[]): string {
    return JSON.stringify({ Version: "2012-10-17", Statement: statements });
}

/** A counter's consumer as the component deploys it, reduced to what these policies read. */
function happyStack(): RecordedResource[] {
    return [
        resource<aws.dynamodb.TableArgs>(TYPES.table, "orders-table", {
            name: "orders",
            hashKey: "pk",
            rangeKey: "sk",
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
        }),
        resource<aws.sns.TopicArgs>(TYPES.topic, "orders-thresholds", { name: "orders-thresholds", kmsMasterKeyId: "alias/aws/sns" }),
        resource<aws.iam.RoleArgs>(TYPES.role, "orders-consumer-role", { name: "orders-consumer-role", assumeRolePolicy: "{}" }),
        resource<aws.iam.RolePolicyArgs>(
            TYPES.rolePolicy,
            "orders-consumer-policy",
            {
                role: "orders-consumer-role",
                policy: document(
                    { Effect: "Allow", Action: ["dynamodb:GetShardIterator", "dynamodb:GetRecords"], Resource: STREAM_ARN },
                    { Effect: "Allow", Action: "sns:Publish", Resource: TOPIC_ARN },
                ),
            },
            { role: ["orders-consumer-role"], policy: ["orders-table", "orders-thresholds"] },
        ),
        resource<aws.lambda.FunctionArgs>(
            TYPES.function,
            "orders-consumer",
            {
                name: "orders-consumer",
                role: `arn:aws:iam::${ACCOUNT}:role/orders-consumer-role`,
                runtime: "nodejs22.x",
                handler: "index.handler",
                environment: { variables: { [COUNTER_CONSUMER_VARIABLE]: "orders", [TOPIC_VARIABLE]: TOPIC_ARN } },
            },
            { role: ["orders-consumer-role"], environment: ["orders-thresholds"] },
        ),
        resource<aws.lambda.EventSourceMappingArgs>(
            TYPES.eventSourceMapping,
            "orders-consumer-mapping",
            {
                eventSourceArn: STREAM_ARN,
                functionName: `arn:aws:lambda:${REGION}:${ACCOUNT}:function:orders-consumer`,
                startingPosition: "TRIM_HORIZON",
                tumblingWindowInSeconds: 900,
            },
            { eventSourceArn: ["orders-table"], functionName: ["orders-consumer"] },
        ),
    ];
}

describe("policy pack: a counter's consumer, one batch per stream shard at a time", () => {
    const consumerRun = (stack: RecordedResource[]) => runPolicies([streamMappingCounterParallelization()], stack);
    const violation = (factor: number) => ({
        policy: "stream-mapping-counter-parallelization",
        resource: "orders-consumer-mapping",
        message:
            `event source mapping 'orders-consumer-mapping' (DynamoDB stream) invokes the counter's consumer 'orders-consumer' with [parallelizationFactor] ${factor}; ` +
            "the consumer's marks need the batches of one stream shard applied one at a time: set it to 1",
        level: "mandatory",
    });

    it("passes Lambda's default and an explicit factor of 1", async () => {
        // Prepare
        const explicit = withChange(happyStack(), "orders-consumer-mapping", (i) => (i.parallelizationFactor = 1));

        // Act
        const byDefault = await consumerRun(happyStack());
        const one = await consumerRun(explicit);

        // Assess
        assert.deepEqual([byDefault.violations, byDefault.notApplicable], [[], []]);
        assert.deepEqual([one.violations, one.notApplicable], [[], []]);
    });

    it("reports every factor above 1, whatever the counter's shards", async () => {
        // Act
        const two = await consumerRun(withChange(happyStack(), "orders-consumer-mapping", (i) => (i.parallelizationFactor = 2)));
        const tenOverSixteenShards = await consumerRun(
            withChange(
                withChange(happyStack(), "orders-consumer-mapping", (i) => (i.parallelizationFactor = 10)),
                "orders-consumer",
                (i) => (i.environment.variables[COUNTER_SHARDS_VARIABLE] = "16"),
            ),
        );

        // Assess
        assert.deepEqual(two.violations, [violation(2)]);
        assert.deepEqual(tenOverSixteenShards.violations, [violation(10)]);
    });

    it("leaves a stream consumer that is not a counter's alone, whatever its factor", async () => {
        // Prepare
        let stack = withChange(happyStack(), "orders-consumer", (i) => delete i.environment);
        stack = withChange(stack, "orders-consumer-mapping", (i) => (i.parallelizationFactor = 10));

        // Act
        const run = await consumerRun(stack);

        // Assess
        assert.deepEqual(run.violations, []);
        assert.deepEqual(run.notApplicable, [
            {
                policy: "stream-mapping-counter-parallelization",
                reason: "no event source mapping in this stack invokes a hybrid counter's consumer",
            },
        ]);
    });

    it("checks during the update a consumer whose environment, or a factor that, is unknown during preview", async () => {
        // Prepare
        const unknownEnvironment = withChange(
            withChange(happyStack(), "orders-consumer", (i) => (i.environment = { variables: unknownValue.object })),
            "orders-consumer-mapping",
            (i) => (i.parallelizationFactor = 4),
        );
        const unknownFactor = withChange(happyStack(), "orders-consumer-mapping", (i) => (i.parallelizationFactor = unknownValue.number));

        // Act
        const environment = await consumerRun(unknownEnvironment);
        const factor = await consumerRun(unknownFactor);

        // Assess
        for (const run of [environment, factor]) {
            assert.deepEqual(run.violations, []);
            assert.deepEqual(run.unknownValueErrors, []);
            assert.deepEqual(run.notApplicable, []);
        }
    });

    it("knows a counter's consumer and its shard count by the variables the runtime reads them from", () => {
        // Prepare
        const consumer = (variables: Record<string, unknown>) =>
            ({ props: unknownCheckingProxy({ environment: { variables } }) }) as unknown as PolicyResource;

        // Assess
        assert.equal(COUNTER_CONSUMER_VARIABLE, ENV.tableName);
        assert.equal(COUNTER_SHARDS_VARIABLE, ENV.counterShards);
        assert.equal(COUNTER_SHARDS_MAX, RUNTIME_COUNTER_SHARDS_MAX);
        assert.deepEqual(counterShardsOf(consumer({})), { value: undefined, counterShards: 1 });
        assert.deepEqual(counterShardsOf(consumer({ [COUNTER_SHARDS_VARIABLE]: "4" })), { value: "4", counterShards: 4 });
        assert.deepEqual(counterShardsOf(consumer({ [COUNTER_SHARDS_VARIABLE]: "17" })), { value: "17", counterShards: undefined });
    });
});

describe("policy pack: a counter's mapping and its tumbling window", () => {
    const windowRun = (window: unknown) =>
        runPolicies(
            [streamMappingCounterTumblingWindow()],
            withChange(happyStack(), "orders-consumer-mapping", (i) => (i.tumblingWindowInSeconds = window)),
        );
    const violation = (shown: string) => ({
        policy: "stream-mapping-counter-tumbling-window",
        resource: "orders-consumer-mapping",
        message:
            `event source mapping 'orders-consumer-mapping' (DynamoDB stream) invokes the counter's consumer 'orders-consumer' with [tumblingWindowInSeconds] ${shown}; ` +
            "the event names its stream shard, which the consumer's marks are keyed by, only with a tumbling window: set it between 1 and 900",
        level: "mandatory",
    });

    it("passes a window of 1 s and of 900 s, the component's", async () => {
        // Act
        const runs = [await windowRun(1), await windowRun(900)];

        // Assess
        for (const run of runs) {
            assert.deepEqual([run.violations, run.notApplicable, run.unknownValueErrors], [[], [], []]);
        }
    });

    it("reports no window (0, Lambda's default) and a window Lambda refuses", async () => {
        // Act
        const runs = await Promise.all([0, 901, 1.5].map((window) => windowRun(window)));

        // Assess
        assert.deepEqual(
            runs.map((run) => run.violations),
            [[violation("0")], [violation("901")], [violation("1.5")]],
        );
    });

    it("leaves a stream consumer that is not a counter's alone, and checks an unknown window during the update", async () => {
        // Act
        const other = await runPolicies(
            [streamMappingCounterTumblingWindow()],
            withChange(
                withChange(happyStack(), "orders-consumer", (i) => delete i.environment),
                "orders-consumer-mapping",
                (i) => delete i.tumblingWindowInSeconds,
            ),
        );
        const unknown = await windowRun(unknownValue.number);

        // Assess
        assert.deepEqual(other.violations, []);
        assert.deepEqual([unknown.violations, unknown.notApplicable, unknown.unknownValueErrors], [[], [], []]);
    });
});

describe("policy pack: a counter's threshold topic", () => {
    const topicRun = (stack: RecordedResource[]) => runPolicies([counterThresholdTopic()], stack);
    const EXTERNAL = `arn:aws:sns:${REGION}:${ACCOUNT}:limits-elsewhere`;
    /** The happy stack, its consumer sending to a topic of another stack, its role granted `resource`. */
    const external = (resource: string) =>
        withChange(
            withChange(happyStack(), "orders-consumer", (i, deps) => {
                i.environment.variables[TOPIC_VARIABLE] = EXTERNAL;
                delete deps.environment;
            }),
            "orders-consumer-policy",
            (i) => {
                const doc = JSON.parse(i.policy as string) as { Statement: Array<{ Action: unknown; Resource: unknown }> };
                doc.Statement = doc.Statement.map((st) => (st.Action === "sns:Publish" ? { ...st, Resource: resource } : st));
                i.policy = JSON.stringify(doc);
            },
        );

    it("passes a topic of another stack when the role may publish there, by its ARN or a pattern", async () => {
        // Act
        const runs = [await topicRun(external(EXTERNAL)), await topicRun(external(`arn:aws:sns:${REGION}:${ACCOUNT}:limits-*`))];

        // Assess
        for (const run of runs) {
            assert.deepEqual([run.violations, run.notApplicable, run.unknownValueErrors], [[], [], []]);
        }
    });

    it("reports a role granted another topic than the one the function names", async () => {
        // Act
        const run = await topicRun(external(TOPIC_ARN));

        // Assess
        assert.deepEqual(run.violations, [
            {
                policy: "counter-threshold-topic",
                resource: "orders-consumer",
                message:
                    `function 'orders-consumer' sends threshold events to ${EXTERNAL} ([HYBRID_COUNTER_THRESHOLD_TOPIC_ARN]), but no policy of its role ` +
                    "allows sns:Publish there: the events would never be sent",
                level: "mandatory",
            },
        ]);
    });

    it("checks during the update a role whose policy is unknown during preview", async () => {
        // Act
        const run = await topicRun(withChange(happyStack(), "orders-consumer-policy", (i) => (i.policy = unknownValue.string)));

        // Assess
        assert.deepEqual([run.violations, run.notApplicable, run.unknownValueErrors], [[], [], []]);
    });

    it("does not apply to a stack whose counter's functions name no topic", async () => {
        // Act
        const run = await topicRun(withChange(happyStack(), "orders-consumer", (i) => delete i.environment.variables[TOPIC_VARIABLE]));

        // Assess
        assert.deepEqual(run.violations, []);
        assert.deepEqual(run.notApplicable, [
            { policy: "counter-threshold-topic", reason: "no hybrid counter's function in this stack names a threshold topic" },
        ]);
    });

    it("knows the topic by the variable the runtime reads it from", () => {
        // Assess
        assert.equal(TOPIC_VARIABLE, "HYBRID_COUNTER_THRESHOLD_TOPIC_ARN");
    });
});
