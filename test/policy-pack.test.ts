/**
 * The pack as the Pulumi CLI runs it: `pulumi preview --policy-pack ./policy` starts
 * `@pulumi/pulumi/cmd/run-policy-pack` with the pack folder as working directory and `.` as program,
 * which loads `policy/package.json`'s `main` (pack.ts, through ts-node), and then talks to the
 * analyzer's gRPC server. This test does the same on 127.0.0.1, without the CLI: it proves the entry
 * point loads, lists every policy with its level and schema, and that the policies run behind the real
 * analyzer server, with protobuf-serialized properties, unknown values and property dependencies.
 */
import * as assert from "node:assert/strict";
import { ChildProcess, spawn } from "node:child_process";
import * as path from "node:path";
import { POLICY_NAMES } from "../policy/index";

const ROOT = path.resolve(__dirname, "..");
const POLICY_DIR = path.join(ROOT, "policy");
/** The gRPC and protobuf modules @pulumi/pulumi itself uses (resolved through it, not hoisting). */
const fromPulumi = (id: string): any =>
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the very module instances @pulumi/pulumi uses
    require(require.resolve(id, { paths: [path.dirname(require.resolve("@pulumi/pulumi/package.json"))] }));
const grpc = fromPulumi("@grpc/grpc-js");
const analyzerRpc = fromPulumi("@pulumi/pulumi/proto/analyzer_grpc_pb");
const analyzer = fromPulumi("@pulumi/pulumi/proto/analyzer_pb");
const structProto = fromPulumi("google-protobuf/google/protobuf/struct_pb");
const emptyProto = fromPulumi("google-protobuf/google/protobuf/empty_pb");

/** The engine's sentinel for a string unknown during preview. */
const UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";
const LEVELS = ["advisory", "mandatory", "disabled", "remediate"];
const urn = (type: string, name: string) => `urn:pulumi:dev::app::${type}::${name}`;

interface Resource {
    type: string;
    name: string;
    props: Record<string, unknown>;
    propertyDependencies?: Record<string, string[]>;
}

function options(): any {
    const o = new analyzer.AnalyzerResourceOptions();
    o.setProtect(false);
    return o;
}

function toAnalyzerResource(r: Resource): any {
    const msg = new analyzer.AnalyzerResource();
    msg.setType(r.type);
    msg.setName(r.name);
    msg.setUrn(urn(r.type, r.name));
    msg.setProperties(structProto.Struct.fromJavaScript(r.props));
    msg.setOptions(options());
    const deps = Object.values(r.propertyDependencies ?? {}).flat();
    msg.setDependenciesList([...new Set(deps)]);
    for (const [key, urns] of Object.entries(r.propertyDependencies ?? {})) {
        const pd = new analyzer.AnalyzerPropertyDependencies();
        pd.setUrnsList(urns);
        msg.getPropertydependenciesMap().set(key, pd);
    }
    return msg;
}

function call<T>(client: any, method: string, request: unknown): Promise<T> {
    return new Promise((resolve, reject) =>
        client[method](request, (err: unknown, response: T) => (err ? reject(err) : resolve(response))),
    );
}

/** The diagnostics of a response; the engine's message is the policy description, a newline, then the violation. */
function diagnostics(response: any): { policy: string; level: string; urn: string; message: string }[] {
    return response.getDiagnosticsList().map((d: any) => {
        const prefix = `${d.getDescription()}\n`;
        const message: string = d.getMessage();
        return {
            policy: d.getPolicyname(),
            level: LEVELS[d.getEnforcementlevel()],
            urn: d.getUrn(),
            message: message.startsWith(prefix) ? message.slice(prefix.length) : message,
        };
    });
}

/** A preview-shaped table + mapping: the mapping's ARNs are unknown and it starts at LATEST. */
function previewStack(): Resource[] {
    const table = urn("aws:dynamodb/table:Table", "orders");
    return [
        {
            type: "aws:dynamodb/table:Table",
            name: "orders",
            props: {
                streamEnabled: true,
                streamViewType: "NEW_AND_OLD_IMAGES",
                pointInTimeRecovery: { enabled: true },
                serverSideEncryption: { enabled: true },
            },
        },
        {
            type: "aws:lambda/eventSourceMapping:EventSourceMapping",
            name: "orders-mapping",
            props: {
                eventSourceArn: UNKNOWN_STRING,
                functionName: UNKNOWN_STRING,
                startingPosition: "LATEST",
                maximumRetryAttempts: 5,
                maximumRecordAgeInSeconds: 3600,
                bisectBatchOnFunctionError: true,
                functionResponseTypes: ["ReportBatchItemFailures"],
                destinationConfig: { onFailure: { destinationArn: UNKNOWN_STRING } },
            },
            propertyDependencies: { eventSourceArn: [table] },
        },
    ];
}

