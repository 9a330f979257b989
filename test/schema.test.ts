/**
 * The multi-language component, tested without the Pulumi CLI: the schema that the plugin host infers
 * (`ComponentProvider` from `@pulumi/pulumi/provider/experimental`, in process) against the TypeScript
 * source and the committed schema.json, and `construct()` (what a Python or YAML program's
 * `HybridCounterComponent(...)` runs) against the TypeScript constructor, both under Pulumi mocks.
 */
import * as assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { ComponentProvider } from "@pulumi/pulumi/provider/experimental/provider";
import * as ts from "typescript";
import {
    ALARM_NAMES,
    AlarmName,
    Architecture,
    BillingMode,
    COMPONENT_TYPE,
    HybridCounterComponent,
    type HybridCounterComponentArgs,
} from "../index";
import { DEFAULT_LAYOUT } from "../runtime/shared/config";
import { outputValue, runProgramWithResult, type RecordedResource } from "../local/deployment/pulumi-mocks";
import { ROOT, SCHEMA_FILE, SCHEMA_UPDATE_COMMAND, componentProvider, inferSchemaText } from "../scripts/schema";

interface PropertySpec {
    type?: string;
    $ref?: string;
    items?: PropertySpec;
    additionalProperties?: PropertySpec;
    optional?: boolean;
    plain?: boolean;
    description?: string;
}
interface Schema {
    name: string;
    version: string;
    resources: Record<
        string,
        {
            isComponent: boolean;
            inputProperties: Record<string, PropertySpec>;
            properties: Record<string, PropertySpec>;
            required: string[];
            requiredInputs: string[];
        }
    >;
    types: Record<
        string,
        { type: string; enum?: Array<{ name: string; value: string; description?: string }>; properties?: Record<string, PropertySpec> }
    >;
    dependencies: Array<{ name: string; version: string }>;
}

const manifest = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
    name: string;
    version: string;
    dependencies: Record<string, string>;
};
const type = (name: string) => `hybrid-counter:index:${name}`;

/** Name and TSDoc text of each property of an interface or each public readonly property of a class, read with the compiler. */
function documentedMembers(file: string, declarationName: string): Array<[string, string]> {
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
    const out: Array<[string, string]> = [];
    const visit = (node: ts.Node) => {
        if ((ts.isInterfaceDeclaration(node) || ts.isClassDeclaration(node)) && node.name?.text === declarationName) {
            for (const member of node.members) {
                const isPublicField =
                    ts.isPropertySignature(member) ||
                    (ts.isPropertyDeclaration(member) &&
                        !(
                            ts.getCombinedModifierFlags(member) &
                            (ts.ModifierFlags.Static | ts.ModifierFlags.Private | ts.ModifierFlags.Protected)
                        ));
                if (isPublicField && member.name && ts.isIdentifier(member.name)) {
                    const docs = ts.getJSDocCommentsAndTags(member).filter(ts.isJSDoc);
                    out.push([member.name.text, docs.map((d) => ts.getTextOfJSDocComment(d.comment) ?? "").join("\n")]);
                }
            }
        }
        ts.forEachChild(node, visit);
    };
    visit(source);
    return out;
}

