/**
 * The examples and the root program: each type-checks with its own tsconfig, and each composes exactly
 * what its README says under Pulumi mocks.
 */
import * as assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import Module from "node:module";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { HybridCounterClient } from "../runtime/client/client";
import { ROUTES } from "../examples/limits-api/app/handler";
import type { HybridCounterClientConfig } from "../components/component";
import { ENV, clientConfigFromEnv, layoutWithDefaults } from "../runtime/shared/config";
import { linkPackageInto } from "./support/example-link";
import {
    findResource,
    outputValue,
    resourcesOfType,
    runProgramWithResult,
    type ProgramRun,
    type RecordedResource,
} from "../local/deployment/pulumi-mocks";

const ROOT = path.resolve(__dirname, "..");
const COMPONENT = "hybrid-counter:index:HybridCounterComponent";
const TABLE = "aws:dynamodb/table:Table";
const MAPPING = "aws:lambda/eventSourceMapping:EventSourceMapping";
const ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy";
const FUNCTION = "aws:lambda/function:Function";
const ACCOUNT = "123456789012";

/** tsc on one project; resolves with its exit code and output. */
function typeCheck(project: string): Promise<{ code: number | null; output: string }> {
    return new Promise((resolve, reject) => {
        const child = spawn(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", project, "--noEmit"], { cwd: ROOT });
        let output = "";
        child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
        child.on("error", reject);
        child.on("exit", (code) => resolve({ code, output }));
    });
}

/**
 * The examples import the package by name, as a user's program does; inside the repository (where the
 * examples have no node_modules of their own) the names resolve to the package's source.
 */
const PACKAGE_SOURCES: Record<string, string> = {
    "hybrid-counter": path.join(ROOT, "index.ts"),
    "hybrid-counter/runtime": path.join(ROOT, "runtime", "index.ts"),
};
type ResolveFilename = (request: string, ...rest: unknown[]) => string;
const moduleInternals = Module as unknown as { _resolveFilename: ResolveFilename };
let originalResolve: ResolveFilename | undefined;

function resolvePackageToSource(): void {
    const original = moduleInternals._resolveFilename;
    originalResolve = original;
    moduleInternals._resolveFilename = function (request: string, ...rest: unknown[]) {
        return original.call(this, PACKAGE_SOURCES[request] ?? request, ...rest);
    };
}

function restoreResolution(): void {
    if (originalResolve) {
        moduleInternals._resolveFilename = originalResolve;
        originalResolve = undefined;
    }
}

/** Loads a Pulumi program's entry module afresh (its top level registers the resources). */
function loadProgram(file: string): Record<string, unknown> {
    const resolved = require.resolve(file);
    delete require.cache[resolved];
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a fresh load after clearing the cache
    return require(resolved) as Record<string, unknown>;
}

function runExample(file: string, project: string, config: Record<string, string> = {}): Promise<ProgramRun<Record<string, unknown>>> {
    return runProgramWithResult(
        () => {
            pulumi.runtime.setAllConfig(config);
            return loadProgram(file);
        },
        { project, stack: "dev" },
    );
}

function names(resources: readonly RecordedResource[], type: string): string[] {
    return resourcesOfType(resources, type).map((r) => r.name);
}

/** The program's own resources (not the component's children, not the stack), as sorted "type name" lines. */
function ownResources(resources: readonly RecordedResource[]): string[] {
    const componentUrns = new Set(resourcesOfType(resources, COMPONENT).map((r) => r.urn));
    return resources
        .filter((r) => r.type !== "pulumi:pulumi:Stack" && (r.parent === undefined || !componentUrns.has(r.parent)))
        .map((r) => `${r.type} ${r.name}`)
        .sort();
}

function policyResources(resource: RecordedResource): unknown[] {
    const document = JSON.parse(resource.inputs.policy as string) as { Statement: Array<{ Resource: unknown }> };
    return document.Statement.map((s) => s.Resource);
}

describe("examples and the root program", () => {
    const unlinks: Array<() => void> = [];
    before(() => {
        resolvePackageToSource();
        // tsc and the limits-api program's esbuild resolve the package as installed (through a link to the root).
        for (const example of ["existing-program", "limits-api", "multi-region"]) {
            unlinks.push(linkPackageInto(path.join(ROOT, "examples", example)));
        }
    });
    after(() => {
        unlinks.forEach((unlink) => unlink());
        restoreResolution();
        pulumi.runtime.setAllConfig({});
    });

    describe("type-check with their own tsconfig", () => {
        // Started together: each takes a few seconds.
        let checks: Record<string, Promise<{ code: number | null; output: string }>>;
        before(() => {
            checks = {
                "examples/existing-program/tsconfig.json": typeCheck("examples/existing-program/tsconfig.json"),
                "examples/limits-api/tsconfig.json": typeCheck("examples/limits-api/tsconfig.json"),
                "examples/multi-region/tsconfig.json": typeCheck("examples/multi-region/tsconfig.json"),
                "stack/tsconfig.json": typeCheck("stack/tsconfig.json"),
            };
        });
        for (const project of [
            "examples/existing-program/tsconfig.json",
            "examples/limits-api/tsconfig.json",
            "examples/multi-region/tsconfig.json",
            "stack/tsconfig.json",
        ]) {
            it(`tsc -p ${project} --noEmit exits 0`, async () => {
                // Act
                const { code, output } = await checks[project]!;
                // Assess
                assert.equal(code, 0, output);
            });
        }
    });

    describe("examples/existing-program", () => {
        let run: ProgramRun<Record<string, unknown>>;
        before(async () => {
            run = await runExample("../examples/existing-program/index.ts", "hybrid-counter-existing-program");
        });

        it("adds the component next to the program's own resources, and no second table", () => {
            // Assess
            assert.deepEqual(ownResources(run.resources), [
                "aws:dynamodb/table:Table orders",
                "aws:s3/bucket:Bucket orders-exports",
                "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock orders-exports",
                "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration orders-exports",
                "aws:sqs/queue:Queue order-notifications",
                `${COMPONENT} orders-counter`,
            ]);
            assert.deepEqual(names(run.resources, TABLE), ["orders", "orders-counter-counters"]);
            const component = findResource(run.resources, COMPONENT, "orders-counter");
            const children = run.resources.filter((r) => r.parent === component.urn);
            // The 22 children of an attached component (every role but -table), plus the alarm topic.
            assert.equal(children.length, 32);
            assert.deepEqual(
                children.filter((r) => r.type === "aws:sns/topic:Topic").map((r) => r.name),
                ["orders-counter-alarm-topic"],
            );
        });

        it("enables the table's stream with new and old images and keeps its keys", () => {
            // Assess
            const table = findResource(run.resources, TABLE, "orders");
            assert.equal(table.inputs.streamEnabled, true);
            assert.equal(table.inputs.streamViewType, "NEW_AND_OLD_IMAGES");
            assert.equal(table.inputs.hashKey, "tenantId");
            assert.equal(table.inputs.rangeKey, "orderId");
        });

        it("reads the program's own table's stream and counts in the counters table beside it", () => {
            // Prepare
            const tableArn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders`;
            const countersArn = `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/orders-counter-counters`;
            const streamArn = `${tableArn}/stream/2024-01-01T00:00:00.000`;
            // Assess
            assert.equal(findResource(run.resources, MAPPING, "orders-counter-stream-mapping").inputs.eventSourceArn, streamArn);
            for (const role of ["consumer", "redrive"]) {
                const resources = policyResources(findResource(run.resources, ROLE_POLICY, `orders-counter-${role}-policy`));
                assert.equal(resources[0], streamArn, `${role}: ReadOwnStream`);
                assert.ok(resources.includes(tableArn), `${role}: FlagAndRemoveItems`);
                assert.ok(resources.includes(countersArn), `${role}: CountInCountersTable`);
                assert.ok(
                    resources.every(
                        (r) =>
                            typeof r !== "string" ||
                            !r.startsWith("arn:aws:dynamodb:") ||
                            r === tableArn ||
                            r === countersArn ||
                            r === streamArn,
                    ),
                    `${role} policy names another table: ${JSON.stringify(resources)}`,
                );
            }
        });

        it("exports the clientConfig with the table's own key names, the mode and the period: a client is built from it alone", async () => {
            // Act
            const clientConfig = await outputValue(run.result.counterClientConfig as pulumi.Output<HybridCounterClientConfig>);
            const dynamodb = new DynamoDBClient({ region: "us-east-1", endpoint: "http://127.0.0.1:9" });
            const client = new HybridCounterClient({ ...clientConfig, dynamodb });
            dynamodb.destroy();
            // Assess
            assert.equal(client.mode, "utilization");
            assert.deepEqual(clientConfig, {
                tableName: "orders",
                countersTableName: "orders-counter-counters",
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
    });

    describe("examples/limits-api", () => {
        let run: ProgramRun<Record<string, unknown>>;
        before(async () => {
            run = await runExample("../examples/limits-api/index.ts", "limits-api", {
                "limits-api:tenantLimit": "25",
                "limits-api:tenantLimits": JSON.stringify({ "big-tenant": 1000 }),
            });
        });

        it("composes the strict counter, one API function, an HTTP API with the four routes and the invocation that stores the limits", () => {
            // Assess
            assert.deepEqual(ownResources(run.resources), [
                "aws:apigatewayv2/api:Api api",
                "aws:apigatewayv2/integration:Integration api-integration",
                "aws:apigatewayv2/route:Route api-count",
                "aws:apigatewayv2/route:Route api-create",
                "aws:apigatewayv2/route:Route api-delete",
                "aws:apigatewayv2/route:Route api-setLimit",
                "aws:apigatewayv2/stage:Stage api-stage",
                "aws:cloudwatch/logGroup:LogGroup api-logs",
                "aws:iam/role:Role api-role",
                "aws:iam/rolePolicy:RolePolicy api-policy",
                "aws:lambda/function:Function api",
                "aws:lambda/invocation:Invocation api-limits",
                "aws:lambda/permission:Permission api-invoke",
                `${COMPONENT} items`,
            ]);
            assert.equal(run.resources.filter((r) => r.type !== "pulumi:pulumi:Stack").length, 46);
            assert.deepEqual(names(run.resources, TABLE), ["items-table", "items-counters"]);
            assert.deepEqual(
                Object.keys(ROUTES).map((route) => {
                    const resource = findResource(run.resources, "aws:apigatewayv2/route:Route", `api-${route}`);
                    return [resource.inputs.routeKey, resource.inputs.target];
                }),
                [
                    ["POST /tenants/{tenant}/items", "integrations/api-integration-id"],
                    ["DELETE /tenants/{tenant}/items/{id}", "integrations/api-integration-id"],
                    ["GET /tenants/{tenant}/count", "integrations/api-integration-id"],
                    ["PUT /tenants/{tenant}/limit", "integrations/api-integration-id"],
                ],
            );
            const integration = findResource(run.resources, "aws:apigatewayv2/integration:Integration", "api-integration");
            assert.equal(integration.inputs.integrationType, "AWS_PROXY");
            assert.equal(integration.inputs.payloadFormatVersion, "2.0");
            assert.equal(integration.inputs.integrationUri, findResource(run.resources, FUNCTION, "api").state.invokeArn);
            const permission = findResource(run.resources, "aws:lambda/permission:Permission", "api-invoke");
            assert.deepEqual(
                [permission.inputs.action, permission.inputs.function, permission.inputs.principal],
                ["lambda:InvokeFunction", "api", "apigateway.amazonaws.com"],
            );
        });

        it("gives the function the component's apiEnvironment alone: the strict counter's client is built from it", async () => {
            // Prepare
            const clientConfig = await outputValue(run.result.clientConfig as pulumi.Output<HybridCounterClientConfig>);
            // Act
            const variables = findResource(run.resources, FUNCTION, "api").inputs.environment.variables as Record<string, string>;
            // Assess
            assert.deepEqual(
                [variables[ENV.tableName], variables[ENV.countersTableName], variables[ENV.counterMode]],
                ["items-table", "items-counters", "strict"],
            );
            assert.equal(clientConfig.counterMode, "strict");
            assert.deepEqual(clientConfigFromEnv(variables), {
                ...layoutWithDefaults(clientConfig),
                tableName: clientConfig.tableName,
                countersTableName: clientConfig.countersTableName,
                counterMode: "strict",
                healQuietWindowSeconds: clientConfig.healQuietWindowSeconds,
            });
            // No variable of the API's own: the limits are stored with the counter.
            assert.deepEqual(
                Object.keys(variables).filter((name) => !name.startsWith("HYBRID_COUNTER_")),
                [],
            );
        });

        it("stores the configured limits with the counter through one invocation of the function, after the counter exists", () => {
            // Assess
            const invocation = findResource(run.resources, "aws:lambda/invocation:Invocation", "api-limits");
            assert.equal(invocation.inputs.functionName, "api");
            assert.deepEqual(JSON.parse(invocation.inputs.input as string), {
                action: "storeLimits",
                defaultLimit: 25,
                tenantLimits: { "big-tenant": 1000 },
            });
            // dependsOn the component waits for its children: the counters table the limits are stored in among them.
            assert.ok(invocation.dependencies.includes(findResource(run.resources, TABLE, "items-counters").urn));
        });

        it("deploys the bundled handler and grants it exactly the client's table actions", () => {
            // Assess
            const fn = findResource(run.resources, FUNCTION, "api");
            assert.deepEqual(
                [fn.inputs.handler, fn.inputs.runtime, fn.inputs.architectures, fn.inputs.role],
                ["index.handler", "nodejs22.x", ["arm64"], `arn:aws:iam::${ACCOUNT}:role/api-role`],
            );
            const policy = JSON.parse(findResource(run.resources, ROLE_POLICY, "api-policy").inputs.policy as string);
            assert.deepEqual(policy.Statement, [
                {
                    Sid: "WriteResourceItems",
                    Effect: "Allow",
                    Action: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                    Resource: `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/items-table`,
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
                    Resource: `arn:aws:dynamodb:us-east-1:${ACCOUNT}:table/items-counters`,
                },
                {
                    Sid: "WriteOwnLogs",
                    Effect: "Allow",
                    Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
                    Resource: `arn:aws:logs:us-east-1:${ACCOUNT}:log-group:api-logs:*`,
                },
            ]);
        });

        it("rejects a limit that is not a non-negative integer before creating anything", async () => {
            // Act
            const attempt = runExample("../examples/limits-api/index.ts", "limits-api", { "limits-api:tenantLimit": "-1" });
            // Assess
            await assert.rejects(attempt, /invalid limits-api settings: \[defaultLimit\] must be a non-negative integer; found -1/);
        });
    });

    describe("the root program (stack/)", () => {
        it("deploys one default component named counter when nothing is configured, and exports every output", async () => {
            // Act
            const run = await runExample("../stack/index.ts", "hybrid-counter");
            // Assess
            const components = resourcesOfType(run.resources, COMPONENT);
            assert.deepEqual(
                components.map((r) => r.name),
                ["counter"],
            );
            // The 23 children of a component that creates its table.
            assert.equal(run.resources.filter((r) => r.parent === components[0]!.urn).length, 32);
            assert.deepEqual(names(run.resources, TABLE), ["counter-table", "counter-counters"]);
            assert.deepEqual(Object.keys(run.result).sort(), [
                "alarmArns",
                "alarmTopicArn",
                "apiEnvironment",
                "apiPolicyDocument",
                "clientConfig",
                "consumerFunctionArn",
                "consumerFunctionName",
                "countersTableArn",
                "countersTableName",
                "dashboardName",
                "fatalDlqArn",
                "fatalDlqUrl",
                "firstDlqArn",
                "firstDlqUrl",
                "redriveFunctionArn",
                "redriveFunctionName",
                "tableArn",
                "tableName",
                "tableStreamArn",
                "thresholdTopicArn",
                "thresholds",
                "usageRetentionDays",
            ]);
            assert.equal(await outputValue(run.result.tableName as pulumi.Output<string>), "counter-table");
        });

        it("applies the stack's hybrid-counter:* settings to the component", async () => {
            // Act
            const run = await runExample("../stack/index.ts", "hybrid-counter", {
                "aws:region": "eu-west-1",
                "hybrid-counter:name": "orders",
                "hybrid-counter:batchSize": "250",
                "hybrid-counter:maximumRetryAttempts": "3",
                "hybrid-counter:createAlarmTopic": "true",
                "hybrid-counter:deletionProtection": "true",
                "hybrid-counter:tags": JSON.stringify({ team: "payments" }),
                "hybrid-counter:counterMode": "strict",
                "hybrid-counter:thresholds": "[0.5, 1]",
                "hybrid-counter:createThresholdTopic": "true",
                "hybrid-counter:usageRetentionDays": "30",
            });
            // Assess
            const table = findResource(run.resources, TABLE, "orders-table");
            assert.equal(table.inputs.deletionProtectionEnabled, true);
            assert.deepEqual(table.inputs.tags, { team: "payments" });
            const mapping = findResource(run.resources, MAPPING, "orders-stream-mapping");
            assert.deepEqual([mapping.inputs.batchSize, mapping.inputs.maximumRetryAttempts], [250, 3]);
            const topic = findResource(run.resources, "aws:sns/topic:Topic", "orders-alarm-topic");
            assert.equal(await outputValue(run.result.alarmTopicArn as pulumi.Output<string>), topic.state.arn);
            const thresholds = findResource(run.resources, "aws:sns/topic:Topic", "orders-thresholds");
            assert.equal(await outputValue(run.result.thresholdTopicArn as pulumi.Output<string>), thresholds.state.arn);
            const variables = findResource(run.resources, FUNCTION, "orders-consumer").inputs.environment.variables as Record<
                string,
                string
            >;
            assert.deepEqual(
                [
                    variables[ENV.counterMode],
                    variables[ENV.thresholds],
                    variables[ENV.usageRetentionDays],
                    variables[ENV.thresholdTopicArn],
                ],
                ["strict", "0.5,1", "30", thresholds.state.arn],
            );
        });

        it("fails with the component's own message for an out-of-range setting", async () => {
            // Act
            const attempt = runExample("../stack/index.ts", "hybrid-counter", { "hybrid-counter:batchSize": "0" });
            // Assess
            await assert.rejects(attempt, /\[batchSize\] must be between 1 and 10000/);
        });
    });
});

describe("the examples' link to the package (test files share it, two at a time)", () => {
    it("stays while any user holds it, and goes with the node_modules it created when the last one gives it up", () => {
        // Prepare: an example with no install.
        const example = mkdtempSync(path.join(os.tmpdir(), "hc-example-"));
        const installed = path.join(example, "node_modules", "hybrid-counter", "package.json");
        // Act
        const first = linkPackageInto(example);
        const second = linkPackageInto(example);
        const both = existsSync(installed);
        first();
        const afterFirst = existsSync(installed);
        second();
        // Assess
        assert.deepEqual([both, afterFirst], [true, true]);
        assert.deepEqual(readdirSync(example), [], "no node_modules and no lock left");
        rmSync(example, { recursive: true, force: true });
    });

    it("leaves an example's own install alone, even where a killed run left its users behind", () => {
        const example = mkdtempSync(path.join(os.tmpdir(), "hc-example-"));
        const own = path.join(example, "node_modules", "hybrid-counter");
        mkdirSync(own, { recursive: true });
        writeFileSync(path.join(own, "package.json"), "{}");
        linkPackageInto(example)();
        mkdirSync(path.join(example, "node_modules", ".hybrid-counter-link"));
        linkPackageInto(example)();
        assert.equal(readFileSync(path.join(own, "package.json"), "utf8"), "{}");
        rmSync(example, { recursive: true, force: true });
    });

    it("links again where a killed run left its users and no link, and a lock older than 30 s is taken over", () => {
        const example = mkdtempSync(path.join(os.tmpdir(), "hc-example-"));
        mkdirSync(path.join(example, "node_modules", ".hybrid-counter-link"), { recursive: true });
        writeFileSync(path.join(example, "node_modules", ".hybrid-counter-link", "999999999-dead"), "");
        const lock = path.join(example, ".hybrid-counter-link.lock");
        mkdirSync(lock);
        const old = new Date(Date.now() - 60_000);
        utimesSync(lock, old, old);
        const unlink = linkPackageInto(example);
        const linked = existsSync(path.join(example, "node_modules", "hybrid-counter", "package.json"));
        unlink();
        assert.equal(linked, true);
        assert.deepEqual(readdirSync(example), [], "the link, its users and the stale lock are gone");
        rmSync(example, { recursive: true, force: true });
    });
});
