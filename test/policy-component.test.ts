/**
 * The component passes its own pack: HybridCounterComponent (with a threshold topic, so that every policy applies),
 * run under Pulumi mocks, then every recorded resource and the stack fed to every policy of the pack.
 *
 * Under mocks `newResource` receives no per-property dependencies (FACTS.md), so they are rebuilt
 * here: an input depends on another resource when one of its values is that resource's mocked
 * output (an ARN or URL anywhere in the value, or a name or id equal to a whole value).
 */
import * as assert from "node:assert/strict";
import * as aws from "@pulumi/aws";
import { HybridCounterComponent } from "../index";
import { hybridCounterPolicies, POLICY_NAMES } from "../policy/index";
import { RecordedResource as PolicyRecord, runPolicies } from "./support/policy-harness";
import { runProgram, type RecordedResource as MockRecord } from "../local/deployment/pulumi-mocks";
import { runMultiRegionExample } from "./support/multi-region";
import { resolvePackageToSource } from "./support/package-source";

/** Every string in a value, descending into objects, arrays and JSON text. */
function strings(value: unknown, into: string[] = []): string[] {
    if (typeof value === "string") {
        into.push(value);
        const text = value.trim();
        if (text.startsWith("{") || text.startsWith("[")) {
            try {
                strings(JSON.parse(text) as unknown, into);
            } catch {
                // Not JSON: the string itself was recorded.
            }
        }
    } else if (Array.isArray(value)) {
        value.forEach((v) => strings(v, into));
    } else if (typeof value === "object" && value !== null) {
        Object.values(value).forEach((v) => strings(v, into));
    }
    return into;
}

/** The outputs another resource's inputs can be computed from. */
function identifiers(r: MockRecord): { exact: Set<string>; embedded: string[] } {
    const exact = new Set<string>();
    const embedded: string[] = [];
    const candidates = [
        r.id,
        ...["arn", "streamArn", "url", "id", "name", "qualifiedArn", "invokeArn", "dashboardName", "keyId"].map(
            (k) => r.state[k] as unknown,
        ),
    ];
    for (const c of candidates) {
        if (typeof c !== "string" || c === "") {
            continue;
        }
        exact.add(c);
        if (c.startsWith("arn:") || c.startsWith("https://")) {
            embedded.push(c);
        }
    }
    return { exact, embedded };
}

/** Rebuilds `propertyDependencies` and `dependencies` (by logical name) for every custom resource. */
function withRebuiltDependencies(recorded: readonly MockRecord[]): PolicyRecord[] {
    const custom = recorded.filter((r) => r.custom);
    const ids = new Map(custom.map((r) => [r, identifiers(r)]));
    const byUrn = new Map(custom.map((r) => [r.urn, r.name]));
    return custom.map((r) => {
        const propertyDependencies: Record<string, string[]> = {};
        for (const [key, value] of Object.entries(r.inputs)) {
            const values = strings(value);
            const sources = custom.filter((other) => {
                if (other === r) {
                    return false;
                }
                const { exact, embedded } = ids.get(other)!;
                return values.some((v) => exact.has(v) || embedded.some((id) => v.includes(id)));
            });
            if (sources.length > 0) {
                propertyDependencies[key] = sources.map((s) => s.name);
            }
        }
        const registered = r.dependencies.map((urn) => byUrn.get(urn)).filter((n): n is string => n !== undefined);
        const dependencies = [...new Set([...registered, ...Object.values(propertyDependencies).flat()])];
        // A resource the program reads has no inputs: a policy sees the properties it was read with.
        return { type: r.type, name: r.name, inputs: r.read ? r.state : r.inputs, urn: r.urn, dependencies, propertyDependencies };
    });
}

