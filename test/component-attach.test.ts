/**
 * HybridCounterComponent attached to the user's table (`table`, `tableArn`, `aws.dynamodb.Table.get`), under Pulumi
 * mocks: what it reads of the table, and every refusal of a table it cannot count, through ready() with the stream
 * mapping registered disabled and no backfill started.
 */
import * as assert from "node:assert/strict";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HybridCounterArgsError, HybridCounterComponent, type HybridCounterComponentArgs } from "../index";
import { findResource, outputValue, resourcesOfType, runProgramWithResult, type RecordedResource } from "../local/deployment/pulumi-mocks";

const ACCOUNT = "123456789012";
const COUNTERS_TABLE_ARN = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders-counters`;

function policyOf(resource: RecordedResource): { Statement: Array<{ Sid: string; Effect: string; Action: string[]; Resource?: unknown }> } {
    return JSON.parse(resource.inputs.policy as string);
}

describe("HybridCounterComponent attached to a table the program manages", () => {
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
                .filter((s) => ["ReadOwnStream", "CountInCountersTable", "FlagAndRemoveItems"].includes(s.Sid))
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
            counterMode: "utilization",
            healQuietWindowSeconds: 600,
        });
    });

    it("attaches a table the program does not manage by ARN, reading its settings with getTable", async () => {
        // Act
        const arn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/legacy-orders`;
        const { resources, result, invokes } = await runProgramWithResult(() => new HybridCounterComponent("orders", { tableArn: arn }), {
            invokes: { "aws:dynamodb/getTable:getTable": (inputs) => ({ ...legacyOrders(), name: inputs.name }) },
        });

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

    it("attaches in the same-table placement a table that carries the heal index, reading its counter items there", async () => {
        // Act
        const { resources, result } = await runProgramWithResult(() => {
            const table = new aws.dynamodb.Table(
                "app",
                tableArgs({
                    attributes: [
                        { name: "pk", type: "S" },
                        { name: "sk", type: "S" },
                        { name: "hc_heal", type: "S" },
                        { name: "hc_due", type: "N" },
                    ],
                    globalSecondaryIndexes: [{ name: "heal-index", hashKey: "hc_heal", rangeKey: "hc_due", projectionType: "KEYS_ONLY" }],
                }),
            );
            return new HybridCounterComponent("orders", { table, counterPlacement: "same-table" });
        });

        // Assess
        const arn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/app-table`;
        assert.equal(await result.ready(), undefined);
        assert.deepEqual(
            resourcesOfType(resources, "aws:dynamodb/table:Table").map((t) => t.name),
            ["app"],
        );
        assert.equal(
            findResource(resources, "aws:lambda/eventSourceMapping:EventSourceMapping", "orders-stream-mapping").inputs.enabled,
            true,
        );
        assert.equal(await outputValue(result.countersTableArn), arn);
        assert.equal(
            policyOf(findResource(resources, "aws:iam/rolePolicy:RolePolicy", "orders-settler-policy")).Statement[0]!.Resource,
            `${arn}/index/heal-index`,
        );
    });

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
        [
            "whose replicas use multi-region strong consistency",
            {
                replicas: [
                    { regionName: "us-west-2", consistencyMode: "STRONG" },
                    { regionName: "us-east-2", consistencyMode: "STRONG" },
                ],
            },
            [
                '[table] must not use multi-region strong consistency (replicas with consistencyMode "STRONG" in "us-west-2", "us-east-2"): ' +
                    "such a table refuses transactions, and conditional writes made in two regions at once conflict; use multi-region " +
                    "eventual consistency with [regions] (see docs/design/global-tables.md)",
                replicatedProblem('"us-west-2", "us-east-2"'),
            ],
            {},
        ],
        [
            "in the same-table placement without the heal index",
            {},
            [
                '[table] must have the heal index in the same-table placement: a global secondary index "heal-index" with hash key ' +
                    '"hc_heal" (S) and range key "hc_due" (N), where the settler finds the keys listed for a heal (found no index); ' +
                    'add it to the table, or use [counterPlacement] "separate"',
            ],
            { counterPlacement: "same-table" },
        ],
        [
            "in the same-table placement with another index",
            {
                attributes: [
                    { name: "pk", type: "S" },
                    { name: "sk", type: "S" },
                    { name: "status", type: "S" },
                ],
                globalSecondaryIndexes: [{ name: "by-status", hashKey: "status", projectionType: "ALL" }],
            },
            [
                '[table] must have the heal index in the same-table placement: a global secondary index "heal-index" with hash key ' +
                    '"hc_heal" (S) and range key "hc_due" (N), where the settler finds the keys listed for a heal (found the indexes "by-status"); ' +
                    'add it to the table, or use [counterPlacement] "separate"',
            ],
            { counterPlacement: "same-table" },
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