describe("policy pack: loaded the way `pulumi preview --policy-pack ./policy` loads it", function () {
    let pack: ChildProcess | undefined;
    let client: any;

    before(async () => {
        const runner = require.resolve("@pulumi/pulumi/cmd/run-policy-pack");
        pack = spawn(process.execPath, [runner, "127.0.0.1:0", "."], { cwd: POLICY_DIR, stdio: ["ignore", "pipe", "pipe"] });
        let stderr = "";
        pack.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        const port = await new Promise<number>((resolve, reject) => {
            let stdout = "";
            pack!.stdout?.on("data", (chunk: Buffer) => {
                stdout += chunk.toString();
                const line = /^(\d+)\s*$/m.exec(stdout);
                if (line) {
                    resolve(Number(line[1]));
                }
            });
            pack!.on("exit", (code) => reject(new Error(`policy pack exited with ${code}: ${stderr}`)));
        });
        client = new analyzerRpc.AnalyzerClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    });

    after(() => {
        client?.close();
        if (pack?.pid !== undefined && pack.exitCode === null) {
            pack.kill("SIGTERM");
        }
    });

    it("serves the pack named hybrid-counter at the version of policy/package.json, with every policy, level and config schema", async () => {
        // Act
        const info: any = await call(client, "getAnalyzerInfo", new emptyProto.Empty());

        // Assess
        assert.equal(info.getName(), "hybrid-counter");
        assert.equal(info.getVersion(), "0.1.0");
        assert.equal(info.getSupportsconfig(), true);
        const policies = info.getPoliciesList().map((p: any) => [p.getName(), LEVELS[p.getEnforcementlevel()]]);
        assert.deepEqual(
            policies.map(([name]: string[]) => name),
            POLICY_NAMES,
        );
        assert.deepEqual(
            policies.filter(([, level]: string[]) => level === "advisory").map(([name]: string[]) => name),
            [
                "dynamodb-table-point-in-time-recovery",
                "dynamodb-table-encryption",
                "stream-mapping-bisect-on-error",
                "stream-consumer-alarms",
                "scheduled-function-guarded",
            ],
        );
        const retries = info.getPoliciesList().find((p: any) => p.getName() === "stream-mapping-bounded-retries");
        assert.deepEqual(retries.getConfigschema().getProperties().toJavaScript().maximumRetryAttempts, {
            type: "integer",
            minimum: 0,
            maximum: 10000,
            default: 10,
            description: "Highest maximumRetryAttempts allowed.",
        });
    });

    it("runs a resource policy on a serialized resource", async () => {
        // Prepare
        const request = new analyzer.AnalyzeRequest();
        request.setType("aws:dynamodb/table:Table");
        request.setName("orders");
        request.setUrn(urn("aws:dynamodb/table:Table", "orders"));
        request.setProperties(structProto.Struct.fromJavaScript({ streamEnabled: true, serverSideEncryption: { enabled: true } }));
        request.setOptions(options());

        // Act
        const response = await call(client, "analyze", request);

        // Assess
        assert.deepEqual(diagnostics(response), [
            {
                policy: "dynamodb-table-point-in-time-recovery",
                level: "advisory",
                // The engine attributes a resource policy's violation to the resource it analyzed.
                urn: "",
                message: "table 'orders' has [pointInTimeRecovery.enabled] unset; it must be true",
            },
        ]);
    });

    it("runs the stack policies on a preview with unknown ARNs, matching the mapping to its table through property dependencies", async () => {
        // Prepare
        const request = new analyzer.AnalyzeStackRequest();
        request.setResourcesList(previewStack().map(toAnalyzerResource));

        // Act
        const response = await call(client, "analyzeStack", request);

        // Assess
        assert.deepEqual(diagnostics(response), [
            {
                policy: "stream-mapping-trim-horizon",
                level: "mandatory",
                urn: urn("aws:lambda/eventSourceMapping:EventSourceMapping", "orders-mapping"),
                message:
                    "event source mapping 'orders-mapping' (DynamoDB stream) has [startingPosition] \"LATEST\"; it must be one of TRIM_HORIZON",
            },
        ]);
    });

    it("takes levels and thresholds from the engine's pack config", async () => {
        // Prepare
        const configure = new analyzer.ConfigureAnalyzerRequest();
        const disabled = new analyzer.PolicyConfig();
        disabled.setEnforcementlevel(analyzer.EnforcementLevel.DISABLED);
        disabled.setProperties(structProto.Struct.fromJavaScript({}));
        configure.getPolicyconfigMap().set("stream-mapping-trim-horizon", disabled);
        const tuned = new analyzer.PolicyConfig();
        tuned.setEnforcementlevel(analyzer.EnforcementLevel.ADVISORY);
        tuned.setProperties(structProto.Struct.fromJavaScript({ maximumRetryAttempts: 3 }));
        configure.getPolicyconfigMap().set("stream-mapping-bounded-retries", tuned);
        const request = new analyzer.AnalyzeStackRequest();
        request.setResourcesList(previewStack().map(toAnalyzerResource));

        // Act
        await call(client, "configure", configure);
        const response = await call(client, "analyzeStack", request);

        // Assess
        assert.deepEqual(diagnostics(response), [
            {
                policy: "stream-mapping-bounded-retries",
                level: "advisory",
                urn: urn("aws:lambda/eventSourceMapping:EventSourceMapping", "orders-mapping"),
                message: "event source mapping 'orders-mapping' (DynamoDB stream) has [maximumRetryAttempts] 5, above the maximum 3",
            },
        ]);
    });
});
