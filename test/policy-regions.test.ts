/**
 * counter-table-replicas against hand-written stacks: a counter's table, its consumer and mapping, then one change per
 * case (replicas on the table, a TableReplica resource that replicates it, the consumer's multi-region setting), and
 * the table's regions compared with the setting's members.
 */
import * as assert from "node:assert/strict";
import type * as aws from "@pulumi/aws";
import type { Unwrap } from "@pulumi/pulumi";

import { COUNTER_CONSUMER_VARIABLE, COUNTER_REGIONS_VARIABLE, counterTableReplicas, isRegionsSetting, TYPES } from "../policy/index";
import { RecordedResource, runPolicies, unknownValue, withChange } from "./support/policy-harness";

const TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/orders";
const STREAM_ARN = `${TABLE_ARN}/stream/2026-01-01T00:00:00.000`;
const OTHER_TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/audit";

type Inputs<T> = Unwrap<T> & Record<string, unknown>;

function resource<T>(type: string, name: string, inputs: Inputs<T>, propertyDependencies: Record<string, string[]> = {}): RecordedResource {
    return { type, name, inputs, propertyDependencies };
}

const SETTING = JSON.stringify({
    current: "us-east-1",
    members: [
        { region: "us-east-1", role: "home" },
        { region: "us-west-2", role: "member" },
    ],
});

/** The counter's table (one region), its consumer and the mapping between them, plus another table nobody counts. */
function happyStack(): RecordedResource[] {
    return [
        resource<aws.dynamodb.TableArgs>(TYPES.table, "orders-table", {
            name: "orders",
            hashKey: "pk",
            rangeKey: "sk",
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
        }),
        resource<aws.dynamodb.TableArgs>(TYPES.table, "audit-table", { name: "audit", hashKey: "pk" }),
        resource<aws.lambda.FunctionArgs>(
            TYPES.function,
            "orders-consumer",
            {
                name: "orders-consumer",
                role: "arn:aws:iam::123456789012:role/orders-consumer-role",
                runtime: "nodejs22.x",
                handler: "index.handler",
                environment: { variables: { [COUNTER_CONSUMER_VARIABLE]: "orders" } },
            },
            { environment: ["orders-table"] },
        ),
        resource<aws.lambda.EventSourceMappingArgs>(
            TYPES.eventSourceMapping,
            "orders-consumer-mapping",
            { eventSourceArn: STREAM_ARN, functionName: "orders-consumer", startingPosition: "TRIM_HORIZON" },
            { eventSourceArn: ["orders-table"], functionName: ["orders-consumer"] },
        ),
    ];
}

const tableReplica = (name: string, globalTableArn: string, from: string[] = [], region?: string): RecordedResource =>
    resource<aws.dynamodb.TableReplicaArgs>(
        TYPES.tableReplica,
        name,
        { globalTableArn, ...(region === undefined ? {} : { region }) },
        from.length > 0 ? { globalTableArn: from } : {},
    );

const WITHOUT = "but its consumer 'orders-consumer' has no [HYBRID_COUNTER_REGIONS]";
const CONSEQUENCE = "so each region's stream carries every region's writes and a consumer per region counts each write once per region";

async function violationsOf(stack: readonly RecordedResource[]) {
    const run = await runPolicies([counterTableReplicas()], stack);
    assert.deepEqual(run.unknownValueErrors, [], "the policy never stops on an unknown value");
    return { violations: run.violations.map(({ resource: name, message, level }) => ({ name, message, level })), run };
}

