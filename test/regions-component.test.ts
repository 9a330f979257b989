/**
 * A multi-region counter under Pulumi mocks: examples/multi-region (one component and one provider per region on a
 * global table), and what the component refuses. Every assertion names what one region deploys.
 */
import * as assert from "node:assert/strict";
import * as aws from "@pulumi/aws";
import { HybridCounterComponent, type HybridCounterComponentArgs } from "../index";
import { hybridCounterArgsProblems } from "../components/validation";
import {
    findResource,
    outputValue,
    resourcesOfType,
    runProgramWithResult,
    type ProgramRun,
    type RecordedResource,
} from "../local/deployment/pulumi-mocks";
import { HOME, MEMBERS, REGIONS, replicaDescription, runMultiRegionExample, streamArn, tableArn } from "./support/multi-region";
import { resolvePackageToSource } from "./support/package-source";

const COMPONENT = "hybrid-counter:index:HybridCounterComponent";
const TABLE = "aws:dynamodb/table:Table";
const FUNCTION = "aws:lambda/function:Function";
const MAPPING = "aws:lambda/eventSourceMapping:EventSourceMapping";
const ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy";
const COUNTERS = "orders-counter-us-east-1-counters";

function policyOf(resources: readonly RecordedResource[], name: string): Array<{ Sid: string; Resource: unknown }> {
    return (
        JSON.parse(findResource(resources, ROLE_POLICY, name).inputs.policy as string) as {
            Statement: Array<{ Sid: string; Resource: unknown }>;
        }
    ).Statement;
}

const setting = (current: string) => ({ current, members: MEMBERS.map((m) => ({ ...m })) });

