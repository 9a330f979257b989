/**
 * The backfill on deploy: the handler continues a run across invocations on DynamoDB Local, flagging every live item
 * the selection counts and listing its key for a heal, and the component creates the function, its least-privilege
 * role and the one invocation that starts it.
 */
import { strict as assert } from "node:assert";
import { GetItemCommand, ScanCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { HybridCounterArgsError, HybridCounterComponent, type HybridCounterComponentArgs } from "../index";
import { backfillPolicy } from "../components/backfill";
import { lambdaContext } from "../local/aws/lambda-context";
import { findResource, outputValue, resourcesOfType, runProgramWithResult } from "../local/deployment/pulumi-mocks";
import { SEEDED_SELECTION, createCountersTable, seedItems, writeItems } from "../local/harness/seed";
import { createCounterTable } from "../local/engine/table";
import { BACKFILL_ENV, backfillEnvironment, backfillFromEnv } from "../runtime/backfill/env";
import { createBackfillHandler, type BackfillEvent, type BackfillHandlerResult } from "../runtime/backfill/handler";
import { COUNTED_ATTRIBUTE, DEFAULT_LAYOUT, countingGeneration, type CounterConfig } from "../runtime/shared/config";
import { eventualKey } from "../runtime/shared/keys";
import { HEAL_DUE, HEAL_PARTITION } from "../runtime/heal/index-marks";
import { useEngine } from "./support/engine";

const ACCOUNT = "123456789012";
const TABLE_ARN = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders-table`;
const FUNCTION_ARN = `arn:aws:lambda:us-east-1:${ACCOUNT}:function:orders-backfill`;

describe("backfill Lambda handler on DynamoDB Local", function () {
    const engine = useEngine();

    it("runs within each invocation's budget and continues itself with the run id until the run is complete", async () => {
        // Prepare
        const dynamodb = engine().dynamodb();
        const config: CounterConfig = {
            ...DEFAULT_LAYOUT,
            selection: SEEDED_SELECTION,
            tableName: "lambda-user",
            countersTableName: "lambda-counters",
            mode: "utilization",
            periodMs: 600_000,
        };
        await createCounterTable(dynamodb, config.tableName);
        await createCountersTable(dynamodb, config.countersTableName, DEFAULT_LAYOUT, { healIndex: true });
        const seed = seedItems({ items: 1_500, keys: 5, seed: 21 });
        await writeItems(dynamodb, config.tableName, seed.items);
        const env = backfillEnvironment(config, { segments: 2, writeUnitsPerSecond: 1_500 });
        const queued: Array<{ arn: string; event: BackfillEvent }> = [];
        const handler = createBackfillHandler({
            ...backfillFromEnv(env),
            dynamodb,
            reinvoke: async (arn, event) => {
                queued.push({ arn, event });
            },
            marginMs: 0,
            sink: () => undefined,
        });

        // Act: the deployment's synchronous "start", then every asynchronous invocation it leads to.
        const started = await handler({ action: "start", runId: "deploy-1" }, lambdaContext("orders-backfill", 30_000));
        const results: BackfillHandlerResult[] = [];
        for (let next = queued.shift(); next !== undefined; next = queued.shift()) {
            assert.equal(next.arn, "arn:aws:lambda:ddblocal:000000000000:function:orders-backfill");
            results.push(await handler(next.event, lambdaContext("orders-backfill", 400)));
        }

        // Assess
        assert.deepEqual(started, { action: "started", runId: "deploy-1" });
        const ran = results.map((r) => (r.action === "ran" ? r : assert.fail(`unexpected ${r.action}`)));
        assert.ok(ran.length >= 2, `the run took ${ran.length} invocations: it never continued itself`);
        assert.deepEqual(
            ran.map((r) => r.generation),
            ran.map((_, i) => i + 1),
        );
        assert.deepEqual(
            ran.map((r) => [r.report.status, r.continued]),
            ran.map((_, i) => (i === ran.length - 1 ? ["complete", false] : ["deadline", true])),
        );
        // Every live item of the selection carries the counter's flag (its record counts it once), no other item does,
        // and every key that had one is listed for a heal (which counts it into best-effort).
        const flagged = new Map<string, number>();
        let start: Record<string, AttributeValue> | undefined;
        do {
            const page = await dynamodb.send(
                new ScanCommand({ TableName: config.tableName, ...(start === undefined ? {} : { ExclusiveStartKey: start }) }),
            );
            for (const item of page.Items ?? []) {
                if (item[COUNTED_ATTRIBUTE] !== undefined) {
                    assert.deepEqual(item[COUNTED_ATTRIBUTE], { S: countingGeneration(config) });
                    flagged.set(item.pk!.S!, (flagged.get(item.pk!.S!) ?? 0) + 1);
                }
            }
            start = page.LastEvaluatedKey;
        } while (start !== undefined);
        assert.deepEqual(flagged, seed.expectedLive);
        assert.equal(
            ran.reduce((sum, r) => sum + r.report.thisCall.counted, 0),
            [...seed.expectedLive.values()].reduce((a, b) => a + b, 0),
        );
        for (const key of seed.expectedLive.keys()) {
            const eventual = await dynamodb.send(
                new GetItemCommand({ TableName: config.countersTableName, Key: eventualKey(config, key), ConsistentRead: true }),
            );
            assert.deepEqual([typeof eventual.Item?.[HEAL_PARTITION]?.S, typeof eventual.Item?.[HEAL_DUE]?.N], ["string", "string"], key);
        }
        dynamodb.destroy();
    });

    it("reads its settings back from the environment the component sets", () => {
        // Prepare
        const config: CounterConfig = {
            ...DEFAULT_LAYOUT,
            selection: SEEDED_SELECTION,
            tableName: "orders",
            countersTableName: "orders-counters",
            mode: "strict",
            periodMs: 900_000,
        };

        // Act
        const env = backfillEnvironment(config, { segments: 8, readUnitsPerSecond: 100 });
        const read = backfillFromEnv(env);

        // Assess
        assert.equal(env[BACKFILL_ENV.segments], "8");
        assert.deepEqual(read.settings, {
            segments: 8,
            readUnitsPerSecond: 100,
            writeUnitsPerSecond: undefined,
            capacityShare: undefined,
        });
        assert.equal(read.config.countersTableName, "orders-counters");
        assert.deepEqual(read.config.selection, SEEDED_SELECTION);
        assert.deepEqual([read.config.mode, read.config.periodMs], ["strict", 900_000]);
    });
});

describe("backfill on deploy (component under Pulumi mocks)", () => {
    const run = (args: HybridCounterComponentArgs) => runProgramWithResult(() => new HybridCounterComponent("orders", args));

    it("creates nothing for backfill by default", async () => {
        // Act
        const { resources } = await run({});

        // Assess
        assert.deepEqual(
            resources.filter((r) => r.name.includes("backfill")),
            [],
        );
    });

    it("creates the function, its log group and role, a least-privilege policy and one invocation that starts run deploy-N", async () => {
        // Act
        const { resources } = await run({ backfillOnDeploy: true, backfillRun: 3, counterMode: "strict", backfillSegments: 8 });

        // Assess
        assert.deepEqual(
            resources
                .filter((r) => r.name.includes("backfill"))
                .map((r) => `${r.type} ${r.name}`)
                .sort(),
            [
                "aws:cloudwatch/logGroup:LogGroup orders-backfill-logs",
                "aws:iam/role:Role orders-backfill-role",
                "aws:iam/rolePolicy:RolePolicy orders-backfill-policy",
                "aws:lambda/function:Function orders-backfill",
                "aws:lambda/invocation:Invocation orders-backfill-start",
            ],
        );
        const fn = findResource(resources, "aws:lambda/function:Function", "orders-backfill");
        assert.equal(fn.inputs.handler, "index.handler");
        assert.equal(fn.inputs.timeout, 900);
        assert.deepEqual(fn.inputs.environment.variables, {
            HYBRID_COUNTER_TABLE_NAME: "orders-table",
            HYBRID_COUNTER_COUNTERS_TABLE_NAME: "orders-counters",
            HYBRID_COUNTER_PARTITION_KEY: "pk",
            HYBRID_COUNTER_SORT_KEY: "sk",
            HYBRID_COUNTER_DELETED_ATTRIBUTE: "deleted",
            HYBRID_COUNTER_TOKEN_ATTRIBUTE: "counter_token",
            HYBRID_COUNTER_PREFIX: "#counter#",
            HYBRID_COUNTER_COUNT_ATTRIBUTE: "count",
            HYBRID_COUNTER_COUNTED_ITEMS: "client",
            HYBRID_COUNTER_MODE: "strict",
            HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS: "600",
            HYBRID_COUNTER_BACKFILL_SEGMENTS: "8",
        });
        const policy = findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-backfill-policy");
        assert.equal(policy.inputs.role, "orders-backfill-role");
        assert.deepEqual(
            JSON.parse(policy.inputs.policy as string),
            backfillPolicy({
                tableArn: TABLE_ARN,
                countersTableArn: `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders-counters`,
                functionArn: FUNCTION_ARN,
                logGroupArn: `arn:aws:logs:us-east-1:${ACCOUNT}:log-group:orders-backfill-logs`,
                tracing: false,
            }),
        );
        const invocation = findResource(resources, "aws:lambda/invocation:Invocation", "orders-backfill-start");
        assert.equal(invocation.inputs.functionName, "orders-backfill");
        assert.deepEqual(JSON.parse(invocation.inputs.input as string), { action: "start", runId: "deploy-3" });
        assert.deepEqual(invocation.inputs.triggers, { runId: "deploy-3" });
        assert.equal(resourcesOfType(resources, "aws:lambda/invocation:Invocation").length, 1);
    });

    it("grants exactly the actions backfill uses, on the two tables and on itself only", () => {
        // Act
        const document = backfillPolicy({ tableArn: "T", countersTableArn: "C", functionArn: "F", logGroupArn: "L", tracing: false });

        // Assess
        assert.deepEqual(document.Statement, [
            {
                Sid: "ScanAndFlagItems",
                Effect: "Allow",
                Action: ["dynamodb:Scan", "dynamodb:DescribeTable", "dynamodb:UpdateItem"],
                Resource: "T",
            },
            {
                Sid: "CheckpointAndMarkKeys",
                Effect: "Allow",
                Action: ["dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                Resource: "C",
            },
            { Sid: "ContinueItself", Effect: "Allow", Action: ["lambda:InvokeFunction"], Resource: "F" },
            { Sid: "WriteOwnLogs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: "L:*" },
        ]);
    });

    it("names every bad backfill arg before creating anything", () => {
        // Act
        const attempt = () =>
            new HybridCounterComponent("orders", {
                backfillOnDeploy: "yes" as unknown as boolean,
                backfillSegments: 0,
                backfillTimeout: 1_000,
                backfillCapacityShare: 1.5,
            });

        // Assess
        assert.throws(attempt, (error: unknown) => {
            assert.ok(error instanceof HybridCounterArgsError);
            assert.deepEqual(error.problems, [
                "[backfillSegments] must be an integer between 1 and 1000",
                "[backfillTimeout] must be an integer between 60 and 900",
                "[backfillCapacityShare] must be a number in (0, 1]",
                "[backfillOnDeploy] must be a boolean",
            ]);
            return true;
        });
    });

    it("with an unknown switch, creates the function and sends skip when the switch resolves to false", async () => {
        // Act
        const { resources } = await run({ backfillOnDeploy: Promise.resolve(false) });

        // Assess
        const invocation = findResource(resources, "aws:lambda/invocation:Invocation", "orders-backfill-start");
        assert.deepEqual(JSON.parse(await outputValue(invocation.inputs.input as string)), { action: "skip", runId: "deploy-1" });
    });
});