describe("policy pack: the component passes its own pack", () => {
    let stack: PolicyRecord[];

    before(async () => {
        const recorded = await runProgram(() => new HybridCounterComponent("orders", { createThresholdTopic: true }));
        stack = withRebuiltDependencies(recorded);
    });

    it("rebuilds the dependencies the stack policies walk", () => {
        // Assess
        const deps = (name: string, property: string) => stack.find((r) => r.name === name)?.propertyDependencies?.[property];
        assert.deepEqual(deps("orders-stream-mapping", "eventSourceArn"), ["orders-table"]);
        assert.deepEqual(deps("orders-stream-mapping", "functionName"), ["orders-consumer"]);
        assert.deepEqual(deps("orders-stream-mapping", "destinationConfig"), ["orders-first-dlq"]);
        assert.deepEqual(deps("orders-redrive-mapping", "eventSourceArn"), ["orders-first-dlq"]);
        assert.deepEqual(deps("orders-first-dlq", "redrivePolicy"), ["orders-fatal-dlq"]);
        assert.deepEqual(deps("orders-consumer", "role"), ["orders-consumer-role"]);
        assert.deepEqual(deps("orders-consumer-policy", "role"), ["orders-consumer-role"]);
        assert.deepEqual(deps("orders-consumer-iterator-age", "dimensions"), ["orders-consumer"]);
        assert.deepEqual(deps("orders-first-dlq-depth", "dimensions"), ["orders-first-dlq"]);
        assert.ok(deps("orders-consumer", "environment")?.includes("orders-thresholds"));
    });

    it("reports zero violations, and every policy of the pack applies to it", async () => {
        // Act
        const run = await runPolicies(hybridCounterPolicies(), stack);

        // Assess
        assert.deepEqual(run.violations, []);
        assert.deepEqual(run.unknownValueErrors, []);
        assert.deepEqual(run.notApplicable, []);
        assert.equal(POLICY_NAMES.length, 18);
    });

    it("would catch a change to the component's mapping (the check is not vacuous)", async () => {
        // Prepare
        const changed = stack.map((r) =>
            r.name === "orders-stream-mapping" ? { ...r, inputs: { ...r.inputs, startingPosition: "LATEST" } } : r,
        );

        // Act
        const run = await runPolicies(hybridCounterPolicies(), changed);

        // Assess
        assert.deepEqual(
            run.violations.map((v) => [v.policy, v.resource]),
            [["stream-mapping-trim-horizon", "orders-stream-mapping"]],
        );
    });

    /** The recorded graph with one property of one resource changed. */
    const changed = (name: string, change: (inputs: Record<string, any>) => Record<string, any>) =>
        stack.map((r) => (r.name === name ? { ...r, inputs: change(r.inputs as Record<string, any>) } : r));
    const mandatory = async (graph: PolicyRecord[]) =>
        (await runPolicies(hybridCounterPolicies(), graph)).violations.map((v) => [v.policy, v.resource, v.level]);

    it("would catch the component's mapping running two batches of a shard at once, or losing its tumbling window", async () => {
        // Act
        const parallel = await mandatory(changed("orders-stream-mapping", (i) => ({ ...i, parallelizationFactor: 2 })));
        const windowless = await mandatory(changed("orders-stream-mapping", ({ tumblingWindowInSeconds: _window, ...i }) => i));

        // Assess
        assert.deepEqual(parallel, [["stream-mapping-counter-parallelization", "orders-stream-mapping", "mandatory"]]);
        assert.deepEqual(windowless, [["stream-mapping-counter-tumbling-window", "orders-stream-mapping", "mandatory"]]);
    });

    it("would catch an unencrypted threshold topic, and a settler role that may not publish to it", async () => {
        // Act
        const plain = await mandatory(changed("orders-thresholds", ({ kmsMasterKeyId: _key, ...i }) => i));
        const mute = await mandatory(
            changed("orders-settler-policy", (i) => {
                const doc = JSON.parse(i.policy as string) as { Statement: Array<{ Sid: string }> };
                return {
                    ...i,
                    policy: JSON.stringify({ ...doc, Statement: doc.Statement.filter((st) => st.Sid !== "PublishThresholdEvents") }),
                };
            }),
        );

        // Assess
        assert.deepEqual(plain, [["counter-threshold-topic", "orders-thresholds", "mandatory"]]);
        assert.deepEqual(mute, [["counter-threshold-topic", "orders-settler", "mandatory"]]);
    });

    it("passes a component sending its threshold events to a topic of another stack", async () => {
        // Act
        const graph = withRebuiltDependencies(
            await runProgram(
                () => new HybridCounterComponent("orders", { thresholdTopicArn: "arn:aws:sns:us-east-1:123456789012:limits" }),
            ),
        );
        const run = await runPolicies(hybridCounterPolicies({ all: "mandatory" }), graph);

        // Assess
        assert.deepEqual([run.violations, run.notApplicable, run.unknownValueErrors], [[], [], []]);
    });

    it("reports a TableReplica of the component's attached table, which the component itself cannot see", async () => {
        // Prepare: a table without replicas (the component accepts it), replicated by a resource of its own.
        const program = () => {
            const table = new aws.dynamodb.Table("app", {
                name: "app-table",
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
            });
            new aws.dynamodb.TableReplica("app-west", { globalTableArn: table.arn, region: "us-west-2" });
            const component = new HybridCounterComponent("orders", { table });
            outcome = component.ready().then(
                () => "resolved",
                (error: unknown) => error,
            );
            return component;
        };
        let outcome: Promise<unknown> = Promise.resolve("not attached");

        // Act
        const run = await runPolicies(hybridCounterPolicies(), withRebuiltDependencies(await runProgram(program)));

        // Assess
        assert.equal(await outcome, "resolved");
        assert.deepEqual(
            run.violations.map((v) => [v.policy, v.resource, v.level, v.message]),
            [
                [
                    "counter-table-replicas",
                    "app-west",
                    "mandatory",
                    "table replica 'app-west' in us-west-2 replicates table 'app' ([globalTableArn]), which feeds a hybrid counter through " +
                        "event source mapping 'orders-stream-mapping', but its consumer 'orders-consumer' has no [HYBRID_COUNTER_REGIONS], so each " +
                        "region's stream carries every region's writes and a consumer per region counts each write once per region",
                ],
            ],
        );
    });

    it("reports zero violations with every policy raised to mandatory", async () => {
        // Act
        const run = await runPolicies(hybridCounterPolicies({ all: "mandatory" }), stack);

        // Assess
        assert.deepEqual(run.violations, []);
    });

    it("passes a counter on a TableReplica-replicated table once it sets [regions], and reports the same graph without it", async () => {
        // Prepare: the same program twice, the component's [regions] the one change.
        const program = (withRegions: boolean) => () => {
            const table = new aws.dynamodb.Table("app", {
                name: "app-table",
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
            });
            new aws.dynamodb.TableReplica("app-west", { globalTableArn: table.arn, region: "us-west-2" });
            const regions = { current: "us-east-1", members: [{ region: "us-east-1", role: "home" as const }, { region: "us-west-2" }] };
            const component = new HybridCounterComponent("orders", { table, ...(withRegions ? { regions } : {}) });
            outcomes.push(
                component.ready().then(
                    () => "resolved",
                    (error: unknown) => error,
                ),
            );
            return component;
        };
        const outcomes: Array<Promise<unknown>> = [];

        // Act
        const withRegions = await runPolicies(hybridCounterPolicies(), withRebuiltDependencies(await runProgram(program(true))));
        const without = await runPolicies(hybridCounterPolicies(), withRebuiltDependencies(await runProgram(program(false))));

        // Assess
        assert.deepEqual(await Promise.all(outcomes), ["resolved", "resolved"]);
        assert.deepEqual(withRegions.violations, []);
        assert.deepEqual(
            without.violations.map((v) => [v.policy, v.resource]),
            [["counter-table-replicas", "app-west"]],
        );
    });

    it("passes every region of the multi-region example (a global table, one component per region), with nothing left unapplied", async () => {
        // Prepare
        const restore = resolvePackageToSource();
        let recorded: MockRecord[];
        try {
            recorded = (await runMultiRegionExample()).resources;
        } finally {
            restore();
        }
        const graph = withRebuiltDependencies(recorded);

        // Act
        const run = await runPolicies(hybridCounterPolicies({ all: "mandatory" }), graph);
        const stripped = await runPolicies(
            hybridCounterPolicies(),
            graph.map((r) =>
                r.name === "orders-counter-eu-west-1-consumer"
                    ? {
                          ...r,
                          inputs: {
                              ...r.inputs,
                              environment: {
                                  variables: {
                                      ...(r.inputs.environment as { variables: Record<string, string> }).variables,
                                      HYBRID_COUNTER_REGIONS: "",
                                  },
                              },
                          },
                      }
                    : r,
            ),
        );

        // Assess: the pack passes the program; without one region's setting, that region's replica is reported.
        assert.deepEqual(run.violations, []);
        assert.deepEqual(run.unknownValueErrors, []);
        assert.deepEqual(
            stripped.violations.map((v) => [v.policy, v.resource]),
            [["counter-table-replicas", "orders-eu-west-1"]],
        );
    });

    it("reports a region of the multi-region example whose members leave out a replica of its table", async () => {
        // Prepare: the recorded graph, with the home region's consumer counting for two of the three regions.
        const restore = resolvePackageToSource();
        let recorded: MockRecord[];
        try {
            recorded = (await runMultiRegionExample()).resources;
        } finally {
            restore();
        }
        const twoRegions = JSON.stringify({
            current: "us-east-1",
            members: [
                { region: "us-east-1", role: "home" },
                { region: "eu-west-1", role: "member" },
            ],
        });
        const graph = withRebuiltDependencies(recorded).map((r) =>
            r.name === "orders-counter-us-east-1-consumer"
                ? {
                      ...r,
                      inputs: {
                          ...r.inputs,
                          environment: {
                              variables: {
                                  ...(r.inputs.environment as { variables: Record<string, string> }).variables,
                                  HYBRID_COUNTER_REGIONS: twoRegions,
                              },
                          },
                      },
                  }
                : r,
        );

        // Act
        const run = await runPolicies(hybridCounterPolicies(), graph);

        // Assess
        assert.deepEqual(
            run.violations.map((v) => [v.policy, v.resource, v.level, v.message]),
            [
                [
                    "counter-table-replicas",
                    "orders",
                    "mandatory",
                    "table 'orders' is in us-east-1, eu-west-1, ap-southeast-2 (its own region and its replicas'), but its consumer " +
                        "'orders-counter-us-east-1-consumer' counts for [HYBRID_COUNTER_REGIONS] members us-east-1, eu-west-1 (event source " +
                        "mapping 'orders-counter-us-east-1-stream-mapping'): ap-southeast-2 is no member, so writes made there would be counted " +
                        "by no region of their own; the members must be exactly the table's regions",
                ],
            ],
        );
    });
});