describe("a multi-region counter: examples/multi-region under mocks", () => {
    let run: ProgramRun<unknown>;
    let restore: () => void;
    before(async () => {
        restore = resolvePackageToSource();
        run = await runMultiRegionExample();
    });
    after(() => restore());
    const inRegion = (region: string) => run.resources.filter((r) => r.provider?.includes(`::${region}-provider-id`));
    const component = (region: string) => `orders-counter-${region}`;

    it("deploys one component per region, each child with its region's provider", () => {
        // Assess
        assert.deepEqual(
            resourcesOfType(run.resources, COMPONENT).map((r) => r.name),
            REGIONS.map(component),
        );
        for (const region of REGIONS) {
            const parent = findResource(run.resources, COMPONENT, component(region)).urn;
            const children = run.resources.filter((r) => r.parent === parent);
            // Home: the 32 children of an attached component with its alarm topic, plus the backfill's 5 (logs, role,
            // function, policy, invocation); a member: no counters table and no backfill.
            assert.equal(children.length, region === HOME ? 37 : 31, region);
            assert.deepEqual(
                children.filter((r) => !r.provider?.includes(`::${region}-provider-id`)).map((r) => r.name),
                [],
                `${region}: every child uses the region's provider`,
            );
        }
    });

    it("creates the counters table in the home region only, replicated to every other member with a stream of both images", () => {
        // Assess
        assert.deepEqual(
            resourcesOfType(run.resources, TABLE).map((t) => [t.name, t.id]),
            [
                ["orders", "orders"],
                ["orders-eu-west-1", "orders"],
                ["orders-ap-southeast-2", "orders"],
                [COUNTERS, COUNTERS],
            ],
        );
        const counters = findResource(run.resources, TABLE, COUNTERS);
        assert.ok(counters.provider?.includes(`::${HOME}-provider-id`));
        assert.deepEqual(counters.inputs.replicas, [
            { regionName: "eu-west-1", pointInTimeRecovery: true, propagateTags: true },
            { regionName: "ap-southeast-2", pointInTimeRecovery: true, propagateTags: true },
        ]);
        assert.deepEqual(
            [counters.inputs.streamEnabled, counters.inputs.streamViewType, counters.inputs.billingMode],
            [true, "NEW_AND_OLD_IMAGES", "PAY_PER_REQUEST"],
        );
    });

    it("gives every function of a region the region's setting and the stamp's attribute, and the same two tables by name", () => {
        for (const region of REGIONS) {
            const functions = resourcesOfType(inRegion(region), FUNCTION);
            // Assess
            assert.deepEqual(
                functions.map((f) => f.name).sort(),
                ["backfill", "consumer", "redrive", "settler"]
                    .filter((fn) => region === HOME || fn !== "backfill")
                    .map((fn) => `${component(region)}-${fn}`),
            );
            for (const fn of functions) {
                const variables = fn.inputs.environment.variables as Record<string, string>;
                assert.deepEqual(JSON.parse(variables.HYBRID_COUNTER_REGIONS!), setting(region), fn.name);
                assert.equal(variables.HYBRID_COUNTER_REGION_ATTRIBUTE, "hc_region", fn.name);
                assert.equal(variables.HYBRID_COUNTER_TABLE_NAME, "orders", fn.name);
                assert.equal(variables.HYBRID_COUNTER_COUNTERS_TABLE_NAME, COUNTERS, fn.name);
            }
        }
    });

    it("delivers every record of each region's stream to its consumer: no filter (the frontier needs them all)", () => {
        // Assess
        for (const region of [HOME, "eu-west-1", "ap-southeast-2"]) {
            assert.equal(
                findResource(run.resources, MAPPING, `${component(region)}-stream-mapping`).inputs.filterCriteria,
                undefined,
                region,
            );
        }
    });

    it("reads each region's own stream and names only the region's own ARNs in its roles", () => {
        for (const region of REGIONS) {
            const name = component(region);
            const mapping = findResource(run.resources, MAPPING, `${name}-stream-mapping`).inputs;
            // Assess
            assert.deepEqual([mapping.eventSourceArn, mapping.enabled], [streamArn(region), true]);
            const resourcesOf = (fn: string, sids: string[]) =>
                policyOf(run.resources, `${name}-${fn}-policy`)
                    .filter((s) => sids.includes(s.Sid))
                    .map((s) => [s.Sid, s.Resource]);
            const counting = ["ReadOwnStream", "CountInCountersTable", "FlagAndRemoveItems"];
            const expected = [
                ["ReadOwnStream", streamArn(region)],
                ["CountInCountersTable", tableArn(region, COUNTERS)],
                ["FlagAndRemoveItems", tableArn(region)],
            ];
            assert.deepEqual(resourcesOf("consumer", counting), expected, `${region} consumer`);
            assert.deepEqual(resourcesOf("redrive", counting), expected, `${region} redrive`);
            assert.deepEqual(
                resourcesOf("settler", ["QueryHealIndex"]),
                [["QueryHealIndex", `${tableArn(region, COUNTERS)}/index/heal-index`]],
                `${region} settler`,
            );
            // No DynamoDB ARN of another region in any of the region's policies.
            for (const policy of resourcesOfType(inRegion(region), ROLE_POLICY)) {
                const others = REGIONS.filter((r) => r !== region).filter((r) => (policy.inputs.policy as string).includes(`:${r}:`));
                assert.deepEqual(others, [], policy.name);
            }
        }
    });

    it("starts the backfill on deploy in the home region only, though every region's args ask for it", () => {
        // Assess
        assert.deepEqual(
            resourcesOfType(run.resources, "aws:lambda/invocation:Invocation").map((r) => r.name),
            ["orders-counter-us-east-1-backfill-start"],
        );
        assert.deepEqual(
            policyOf(run.resources, "orders-counter-us-east-1-backfill-policy")
                .filter((s) => s.Sid === "ScanAndFlagItems" || s.Sid === "CheckpointAndMarkKeys")
                .map((s) => s.Resource),
            [tableArn(HOME), tableArn(HOME, COUNTERS)],
        );
    });

    it("exports each region's client configuration with its setting and the stamp's attribute", async () => {
        // Prepare
        const exported = run.result as { clientConfig: Record<string, unknown> };
        // Act
        const configs = await outputValue(exported.clientConfig as never);
        // Assess
        for (const region of REGIONS) {
            const config = (configs as Record<string, Record<string, unknown>>)[region]!;
            assert.deepEqual(
                [config.tableName, config.countersTableName, config.regions, config.regionAttribute],
                ["orders", COUNTERS, setting(region), "hc_region"],
                region,
            );
        }
    });
});

