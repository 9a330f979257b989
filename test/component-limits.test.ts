/**
 * HybridCounterComponent's limits args under Pulumi mocks: the threshold topic (created, or passed) and the
 * functions allowed to publish to it, the thresholds and the usage retention in the functions' environments, and the
 * mode and the ledger period in every function's.
 */
import * as assert from "node:assert/strict";
import { HybridCounterComponent, type HybridCounterComponentArgs } from "../index";
import { findResource, outputValue, resourcesOfType, runProgramWithResult, type RecordedResource } from "../local/deployment/pulumi-mocks";

const ACCOUNT = "123456789012";
const FATAL_DLQ_URL = `https://sqs.us-east-1.amazonaws.com/${ACCOUNT}/orders-fatal-dlq`;

function run(args: HybridCounterComponentArgs = {}) {
    return runProgramWithResult(() => new HybridCounterComponent("orders", args));
}

type Statement = { Sid: string; Effect: string; Action: string[]; Resource?: unknown };

function policyOf(resource: RecordedResource): { Statement: Statement[] } {
    return JSON.parse(resource.inputs.policy as string);
}

/** The statements of a role's policy without a topic (the default args), in the run of `resources`. */
let defaults: RecordedResource[];
const defaultStatements = (fn: string) => policyOf(findResource(defaults, "aws:iam/rolePolicy:RolePolicy", `${fn}-policy`)).Statement;

/** `statements` with `publish` inserted before the log statement, where the component puts it. */
function withPublish(statements: Statement[], publish: object[]): object[] {
    const logs = statements.findIndex((st) => st.Sid === "WriteOwnLogs");
    return [...statements.slice(0, logs), ...publish, ...statements.slice(logs)];
}

/** The consumer's and the redrive's environment for the default args. */
const HANDLER_ENVIRONMENT = {
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
    HYBRID_COUNTER_FATAL_QUEUE_URL: FATAL_DLQ_URL,
    HYBRID_COUNTER_METRICS_NAMESPACE: "HybridCounter",
    HYBRID_COUNTER_THRESHOLDS: "0.8,1",
    HYBRID_COUNTER_USAGE_RETENTION_DAYS: "90",
};

describe("HybridCounterComponent threshold events and usage history", () => {
    before(async () => {
        defaults = (await run()).resources;
    });

    it("creates an encrypted threshold topic on request, names it to the consumer, the redrive and the settler, and lets each publish there only", async () => {
        // Act
        const { resources, result } = await run({ createThresholdTopic: true });

        // Assess
        const topicArn = `arn:aws:sns:us-east-1:${ACCOUNT}:orders-thresholds`;
        assert.deepEqual(findResource(resources, "aws:sns/topic:Topic", "orders-thresholds").inputs, { kmsMasterKeyId: "alias/aws/sns" });
        assert.deepEqual(
            resourcesOfType(resources, "aws:sns/topic:Topic").map((t) => t.name),
            ["orders-thresholds"],
        );
        assert.equal(await outputValue(result.thresholdTopicArn), topicArn);
        const publish = [{ Sid: "PublishThresholdEvents", Effect: "Allow", Action: ["sns:Publish"], Resource: topicArn }];
        for (const fn of ["orders-consumer", "orders-redrive", "orders-settler"]) {
            assert.deepEqual(
                policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", `${fn}-policy`)).Statement,
                withPublish(defaultStatements(fn), publish),
                fn,
            );
        }
        for (const fn of ["orders-consumer", "orders-redrive", "orders-settler"]) {
            assert.equal(
                findResource(resources, "aws:lambda/function:Function", fn).inputs.environment.variables.HYBRID_COUNTER_THRESHOLD_TOPIC_ARN,
                topicArn,
                fn,
            );
        }
        assert.equal(resources.length, 34);
    });

    it("sends threshold events to a topic the user passes, creating none; without a topic no function may publish", async () => {
        // Prepare
        const topicArn = `arn:aws:sns:us-east-1:${ACCOUNT}:limits`;

        // Act
        const given = await run({ thresholdTopicArn: topicArn });
        const none = await run();

        // Assess
        assert.deepEqual(resourcesOfType(given.resources, "aws:sns/topic:Topic"), []);
        assert.equal(await outputValue(given.result.thresholdTopicArn), topicArn);
        for (const fn of ["orders-consumer", "orders-redrive", "orders-settler"]) {
            assert.equal(
                findResource(given.resources, "aws:lambda/function:Function", fn).inputs.environment.variables
                    .HYBRID_COUNTER_THRESHOLD_TOPIC_ARN,
                topicArn,
                fn,
            );
            const publish = policyOf(findResource(given.resources, "aws:iam/rolePolicy:RolePolicy", `${fn}-policy`)).Statement.filter(
                (st) => st.Sid === "PublishThresholdEvents",
            );
            assert.deepEqual(
                publish.map((st) => st.Resource),
                [topicArn],
                fn,
            );
            assert.equal(
                "HYBRID_COUNTER_THRESHOLD_TOPIC_ARN" in
                    findResource(none.resources, "aws:lambda/function:Function", fn).inputs.environment.variables,
                false,
                fn,
            );
        }
        const actions = resourcesOfType(none.resources, "aws:iam/rolePolicy:RolePolicy").flatMap((r) =>
            policyOf(r).Statement.flatMap((st) => st.Action),
        );
        assert.equal(actions.filter((a) => a.startsWith("sns:")).length, 0);
    });

    it("gives the consumer and the redrive the thresholds and the usage retention, and every function the mode and the period", async () => {
        // Act
        const { resources, result } = await run({
            thresholds: [0.5, 0.9, 1],
            usageRetentionDays: 30,
            counterMode: "strict",
            healQuietWindowSeconds: 900,
            backfillOnDeploy: true,
        });

        // Assess
        const variables = (fn: string) => findResource(resources, "aws:lambda/function:Function", fn).inputs.environment.variables;
        for (const fn of ["orders-consumer", "orders-redrive"]) {
            assert.deepEqual(variables(fn), {
                ...HANDLER_ENVIRONMENT,
                HYBRID_COUNTER_MODE: "strict",
                HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS: "900",
                HYBRID_COUNTER_THRESHOLDS: "0.5,0.9,1",
                HYBRID_COUNTER_USAGE_RETENTION_DAYS: "30",
            });
        }
        for (const fn of ["orders-settler", "orders-backfill"]) {
            assert.deepEqual(
                [variables(fn).HYBRID_COUNTER_MODE, variables(fn).HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS],
                ["strict", "900"],
                fn,
            );
        }
        assert.deepEqual(
            [await outputValue(result.thresholds), await outputValue(result.usageRetentionDays)],
            [[0.5, 0.9, 1], 30],
            "the outputs fatal replay reads",
        );
    });
});
