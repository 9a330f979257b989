import * as assert from "node:assert/strict";
import { HybridCounterComponent, type HybridCounterComponentArgs } from "../index";
import { findResource, resourcesOfType, runProgram, type RecordedResource } from "../local/deployment/pulumi-mocks";

const ACCOUNT = "123456789012";
const TABLE_ARN = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders-table`;
const COUNTERS_TABLE_ARN = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders-counters`;
const SETTLER_ARN = `arn:aws:lambda:us-east-1:${ACCOUNT}:function:orders-settler`;
const RULE_ARN = `arn:aws:events:us-east-1:${ACCOUNT}:rule/orders-settler-schedule`;

const run = (args: HybridCounterComponentArgs = {}) => runProgram(() => new HybridCounterComponent("orders", args));

describe("HybridCounterComponent settler", () => {
    let resources: RecordedResource[];
    const get = (type: string, name: string) => findResource(resources, type, name);

    before(async () => {
        resources = await run();
    });

    it("grants the settler exactly its calls: the heal index, the counters table, the user's table and its log group", () => {
        // Assess
        const policy = JSON.parse(get("aws:iam/rolePolicy:RolePolicy", "orders-settler-policy").inputs.policy as string);
        assert.deepEqual(policy, {
            Version: "2012-10-17",
            Statement: [
                { Sid: "QueryHealIndex", Effect: "Allow", Action: ["dynamodb:Query"], Resource: `${COUNTERS_TABLE_ARN}/index/heal-index` },
                {
                    Sid: "HealAndAudit",
                    Effect: "Allow",
                    Action: ["dynamodb:Query", "dynamodb:Scan", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                    Resource: COUNTERS_TABLE_ARN,
                },
                {
                    Sid: "ReadItemsAndRemoveTombstones",
                    Effect: "Allow",
                    Action: ["dynamodb:Query", "dynamodb:DeleteItem"],
                    Resource: TABLE_ARN,
                },
                {
                    Sid: "WriteOwnLogs",
                    Effect: "Allow",
                    Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
                    Resource: `arn:aws:logs:us-east-1:${ACCOUNT}:log-group:orders-settler-logs:*`,
                },
            ],
        });
        const role = get("aws:iam/role:Role", "orders-settler-role");
        assert.deepEqual(JSON.parse(role.inputs.assumeRolePolicy as string).Statement[0].Principal, { Service: "lambda.amazonaws.com" });
    });

    it("deploys the settler bundle with the counter's configuration, the key budget and the audit page in its environment", () => {
        // Assess
        const fn = get("aws:lambda/function:Function", "orders-settler");
        assert.equal(fn.inputs.handler, "index.handler");
        assert.equal(fn.inputs.runtime, "nodejs22.x");
        assert.deepEqual(fn.inputs.architectures, ["arm64"]);
        assert.equal(fn.inputs.role, `arn:aws:iam::${ACCOUNT}:role/orders-settler-role`);
        assert.deepEqual(fn.inputs.loggingConfig, { logFormat: "Text", logGroup: "orders-settler-logs" });
        assert.deepEqual(fn.inputs.environment.variables, {
            HYBRID_COUNTER_TABLE_NAME: "orders-table",
            HYBRID_COUNTER_COUNTERS_TABLE_NAME: "orders-counters",
            HYBRID_COUNTER_COUNTED_ITEMS: "client",
            HYBRID_COUNTER_PARTITION_KEY: "pk",
            HYBRID_COUNTER_SORT_KEY: "sk",
            HYBRID_COUNTER_DELETED_ATTRIBUTE: "deleted",
            HYBRID_COUNTER_TOKEN_ATTRIBUTE: "counter_token",
            HYBRID_COUNTER_PREFIX: "#counter#",
            HYBRID_COUNTER_COUNT_ATTRIBUTE: "count",
            HYBRID_COUNTER_METRICS_NAMESPACE: "HybridCounter",
            HYBRID_COUNTER_MODE: "utilization",
            HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS: "600",
            HYBRID_COUNTER_SETTLER_KEY_BUDGET: "200",
            HYBRID_COUNTER_SETTLER_AUDIT_ITEMS: "100",
        });
        const order = fn.dependencies.map((urn) => urn.split("::").at(-1)).sort();
        // Explicit dependsOn (log group, policy) plus input dependencies (role, both tables).
        assert.deepEqual(order, ["orders-counters", "orders-settler-logs", "orders-settler-policy", "orders-settler-role", "orders-table"]);
    });

    it("invokes the settler on its schedule: a rule, a target, and a permission for that rule only", () => {
        // Assess
        assert.equal(get("aws:cloudwatch/eventRule:EventRule", "orders-settler-schedule").inputs.scheduleExpression, "rate(5 minutes)");
        const target = get("aws:cloudwatch/eventTarget:EventTarget", "orders-settler-target");
        assert.deepEqual(target.inputs, { rule: "orders-settler-schedule", arn: SETTLER_ARN });
        assert.deepEqual(get("aws:lambda/permission:Permission", "orders-settler-invoke").inputs, {
            action: "lambda:InvokeFunction",
            function: "orders-settler",
            principal: "events.amazonaws.com",
            sourceArn: RULE_ARN,
        });
    });

    it("alarms on the settler's errors", () => {
        // Assess
        const alarm = get("aws:cloudwatch/metricAlarm:MetricAlarm", "orders-settler-errors");
        assert.deepEqual(
            [alarm.inputs.namespace, alarm.inputs.metricName, alarm.inputs.dimensions, alarm.inputs.statistic, alarm.inputs.threshold],
            ["AWS/Lambda", "Errors", { FunctionName: "orders-settler" }, "Sum", 1],
        );
        assert.equal(alarm.inputs.comparisonOperator, "GreaterThanOrEqualToThreshold");
    });

    it("passes the schedule, ledger period, mode, budget and timeout through", async () => {
        // Act
        const custom = await run({
            settlerSchedule: "rate(1 hour)",
            healQuietWindowSeconds: 900,
            counterMode: "strict",
            settlerKeyBudget: 50,
            settlerTimeout: 60,
        });

        // Assess
        assert.equal(
            findResource(custom, "aws:cloudwatch/eventRule:EventRule", "orders-settler-schedule").inputs.scheduleExpression,
            "rate(1 hour)",
        );
        const fn = findResource(custom, "aws:lambda/function:Function", "orders-settler");
        assert.equal(fn.inputs.timeout, 60);
        const env = fn.inputs.environment.variables;
        assert.deepEqual(
            [env.HYBRID_COUNTER_MODE, env.HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS, env.HYBRID_COUNTER_SETTLER_KEY_BUDGET],
            ["strict", "900", "50"],
        );
    });

    it("lets the settler publish the events the consumer could not send to the threshold topic, and names it", async () => {
        // Act
        const topicArn = `arn:aws:sns:us-east-1:${ACCOUNT}:limits`;
        const custom = await run({ thresholdTopicArn: topicArn });

        // Assess
        const policy = JSON.parse(findResource(custom, "aws:iam/rolePolicy:RolePolicy", "orders-settler-policy").inputs.policy as string);
        assert.deepEqual(
            policy.Statement.map((st: { Sid: string }) => st.Sid),
            ["QueryHealIndex", "HealAndAudit", "ReadItemsAndRemoveTombstones", "PublishThresholdEvents", "WriteOwnLogs"],
        );
        assert.deepEqual(policy.Statement[3], {
            Sid: "PublishThresholdEvents",
            Effect: "Allow",
            Action: ["sns:Publish"],
            Resource: topicArn,
        });
        assert.equal(
            findResource(custom, "aws:lambda/function:Function", "orders-settler").inputs.environment.variables
                .HYBRID_COUNTER_THRESHOLD_TOPIC_ARN,
            topicArn,
        );
    });

    it("creates no settler resource when settlerEnabled is false, and no settler widgets", async () => {
        // Act
        const off = await run({ settlerEnabled: false });

        // Assess
        assert.deepEqual(
            off.filter((r) => r.name.startsWith("orders-settler")).map((r) => r.name),
            [],
        );
        assert.equal(off.length, 25);
        const body = JSON.parse(findResource(off, "aws:cloudwatch/dashboard:Dashboard", "orders-dashboard").inputs.dashboardBody as string);
        assert.equal(body.widgets.length, 13);
        assert.equal(resourcesOfType(off, "aws:cloudwatch/metricAlarm:MetricAlarm").length, 7);
    });
});