describe("a multi-region counter: a member region's stack on its own", () => {
    it("attaches by tableArn to its region's replica and by name to the home's counters table, and grants its API only them", async () => {
        // Prepare: a stack per region, this one eu-west-1's; the home stack's countersTableName comes as a plain name.
        const provider = () => new aws.Provider("eu-west-1", { region: "eu-west-1" });

        // Act
        const { resources, result, invokes } = await runProgramWithResult(
            () =>
                new HybridCounterComponent(
                    "orders",
                    {
                        tableArn: tableArn("eu-west-1"),
                        regions: {
                            current: "eu-west-1",
                            members: MEMBERS.map((m) => ({ ...m })),
                            countersTableName: "orders-counters-1a2b",
                        },
                    },
                    { provider: provider() },
                ),
            { invokes: { "aws:dynamodb/getTable:getTable": (inputs) => replicaDescription(inputs.name as string, "eu-west-1") } },
        );

        // Assess
        assert.deepEqual(
            invokes.map((i) => [i.token, i.inputs.name, i.provider?.includes("::eu-west-1-provider-id")]),
            [["aws:dynamodb/getTable:getTable", "orders", true]],
        );
        assert.deepEqual(resourcesOfType(resources, TABLE), []);
        assert.equal(await result.ready(), undefined);
        assert.deepEqual(
            [
                await outputValue(result.countersTableName),
                await outputValue(result.countersTableArn),
                await outputValue(result.tableStreamArn),
            ],
            ["orders-counters-1a2b", tableArn("eu-west-1", "orders-counters-1a2b"), streamArn("eu-west-1")],
        );
        assert.deepEqual(JSON.parse(await outputValue(result.apiPolicyDocument)), {
            Version: "2012-10-17",
            Statement: [
                {
                    Sid: "WriteResourceItems",
                    Effect: "Allow",
                    Action: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                    Resource: tableArn("eu-west-1"),
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
                    Resource: tableArn("eu-west-1", "orders-counters-1a2b"),
                },
            ],
        });
        const environment = await outputValue(result.apiEnvironment);
        assert.deepEqual(
            [
                environment.HYBRID_COUNTER_REGIONS,
                environment.HYBRID_COUNTER_REGION_ATTRIBUTE,
                environment.HYBRID_COUNTER_COUNTERS_TABLE_NAME,
            ],
            [JSON.stringify(setting("eu-west-1")), "hc_region", "orders-counters-1a2b"],
        );
    });
});