describe("the multi-language component (schema inferred by @pulumi/pulumi/provider/experimental)", () => {
    let provider: ComponentProvider;
    let inferredText: string;
    let schema: Schema;
    let component: Schema["resources"][string];

    before(async () => {
        provider = componentProvider();
        inferredText = await inferSchemaText(provider);
        schema = JSON.parse(inferredText) as Schema;
        component = schema.resources[COMPONENT_TYPE]!;
    });

    it("PulumiPlugin.yaml at the root serves the package with the nodejs runtime", () => {
        // Assess
        assert.equal(
            readFileSync(path.join(ROOT, "PulumiPlugin.yaml"), "utf8")
                .replace(/^#.*\n/gm, "")
                .trim(),
            "runtime: nodejs",
        );
    });

    it("matches the committed schema.json", () => {
        // Prepare
        const committed = existsSync(SCHEMA_FILE) ? readFileSync(SCHEMA_FILE, "utf8") : "(schema.json is missing)";
        // Assess
        assert.equal(
            inferredText,
            committed,
            `schema.json is not the schema Pulumi infers from the component's args and outputs. ` +
                `If the change is intended, run \`${SCHEMA_UPDATE_COMMAND}\` and commit schema.json with it.`,
        );
    });

    it("names the package, its version from package.json and the one component", () => {
        // Assess
        assert.equal(schema.name, "hybrid-counter");
        assert.equal(schema.version, manifest.version);
        assert.deepEqual(Object.keys(schema.resources), [COMPONENT_TYPE]);
        assert.equal(component.isComponent, true);
    });

    it("depends on the aws package at the installed @pulumi/aws version, which the caret range admits", () => {
        // Prepare
        const installed = (JSON.parse(readFileSync(require.resolve("@pulumi/aws/package.json"), "utf8")) as { version: string }).version;
        // Assess
        assert.deepEqual(schema.dependencies, [{ name: "aws", version: installed }]);
        assert.match(manifest.dependencies["@pulumi/aws"]!, new RegExp(`^\\^${installed.split(".")[0]}\\.`));
    });

    it("has every arg of HybridCounterComponentArgs as an optional input, with its TSDoc as the description", () => {
        // Prepare
        // The backfill args are inherited from BackfillArgs (components/args.ts).
        const args = [
            ...documentedMembers(path.join(ROOT, "components", "args.ts"), "HybridCounterComponentArgs"),
            ...documentedMembers(path.join(ROOT, "components", "args.ts"), "BackfillArgs"),
        ];
        // Assess
        assert.deepEqual(
            Object.keys(component.inputProperties),
            args.map(([name]) => name),
        );
        for (const [name, doc] of args) {
            assert.ok(doc.length > 0, `${name} has TSDoc`);
            assert.equal(component.inputProperties[name]!.description, doc, name);
            assert.equal(component.inputProperties[name]!.optional, true, name);
        }
        assert.deepEqual(component.requiredInputs, []);
    });

    it("has every public output of HybridCounterComponent as an output, with its TSDoc as the description", () => {
        // Prepare
        const outputs = documentedMembers(path.join(ROOT, "components", "component.ts"), "HybridCounterComponent").filter(
            ([name]) => name !== "bundlePaths",
        );
        // Assess
        assert.deepEqual(
            Object.keys(component.properties),
            outputs.map(([name]) => name),
        );
        for (const [name, doc] of outputs) {
            assert.ok(doc.length > 0, `${name} has TSDoc`);
            assert.equal(component.properties[name]!.description, doc, name);
        }
        assert.deepEqual(
            component.required,
            outputs
                .map(([name]) => name)
                .filter((name) => name !== "alarmTopicArn" && name !== "thresholdTopicArn")
                .sort(),
        );
    });

    it("types the inputs: the table as a reference to aws:dynamodb/table:Table, Inputs as non-plain, the choices as enums", () => {
        // Prepare
        const input = (name: string) => {
            const { description: _description, ...spec } = component.inputProperties[name]!;
            return spec;
        };
        const aws = schema.dependencies[0]!;
        // Assess
        assert.deepEqual(input("table"), {
            $ref: `/aws/v${aws.version}/schema.json#/resources/aws:dynamodb%2Ftable:Table`,
            optional: true,
            plain: true,
        });
        assert.deepEqual(input("tableName"), { type: "string", optional: true });
        assert.deepEqual(input("tableKmsKeyArn"), { type: "string", optional: true });
        assert.deepEqual(input("alarmTopicArn"), { type: "string", optional: true });
        assert.deepEqual(input("billingMode"), { $ref: `#/types/${type("BillingMode")}`, optional: true, plain: true });
        assert.deepEqual(input("architecture"), { $ref: `#/types/${type("Architecture")}`, optional: true, plain: true });
        assert.deepEqual(input("disabledAlarms"), {
            type: "array",
            items: { $ref: `#/types/${type("AlarmName")}`, plain: true },
            optional: true,
            plain: true,
        });
        assert.deepEqual(input("tags"), { type: "object", additionalProperties: { type: "string" }, optional: true });
        assert.deepEqual(input("batchSize"), { type: "number", optional: true, plain: true });
        assert.deepEqual(input("tracing"), { type: "boolean", optional: true, plain: true });
        assert.deepEqual(input("partitionKey"), { type: "string", optional: true, plain: true });
        assert.deepEqual(input("counterShards"), { type: "number", optional: true, plain: true });
        assert.deepEqual(input("parallelizationFactor"), { type: "number", optional: true, plain: true });
        assert.deepEqual(input("counterMode"), { $ref: `#/types/${type("CounterModeArg")}`, optional: true, plain: true });
        assert.deepEqual(input("healQuietWindowSeconds"), { type: "number", optional: true, plain: true });
        assert.deepEqual(input("thresholds"), { type: "array", items: { type: "number", plain: true }, optional: true, plain: true });
        assert.deepEqual(input("createThresholdTopic"), { type: "boolean", optional: true, plain: true });
        assert.deepEqual(input("thresholdTopicArn"), { type: "string", optional: true });
        assert.deepEqual(input("usageRetentionDays"), { type: "number", optional: true, plain: true });
        assert.equal("backfillStrict" in component.inputProperties, false);
    });

    it("describes counterShards, parallelizationFactor and the ledger period for every language: ranges, placement and why", () => {
        // Assess
        assert.equal(
            component.inputProperties.counterShards!.description,
            "How many partitions of the counters table each key's best-effort spreads over, 1..16: a key's best-effort\n" +
                "is one item per shard, each under a partition key of its own, so the client writes of a key hotter than one\n" +
                "partition's throughput are spread over several (the eventual counter stays one item per key, written once\n" +
                'per key per batch). Above 1 only with `counterPlacement: "separate"` (a shard\'s partition key must not be the\n' +
                "user's). Every function and the API's client take it (`clientConfig`, `apiEnvironment`); reading a key's\n" +
                "counters reads every shard (one Query, 1 RCU, per shard).",
        );
        assert.equal(
            component.inputProperties.parallelizationFactor!.description,
            "Concurrent batches per stream shard: only 1 is accepted. The consumer keeps its progress (the marks on each\n" +
                "key's eventual item, and the open ranges of each stream shard) per stream shard, which needs the batches of\n" +
                "one shard applied one at a time, in order (docs/design/core.md).",
        );
        assert.equal(
            component.inputProperties.healQuietWindowSeconds!.description,
            "The ledger period (s), 421..86400. Every best-effort write of a client call is also recorded in the ledger\n" +
                "entry of its item's period (the period of the item's creation), so a life's best-effort is taken from the\n" +
                'ledger for one to two periods, then counted from the table by a heal (docs/design/core.md, "Best-effort:\n' +
                "the young ledger\"). It must exceed `clientDeadlineMs` + a request's lifetime (a SigV4 signature is valid\n" +
                "for 5 minutes) + twice 60 s of clock skew between API hosts and the functions: 431 s at least for the\n" +
                "default 10 s deadline. Every function gets it, and `clientConfig` always carries it: a client whose\n" +
                "`deadlineMs` it does not cover is refused.",
        );
        assert.deepEqual(schema.types[type("HybridCounterClientConfig")]!.properties!.counterShards, {
            type: "number",
            optional: true,
            description:
                "The partitions of the counters table each key's best-effort spreads over, when above 1 (the `counterShards` arg).",
        });
    });

    it("has enums whose values are the TypeScript API's own strings, with readable names", () => {
        // Assess
        const members = (name: string) => schema.types[type(name)]!.enum!.map(({ name: member, value }) => [member, value]);
        assert.deepEqual(members("BillingMode"), [
            ["PayPerRequest", "PAY_PER_REQUEST"],
            ["Provisioned", "PROVISIONED"],
        ]);
        assert.deepEqual(members("BillingMode"), Object.entries(BillingMode));
        assert.deepEqual(members("Architecture"), Object.entries(Architecture));
        assert.deepEqual(members("AlarmName"), Object.entries(AlarmName));
        assert.deepEqual(
            members("AlarmName").map(([, value]) => value),
            [...ALARM_NAMES],
        );
        for (const name of ["BillingMode", "Architecture", "AlarmName"]) {
            assert.equal(schema.types[type(name)]!.type, "string");
            assert.ok(
                schema.types[type(name)]!.enum!.every((m) => (m.description ?? "").length > 0),
                `${name}: every member has a description`,
            );
        }
    });

    it("types the outputs: strings, the alarm ARNs by alarm name, and the client config", () => {
        // Assess
        assert.deepEqual(component.properties.tableArn, { type: "string", description: component.properties.tableArn!.description });
        assert.deepEqual(component.properties.alarmTopicArn, {
            type: "string",
            optional: true,
            description: component.properties.alarmTopicArn!.description,
        });
        assert.equal(component.properties.alarmArns!.$ref, `#/types/${type("HybridCounterAlarmArns")}`);
        assert.deepEqual(Object.keys(schema.types[type("HybridCounterAlarmArns")]!.properties!), [...ALARM_NAMES]);
        assert.ok(Object.values(schema.types[type("HybridCounterAlarmArns")]!.properties!).every((p) => p.type === "string" && p.optional));
        assert.equal(component.properties.clientConfig!.$ref, `#/types/${type("HybridCounterClientConfig")}`);
        assert.deepEqual(Object.keys(schema.types[type("HybridCounterClientConfig")]!.properties!).sort(), [
            "countAttribute",
            "countedAttributeName",
            "countedAttributeValue",
            "countedItems",
            "countedSortKeyPrefix",
            "counterMode",
            "counterPrefix",
            "counterShards",
            "countersTableName",
            "deletedAttribute",
            "healQuietWindowSeconds",
            "partitionKey",
            "regionAttribute",
            "regions",
            "sortKey",
            "tableName",
            "tokenAttribute",
        ]);
        // The mode and the ledger period are always there: every language's client is built from them.
        assert.deepEqual((schema.types[type("HybridCounterClientConfig")] as { required?: string[] }).required, [
            "countAttribute",
            "countedItems",
            "counterMode",
            "counterPrefix",
            "countersTableName",
            "deletedAttribute",
            "healQuietWindowSeconds",
            "partitionKey",
            "sortKey",
            "tableName",
            "tokenAttribute",
        ]);
        assert.deepEqual(schema.types[type("HybridCounterClientConfig")]!.properties!.counterMode, {
            $ref: `#/types/${type("CounterModeArg")}`,
            description: "The counter's mode (the `counterMode` arg): a client built with another mode is refused.",
        });
        assert.deepEqual(component.properties.thresholdTopicArn, {
            type: "string",
            optional: true,
            description: component.properties.thresholdTopicArn!.description,
        });
        // A multi-region counter's setting, as every language reads it from clientConfig.
        assert.deepEqual(Object.keys(schema.types[type("RegionsSetting")]!.properties!), ["current", "members"]);
        assert.deepEqual(Object.keys(schema.types[type("RegionMember")]!.properties!), ["region", "role"]);
        assert.deepEqual(
            Object.keys(DEFAULT_LAYOUT)
                .filter((k) => k !== "selection")
                .every((k) => k in schema.types[type("HybridCounterClientConfig")]!.properties!),
            true,
        );
    });

    describe("construct(), as a Python or YAML program's component runs it, under Pulumi mocks", () => {
        /** Each recorded resource without its URN-bearing fields, parented by logical name. */
        // An archive's assets are a promise, whose internal async bookkeeping differs from one construction to
        // the next: compare archives by kind (the bundles themselves are compared byte for byte elsewhere).
        const plain = (value: unknown): unknown => {
            if (value === null || typeof value !== "object") {
                return value;
            }
            if ((value as { __pulumiArchive?: boolean }).__pulumiArchive === true) {
                return "<archive>";
            }
            if (Array.isArray(value)) {
                return value.map(plain);
            }
            return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
        };
        const shape = (resources: readonly RecordedResource[]) => {
            const byUrn = new Map(resources.map((r) => [r.urn, r.name]));
            return resources.map((r) => ({
                type: r.type,
                name: r.name,
                parent: r.parent === undefined ? undefined : byUrn.get(r.parent),
                custom: r.custom,
                inputs: plain(r.inputs),
            }));
        };
        const outputs = async (state: Record<string, pulumi.Input<unknown>>) =>
            Object.fromEntries(await Promise.all(Object.entries(state).map(async ([k, v]) => [k, await outputValue(v)] as const)));

        /** The same args, once through the TypeScript constructor and once through the provider. */
        async function bothWays(args: () => HybridCounterComponentArgs) {
            const typescript = await runProgramWithResult(async () => {
                const c = new HybridCounterComponent("orders", args());
                return outputs(
                    Object.fromEntries(
                        Object.keys(component.properties).map((k) => [k, (c as unknown as Record<string, pulumi.Output<unknown>>)[k]!]),
                    ),
                );
            });
            const constructed = await runProgramWithResult(async () => {
                const { state } = await provider.construct("orders", COMPONENT_TYPE, args() as pulumi.Inputs, {});
                return { keys: Object.keys(state), values: await outputs(state as Record<string, pulumi.Input<unknown>>) };
            });
            return { typescript, constructed };
        }

        it("builds the same 33 resources with the same inputs as the TypeScript constructor, and returns every output", async () => {
            // Act
            const { typescript, constructed } = await bothWays(() => ({}));
            // Assess
            assert.equal(constructed.resources.length, 33);
            assert.deepEqual(shape(constructed.resources), shape(typescript.resources));
            assert.deepEqual(constructed.result.keys, Object.keys(component.properties));
            assert.deepEqual(constructed.result.values, typescript.result);
            assert.equal(constructed.result.values.tableName, "orders-table");
        });

        it("takes the enums as the plain strings other languages send", async () => {
            // Prepare
            const args = (): HybridCounterComponentArgs => ({
                billingMode: "PROVISIONED",
                readCapacity: 5,
                writeCapacity: 5,
                architecture: "x86_64",
                disabledAlarms: ["consumerThrottles", "redriveErrors"],
                tags: { team: "payments" },
            });
            // Act
            const { typescript, constructed } = await bothWays(args);
            // Assess
            assert.deepEqual(shape(constructed.resources), shape(typescript.resources));
            assert.equal(constructed.resources.length, 31);
            const table = constructed.resources.find((r) => r.name === "orders-table")!;
            assert.deepEqual([table.inputs.billingMode, table.inputs.readCapacity, table.inputs.writeCapacity], ["PROVISIONED", 5, 5]);
            assert.deepEqual(constructed.resources.find((r) => r.name === "orders-consumer")!.inputs.architectures, ["x86_64"]);
            assert.deepEqual(Object.keys(constructed.result.values.alarmArns as object), [
                "consumerIteratorAge",
                "consumerErrors",
                "firstDlqDepth",
                "firstDlqAge",
                "fatalDlqDepth",
            ]);
        });

        it("attaches to a table passed by reference, as a YAML program's ${table} passes it", async () => {
            // Prepare
            const args = (): HybridCounterComponentArgs => ({
                table: new aws.dynamodb.Table("app", {
                    hashKey: "pk",
                    rangeKey: "sk",
                    attributes: [
                        { name: "pk", type: "S" },
                        { name: "sk", type: "S" },
                    ],
                    billingMode: "PAY_PER_REQUEST",
                    streamEnabled: true,
                    streamViewType: "NEW_AND_OLD_IMAGES",
                }),
            });
            // Act
            const { typescript, constructed } = await bothWays(args);
            // Assess
            assert.deepEqual(shape(constructed.resources), shape(typescript.resources));
            assert.deepEqual(
                constructed.resources.filter((r) => r.type === "aws:dynamodb/table:Table").map((r) => r.name),
                ["app", "orders-counters"],
            );
            assert.equal(constructed.result.values.tableName, "app");
        });

        it("takes counterShards as the number other languages send, into every function and the client config", async () => {
            // Act
            const { typescript, constructed } = await bothWays(() => ({ counterShards: 4 }));
            // Assess
            assert.deepEqual(shape(constructed.resources), shape(typescript.resources));
            assert.equal(constructed.resources.length, 33);
            for (const fn of ["orders-consumer", "orders-redrive", "orders-settler"]) {
                const variables = constructed.resources.find((r) => r.name === fn)!.inputs.environment.variables as Record<string, string>;
                assert.equal(variables.HYBRID_COUNTER_COUNTER_SHARDS, "4", fn);
            }
            assert.deepEqual(constructed.result.values, typescript.result);
            assert.equal((constructed.result.values.clientConfig as { counterShards?: number }).counterShards, 4);
            assert.equal((constructed.result.values.apiEnvironment as Record<string, string>).HYBRID_COUNTER_COUNTER_SHARDS, "4");
        });

        it("takes the mode, the thresholds, the threshold topic and the usage retention as other languages send them", async () => {
            // Act
            const { typescript, constructed } = await bothWays(() => ({
                counterMode: "strict",
                thresholds: [0.5, 1],
                createThresholdTopic: true,
                usageRetentionDays: 30,
            }));
            // Assess
            assert.deepEqual(shape(constructed.resources), shape(typescript.resources));
            assert.equal(constructed.resources.length, 34);
            const variables = constructed.resources.find((r) => r.name === "orders-consumer")!.inputs.environment.variables as Record<
                string,
                string
            >;
            assert.deepEqual(
                [variables.HYBRID_COUNTER_MODE, variables.HYBRID_COUNTER_THRESHOLDS, variables.HYBRID_COUNTER_USAGE_RETENTION_DAYS],
                ["strict", "0.5,1", "30"],
            );
            assert.deepEqual(constructed.result.values, typescript.result);
            assert.equal((constructed.result.values.clientConfig as { counterMode: string }).counterMode, "strict");
            assert.equal(constructed.result.values.thresholdTopicArn, "arn:aws:sns:us-east-1:123456789012:orders-thresholds");
        });

        it("refuses a parallelizationFactor other than 1, naming the field", async () => {
            // Act
            const attempt = runProgramWithResult(() => provider.construct("orders", COMPONENT_TYPE, { parallelizationFactor: 2 }, {}));
            // Assess
            await assert.rejects(attempt, (error: Error) => {
                assert.equal(
                    error.message,
                    "invalid HybridCounterComponent args:\n  - [parallelizationFactor] must be 1 (got 2): the consumer's marks need the " +
                        "batches of one stream shard applied one at a time",
                );
                return true;
            });
        });

        it("refuses counterShards above 1 in the same-table placement, naming both args", async () => {
            // Act
            const attempt = runProgramWithResult(() =>
                provider.construct("orders", COMPONENT_TYPE, { counterShards: 2, counterPlacement: "same-table" }, {}),
            );
            // Assess
            await assert.rejects(attempt, (error: Error) => {
                assert.equal(
                    error.message,
                    'invalid HybridCounterComponent args:\n  - [counterShards] above 1 needs [counterPlacement] "separate" (got 2 with "same-table"): ' +
                        "a key's shards are partition keys of the counters table, which in the same-table placement are the user's",
                );
                return true;
            });
        });

        it("rejects bad args with the component's own message, naming the field", async () => {
            // Act
            const attempt = runProgramWithResult(() =>
                provider.construct("orders", COMPONENT_TYPE, { batchSize: 0, billingMode: "ON_DEMAND" }, {}),
            );
            // Assess
            await assert.rejects(attempt, (error: Error) => {
                assert.equal(
                    error.message,
                    'invalid HybridCounterComponent args:\n  - [billingMode] must be "PAY_PER_REQUEST" or "PROVISIONED"\n  - [batchSize] must be between 1 and 10000',
                );
                return true;
            });
        });
    });
});