describe("policy pack: counter-table-replicas", () => {
    it("passes a counter's table without replicas, and applies to it", async () => {
        // Act
        const { violations, run } = await violationsOf(happyStack());

        // Assess
        assert.deepEqual(violations, []);
        assert.deepEqual(run.notApplicable, []);
    });

    it("reports replicas on the counter's table, naming [replicas], their regions and the missing setting", async () => {
        // Prepare
        const stack = withChange(
            happyStack(),
            "orders-table",
            (i) => (i.replicas = [{ regionName: "us-west-2" }, { regionName: "eu-west-1" }]),
        );

        // Act
        const { violations } = await violationsOf(stack);

        // Assess
        assert.deepEqual(violations, [
            {
                name: "orders-table",
                message:
                    "table 'orders-table' has [replicas] in us-west-2, eu-west-1 and feeds a hybrid counter through event source mapping " +
                    `'orders-consumer-mapping', ${WITHOUT}, ${CONSEQUENCE}`,
                level: "mandatory",
            },
        ]);
    });

    it("passes an empty replicas list", async () => {
        // Prepare
        const stack = withChange(happyStack(), "orders-table", (i) => (i.replicas = []));

        // Act / Assess
        assert.deepEqual((await violationsOf(stack)).violations, []);
    });

    it("reports a TableReplica whose globalTableArn was computed from the counter's table", async () => {
        // Prepare
        const stack = [...happyStack(), tableReplica("orders-west", TABLE_ARN, ["orders-table"], "us-west-2")];

        // Act
        const { violations } = await violationsOf(stack);

        // Assess
        assert.deepEqual(violations, [
            {
                name: "orders-west",
                message:
                    "table replica 'orders-west' in us-west-2 replicates table 'orders-table' ([globalTableArn]), which feeds a hybrid counter " +
                    `through event source mapping 'orders-consumer-mapping', ${WITHOUT}, ${CONSEQUENCE}`,
                level: "mandatory",
            },
        ]);
    });

    it("reports a TableReplica of a table read by ARN, matching its known globalTableArn with the mapping's stream ARN", async () => {
        // Prepare: the table is not in the stack (attached by ARN); only the ARNs tie the replica to the stream.
        const stack = [
            ...happyStack()
                .filter((r) => r.name !== "orders-table")
                .map((r) =>
                    r.name === "orders-consumer-mapping" ? { ...r, propertyDependencies: { functionName: ["orders-consumer"] } } : r,
                )
                .map((r) => (r.name === "orders-consumer" ? { ...r, propertyDependencies: {} } : r)),
            tableReplica("orders-west", TABLE_ARN),
        ];

        // Act
        const { violations } = await violationsOf(stack);

        // Assess
        assert.deepEqual(violations, [
            {
                name: "orders-west",
                message:
                    `table replica 'orders-west' replicates table ${TABLE_ARN} ([globalTableArn]), which feeds a hybrid counter ` +
                    `through event source mapping 'orders-consumer-mapping', ${WITHOUT}, ${CONSEQUENCE}`,
                level: "mandatory",
            },
        ]);
    });

    it("leaves a TableReplica of another table alone, by dependency and by ARN", async () => {
        // Prepare
        const stack = [
            ...happyStack(),
            tableReplica("audit-west", OTHER_TABLE_ARN, ["audit-table"]),
            tableReplica("audit-east", OTHER_TABLE_ARN),
        ];

        // Act / Assess
        assert.deepEqual((await violationsOf(stack)).violations, []);
    });

    it("passes a replicated table whose consumer's multi-region setting lists exactly its regions, by replicas or by TableReplica", async () => {
        // Prepare: the table is in us-east-1 (its stream ARN's region); the setting's members are us-east-1 and us-west-2.
        const counted = withChange(happyStack(), "orders-consumer", (i) => (i.environment.variables[COUNTER_REGIONS_VARIABLE] = SETTING));
        const byReplicas = withChange(counted, "orders-table", (i) => (i.replicas = [{ regionName: "us-west-2" }]));
        const byResource = [...counted, tableReplica("orders-west", TABLE_ARN, ["orders-table"], "us-west-2")];
        const byProvider = [
            ...counted,
            {
                ...tableReplica("orders-west", TABLE_ARN, ["orders-table"]),
                provider: { type: "pulumi:providers:aws", name: "west", props: { region: "us-west-2" } },
            },
        ];

        // Act / Assess
        for (const stack of [byReplicas, byResource, byProvider]) {
            const { violations, run } = await violationsOf(stack);
            assert.deepEqual([violations, run.notApplicable], [[], []]);
        }
    });

    /** The happy stack whose consumer counts for `members` (us-east-1, the table's region, current and home). */
    const countingFor = (...others: string[]) =>
        withChange(happyStack(), "orders-consumer", (i) => {
            const members = [{ region: "us-east-1", role: "home" }, ...others.map((region) => ({ region, role: "member" }))];
            i.environment.variables[COUNTER_REGIONS_VARIABLE] = JSON.stringify({ current: "us-east-1", members });
        });
    const mismatch = (regions: string, members: string, why: string) => ({
        name: "orders-table",
        message:
            `table 'orders-table' is in ${regions} (its own region and its replicas'), but its consumer 'orders-consumer' counts for ` +
            `[HYBRID_COUNTER_REGIONS] members ${members} (event source mapping 'orders-consumer-mapping'): ${why}; ` +
            "the members must be exactly the table's regions",
        level: "mandatory",
    });

    it("reports members where the table has no replica: that region's consumer would count nothing", async () => {
        // Prepare
        const withoutReplicas = countingFor("us-west-2");
        const oneOfTwo = withChange(
            countingFor("us-west-2", "eu-west-1"),
            "orders-table",
            (i) => (i.replicas = [{ regionName: "us-west-2" }]),
        );

        // Act
        const none = await violationsOf(withoutReplicas);
        const one = await violationsOf(oneOfTwo);

        // Assess
        assert.deepEqual(none.violations, [
            mismatch("us-east-1", "us-east-1, us-west-2", "us-west-2 has no replica of it, so that region's consumer would count nothing"),
        ]);
        assert.deepEqual(one.violations, [
            mismatch(
                "us-east-1, us-west-2",
                "us-east-1, us-west-2, eu-west-1",
                "eu-west-1 has no replica of it, so that region's consumer would count nothing",
            ),
        ]);
    });

    it("reports replicas outside the members, by replicas and by a TableReplica without a known region", async () => {
        // Prepare
        const listed = withChange(
            countingFor("us-west-2"),
            "orders-table",
            (i) => (i.replicas = [{ regionName: "us-west-2" }, { regionName: "ap-south-1" }]),
        );
        const unplaced = [
            ...withChange(countingFor("us-west-2"), "orders-table", (i) => (i.replicas = [{ regionName: "us-west-2" }])),
            tableReplica("orders-somewhere", TABLE_ARN, ["orders-table"]),
        ];

        // Act
        const outside = await violationsOf(listed);
        const unknownRegion = await violationsOf(unplaced);

        // Assess
        assert.deepEqual(outside.violations, [
            mismatch(
                "us-east-1, us-west-2, ap-south-1",
                "us-east-1, us-west-2",
                "ap-south-1 is no member, so writes made there would be counted by no region of their own",
            ),
        ]);
        assert.deepEqual(unknownRegion.violations, [
            mismatch(
                "us-east-1, us-west-2, (a region unknown)",
                "us-east-1, us-west-2",
                "(a region unknown) is no member, so writes made there would be counted by no region of their own",
            ),
        ]);
    });

    it("takes the table's own region from its stream ARN, and names both differences at once", async () => {
        // Prepare: the same table in eu-central-1 (its stream ARN says so), counted for us-east-1 and us-west-2.
        const stack = withChange(
            withChange(countingFor("us-west-2"), "orders-table", (i) => (i.replicas = [{ regionName: "us-west-2" }])),
            "orders-consumer-mapping",
            (i) => (i.eventSourceArn = STREAM_ARN.replace("us-east-1", "eu-central-1")),
        );

        // Act
        const { violations } = await violationsOf(stack);

        // Assess
        assert.deepEqual(violations, [
            mismatch(
                "eu-central-1, us-west-2",
                "us-east-1, us-west-2",
                "us-east-1 has no replica of it, so that region's consumer would count nothing; " +
                    "eu-central-1 is no member, so writes made there would be counted by no region of their own",
            ),
        ]);
    });

    it("reports a setting that does not say how regions count, showing it", async () => {
        // Prepare
        const oneRegion = JSON.stringify({ current: "us-east-1", members: [{ region: "us-east-1", role: "home" }] });
        let stack = withChange(happyStack(), "orders-table", (i) => (i.replicas = [{ regionName: "us-west-2" }]));
        stack = withChange(stack, "orders-consumer", (i) => (i.environment.variables[COUNTER_REGIONS_VARIABLE] = oneRegion));

        // Act
        const { violations } = await violationsOf(stack);

        // Assess
        assert.deepEqual(
            violations.map((v) => v.message),
            [
                "table 'orders-table' has [replicas] in us-west-2 and feeds a hybrid counter through event source mapping 'orders-consumer-mapping', " +
                    `but its consumer 'orders-consumer' has [HYBRID_COUNTER_REGIONS] ${JSON.stringify(oneRegion)}, which is not a multi-region setting ` +
                    '({"current":<region>,"members":[{"region":<region>,"role":"home"|"member"},...]}, two regions or more, one home), ' +
                    CONSEQUENCE,
            ],
        );
    });

    it("tells a multi-region setting from values that are not one", () => {
        // Prepare
        const members = [
            { region: "us-east-1", role: "home" },
            { region: "us-west-2", role: "member" },
        ];

        // Act / Assess
        assert.equal(isRegionsSetting(SETTING), true);
        assert.equal(isRegionsSetting(JSON.stringify({ current: "us-east-1", members: [members[0], { region: "us-west-2" }] })), true);
        assert.equal(isRegionsSetting(undefined), false);
        assert.equal(isRegionsSetting("us-east-1,us-west-2"), false);
        assert.equal(isRegionsSetting(JSON.stringify({ current: "ap-south-1", members })), false, "current not a member");
        assert.equal(
            isRegionsSetting(JSON.stringify({ current: "us-east-1", members: [members[0], members[0]] })),
            false,
            "a region twice",
        );
        assert.equal(
            isRegionsSetting(JSON.stringify({ current: "us-east-1", members: [members[0], { ...members[1], role: "home" }] })),
            false,
            "two homes",
        );
        assert.equal(
            isRegionsSetting(JSON.stringify({ current: "us-east-1", members: [members[0], { ...members[1], role: "primary" }] })),
            false,
            "an unknown role",
        );
    });

    it("leaves a stream consumer that is not a counter's alone, replicas or not", async () => {
        // Prepare
        let stack = withChange(happyStack(), "orders-consumer", (i) => delete i.environment);
        stack = withChange(stack, "orders-table", (i) => (i.replicas = [{ regionName: "us-west-2" }]));

        // Act
        const { violations, run } = await violationsOf(stack);

        // Assess
        assert.deepEqual(violations, []);
        assert.deepEqual(run.notApplicable, [
            { policy: "counter-table-replicas", reason: "no event source mapping in this stack invokes a hybrid counter's consumer" },
        ]);
    });

    it("waits for the update when the consumer's environment or the table's replicas are unknown during preview", async () => {
        // Prepare
        const replicated = withChange(happyStack(), "orders-table", (i) => (i.replicas = [{ regionName: "us-west-2" }]));
        const environmentUnknown = withChange(replicated, "orders-consumer", (i) => (i.environment = unknownValue.object));
        const replicasUnknown = withChange(happyStack(), "orders-table", (i) => (i.replicas = unknownValue.array));
        const countedReplicasUnknown = withChange(
            withChange(happyStack(), "orders-consumer", (i) => (i.environment.variables[COUNTER_REGIONS_VARIABLE] = SETTING)),
            "orders-table",
            (i) => (i.replicas = unknownValue.array),
        );

        // Act / Assess
        assert.deepEqual((await violationsOf(environmentUnknown)).violations, []);
        assert.deepEqual((await violationsOf(replicasUnknown)).violations, []);
        assert.deepEqual((await violationsOf(countedReplicasUnknown)).violations, []);
    });
});