describe("a multi-region counter: what the component refuses", () => {
    const replicated = (consistencyMode?: string) =>
        new aws.dynamodb.Table("app", {
            name: "app",
            hashKey: "pk",
            rangeKey: "sk",
            attributes: [
                { name: "pk", type: "S" },
                { name: "sk", type: "S" },
            ],
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
            replicas: [{ regionName: "eu-west-1", ...(consistencyMode === undefined ? {} : { consistencyMode }) }],
        });
    /** ready()'s outcome and the stream mapping's `enabled`, for a component built by `make` under mocks. */
    async function attach(
        make: () => HybridCounterComponent,
    ): Promise<{ outcome: unknown; enabled: unknown; resources: RecordedResource[] }> {
        let outcome: Promise<unknown> = Promise.resolve("not built");
        const { resources } = await runProgramWithResult(() => {
            const component = make();
            outcome = component.ready().then(
                () => "resolved",
                (error: unknown) => (error as Error).message,
            );
            return component;
        });
        return { outcome: await outcome, enabled: findResource(resources, MAPPING, "orders-stream-mapping").inputs.enabled, resources };
    }

    it("refuses a replicated table without [regions], naming [table], and never reads its stream", async () => {
        // Act
        const { outcome, enabled, resources } = await attach(() => new HybridCounterComponent("orders", { table: replicated() }));
        // Assess
        assert.equal(
            outcome,
            "invalid HybridCounterComponent args:\n" +
                '  - [table] must not have replicas (found "eu-west-1") unless [regions] says how regions count: it is a global table, ' +
                "whose stream in each region carries every region's writes, so a consumer per region would count each write once per " +
                "region, and two regions' updates of one counter item would lose one to last-writer-wins. Set [regions] in every " +
                "region's component; see docs/design/global-tables.md",
        );
        assert.equal(enabled, false);
        assert.equal(
            JSON.stringify(findResource(resources, FUNCTION, "orders-consumer").inputs.environment).includes("HYBRID_COUNTER_REGIONS"),
            false,
        );
    });

    it("accepts the same table with [regions], and counts in a replicated counters table", async () => {
        // Act
        const { outcome, enabled, resources } = await attach(
            () =>
                new HybridCounterComponent("orders", {
                    table: replicated(),
                    regions: { current: "us-east-1", members: [{ region: "us-east-1", role: "home" }, { region: "eu-west-1" }] },
                }),
        );
        // Assess
        assert.deepEqual([outcome, enabled], ["resolved", true]);
        assert.deepEqual(findResource(resources, TABLE, "orders-counters").inputs.replicas, [
            { regionName: "eu-west-1", pointInTimeRecovery: true, propagateTags: true },
        ]);
    });

    it("refuses with [regions] a table whose replicas use multi-region strong consistency, naming [table], and never reads its stream", async () => {
        // Act: the accepted table and setting above, with the replica's one change: strong consistency.
        const regions = { current: "us-east-1", members: [{ region: "us-east-1", role: "home" as const }, { region: "eu-west-1" }] };
        const eventual = await attach(() => new HybridCounterComponent("orders", { table: replicated("EVENTUAL"), regions }));
        const { outcome, enabled } = await attach(() => new HybridCounterComponent("orders", { table: replicated("STRONG"), regions }));
        // Assess
        assert.deepEqual([eventual.outcome, eventual.enabled], ["resolved", true]);
        assert.equal(
            outcome,
            "invalid HybridCounterComponent args:\n" +
                '  - [table] must not use multi-region strong consistency (replicas with consistencyMode "STRONG" in "eu-west-1"): such a ' +
                "table refuses transactions, and conditional writes made in two regions at once conflict; use multi-region eventual " +
                "consistency with [regions] (see docs/design/global-tables.md)",
        );
        assert.equal(enabled, false);
    });

    it("refuses [regions] whose members are not the table's regions, naming [regions.members]", async () => {
        // Act
        const { outcome, enabled } = await attach(
            () =>
                new HybridCounterComponent("orders", {
                    table: replicated(),
                    regions: { current: "us-east-1", members: [{ region: "us-east-1", role: "home" }, { region: "us-west-2" }] },
                }),
        );
        // Assess
        assert.equal(
            outcome,
            "invalid HybridCounterComponent args:\n" +
                "  - [regions.members] must list every region of [table]'s replicas: \"eu-west-1\" would be counted by no region's consumer of its own\n" +
                '  - [regions.members] lists "us-west-2", where [table] has no replica (its replicas: "eu-west-1")',
        );
        assert.equal(enabled, false);
    });

    it("refuses a table read in another region than [regions.current], naming [table]", async () => {
        // Act: the home's table (in us-east-1) given to the eu-west-1 component.
        const { outcome, enabled } = await attach(
            () =>
                new HybridCounterComponent("orders", {
                    table: replicated(),
                    regions: {
                        current: "eu-west-1",
                        members: [{ region: "us-east-1", role: "home" }, { region: "eu-west-1" }],
                        countersTableName: "orders-counters-abc",
                    },
                }),
        );
        // Assess
        assert.equal(
            outcome,
            "invalid HybridCounterComponent args:\n" +
                '  - [table] must be the table\'s replica in [regions.current] "eu-west-1" (its ARN is in "us-east-1"): attach it with ' +
                "aws.dynamodb.Table.get(name, tableName, {}, { provider }) or [tableArn] in that region, and create the component with " +
                "that region's provider",
        );
        assert.equal(enabled, false);
    });

    it("refuses, before creating anything, what a multi-region counter cannot be, each problem naming its field", () => {
        const arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders";
        const members = [{ region: "us-east-1", role: "home" as const }, { region: "eu-west-1" }];
        const cases: Array<[string, HybridCounterComponentArgs, string[]]> = [
            [
                "the same-table placement",
                { tableArn: arn, counterPlacement: "same-table", regions: { current: "us-east-1", members } },
                [
                    '[counterPlacement] must be "separate" with [regions] (got "same-table"): each region writes only its own counter ' +
                        "items, in a counters table replicated to every member, not in the user's table",
                ],
            ],
            [
                "no table attached",
                { regions: { current: "us-east-1", members } },
                [
                    "[regions] needs the user's global table attached with [table] or [tableArn] (the replica in [regions.current]): " +
                        "the component does not create a replicated table",
                ],
            ],
            [
                "a member region without the counters table's name",
                { tableArn: arn, regions: { current: "eu-west-1", members } },
                [
                    '[regions.countersTableName] must be set in a member region ("eu-west-1"): the name of the counters table the home ' +
                        "region's component created (its countersTableName output), which has a replica here",
                ],
            ],
            [
                "the home region given a counters table's name",
                { tableArn: arn, regions: { current: "us-east-1", members, countersTableName: "x-counters" } },
                [
                    "[regions.countersTableName] must not be set in the home region: the home region's component creates the counters " +
                        "table, with a replica in every other member",
                ],
            ],
            [
                "a current region that is not a member",
                { tableArn: arn, regions: { current: "ap-south-1", members } },
                ['[regions.current] must be one of [regions.members] (got "ap-south-1", members are us-east-1, eu-west-1)'],
            ],
            [
                "a region attribute that is the token attribute",
                { tableArn: arn, regions: { current: "us-east-1", members }, regionAttribute: "counter_token" },
                ['[regionAttribute] must differ from [tokenAttribute] (both are "counter_token")'],
            ],
            [
                "a region attribute without regions",
                { tableArn: arn, regionAttribute: "hc_region" },
                ["[regionAttribute] must not be set without [regions]: only a multi-region counter stamps items with a region"],
            ],
        ];
        for (const [what, args, expected] of cases) {
            // Act + Assess
            assert.deepEqual(hybridCounterArgsProblems(args), expected, what);
            assert.throws(
                () => new HybridCounterComponent("orders", args),
                (e: Error) => e.name === "HybridCounterArgsError",
                what,
            );
        }
    });
});
