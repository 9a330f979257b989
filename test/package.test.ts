/**
 * The package a user installs: `npm pack` (which runs `prepare`, the build), then a new Pulumi TypeScript
 * project outside the repository installs the tarball with npm, offline (scripts/offline-install.ts), and
 * - imports hybrid-counter, hybrid-counter/runtime, hybrid-counter/runtime/client and hybrid-counter/policy;
 * - type-checks under Pulumi's template settings (moduleResolution node) and under node16 and bundler,
 *   resolving every subpath to the package's .d.ts files;
 * - runs under Pulumi mocks to the component's 33 resources, deploying the bundles a build in the
 *   repository writes, byte for byte;
 * - runs the policy pack from the installed package, as `pulumi preview --policy-pack` would.
 */
import * as assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";
import { POLICY_NAMES } from "../policy/index";
import { buildBundles } from "../scripts/bundle";
import { installOffline, packInto } from "../scripts/offline-install";

const ROOT = path.resolve(__dirname, "..");
const run = promisify(execFile);
const manifest = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as Record<string, any>;
const SUBPATHS = ["hybrid-counter", "hybrid-counter/runtime", "hybrid-counter/runtime/client", "hybrid-counter/policy"];

/** A user's Pulumi program that uses all four entry points; both enum spellings must type-check. */
const PROGRAM = `import * as pulumi from "@pulumi/pulumi";
import { BillingMode, HybridCounterComponent } from "hybrid-counter";
import { ENV, InvalidArgumentError } from "hybrid-counter/runtime";
import { HybridCounterClient } from "hybrid-counter/runtime/client";
import { hybridCounterPolicies } from "hybrid-counter/policy";

const counter = new HybridCounterComponent("orders", { billingMode: BillingMode.PayPerRequest, architecture: "arm64", disabledAlarms: [] });
export const clientConfig: pulumi.Output<{ tableName: string }> = counter.clientConfig;
export const consumerAlarm: pulumi.Output<string | undefined> = counter.alarmArns.apply((arns) => arns.consumerErrors);
export const entryPoints = {
    env: ENV.tableName,
    error: InvalidArgumentError.name,
    client: HybridCounterClient.name,
    policies: hybridCounterPolicies().length,
};
`;

/** Runs the compiled program under mocks with the project's own @pulumi/pulumi and prints what it registered. */
const MOCK_RUNNER = `const path = require("node:path");
const pulumi = require("@pulumi/pulumi");
const { waitForRPCs } = require("@pulumi/pulumi/runtime/settings");
const registered = [];
pulumi.runtime.setMocks(
    {
        newResource: (args) => {
            registered.push(args);
            const name = args.inputs.name ?? args.name;
            return { id: args.name + "-id", state: { ...args.inputs, name, arn: "arn:aws:svc:us-east-1:123456789012:" + name, url: "https://example/" + name } };
        },
        call: (args) => { throw new Error("unexpected invoke " + args.token); },
    },
    "consumer",
    "dev",
    false,
).then(async () => {
    const program = require(path.resolve(process.argv[2]));
    // As the SDK's own harness settles: wait until the chain of outstanding RPCs stops growing.
    await new Promise((resolve) => program.clientConfig.apply(resolve));
    for (let i = 0; i < 3; i++) {
        await waitForRPCs();
        await new Promise((resolve) => setImmediate(resolve));
    }
    const entryPoints = program.entryPoints;
    // An archive input arrives as the archive object itself, its assets and their paths as promises.
    const paths = async (value) => {
        const v = value && typeof value.then === "function" ? await value : value;
        if (v === null || typeof v !== "object") {
            return [];
        }
        const found = [];
        for (const [k, x] of Object.entries(v)) {
            const resolved = x && typeof x.then === "function" ? await x : x;
            if (k === "path" && typeof resolved === "string") {
                found.push(resolved);
            } else {
                found.push(...(await paths(resolved)));
            }
        }
        return found;
    };
    const resources = [];
    for (const r of registered) {
        resources.push({ type: r.type, name: r.name, code: r.type === "aws:lambda/function:Function" ? await paths(r.inputs.code) : undefined });
    }
    process.stdout.write(JSON.stringify({
        entryPoints,
        resources,
    }));
});
`;

/**
 * The three resolution settings. All skip checking library declarations: a full check of @pulumi/aws's
 * declarations takes minutes, and @pulumi/policy 1.21's own index.d.ts fails it (two of its re-exports are
 * missing from ./proxy.d.ts). What a lib check would catch in this package's declarations, an import
 * they make that does not resolve, is asserted from the resolution trace instead.
 */
const tsconfigs: Record<string, object> = {
    // Pulumi's aws-typescript template: CommonJS, moduleResolution node (which ignores "exports").
    node: {
        compilerOptions: {
            strict: true,
            outDir: "bin",
            target: "es2020",
            module: "commonjs",
            moduleResolution: "node",
            sourceMap: true,
            experimentalDecorators: true,
            pretty: false,
            noFallthroughCasesInSwitch: true,
            noImplicitReturns: true,
            forceConsistentCasingInFileNames: true,
            skipLibCheck: true,
        },
        files: ["index.ts"],
    },
    node16: {
        compilerOptions: { strict: true, noEmit: true, skipLibCheck: true, target: "es2022", module: "node16", moduleResolution: "node16" },
        files: ["index.ts"],
    },
    bundler: {
        compilerOptions: {
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            target: "es2022",
            module: "esnext",
            moduleResolution: "bundler",
        },
        files: ["index.ts"],
    },
};

/** Module names imported from this package's declarations that TypeScript could not resolve. */
function unresolvedFromPackage(trace: string, project: string): string[] {
    const from = path.join(project, "node_modules", "hybrid-counter") + path.sep;
    const out: string[] = [];
    let current: { name: string; file: string } | undefined;
    for (const line of trace.split("\n")) {
        const start = /^======== Resolving module '([^']+)' from '([^']+)'\. ========$/.exec(line);
        if (start) {
            current = { name: start[1]!, file: start[2]! };
            continue;
        }
        const end = /^======== Module name '([^']+)' was not resolved\. ========$/.exec(line);
        if (end && current?.name === end[1] && current.file.startsWith(from)) {
            out.push(`${current.name} from ${path.relative(project, current.file)}`);
        }
    }
    return [...new Set(out)];
}

function tsc(project: string, args: string[]): Promise<{ code: number; output: string }> {
    return run(process.execPath, [path.join(project, "node_modules", "typescript", "bin", "tsc"), ...args], {
        cwd: project,
        maxBuffer: 64 * 1024 * 1024,
    }).then(
        ({ stdout, stderr }) => ({ code: 0, output: stdout + stderr }),
        (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, output: error.stdout + error.stderr }),
    );
}

describe("the npm package, packed and installed into a new project outside the repository", function () {
    let work: string;
    let tarball: string;
    let packed: string[];
    let project: string;
    /** tsc under each setting, started together once the project is installed (the node one also emits bin/ for the mocks run). */
    let checks: Record<string, Promise<{ code: number; output: string }>>;

    before(async () => {
        work = mkdtempSync(path.join(tmpdir(), "hybrid-counter-package-"));
        tarball = packInto(path.join(work));
        packed = (await run("tar", ["-tzf", tarball])).stdout
            .split("\n")
            .filter((f) => f !== "")
            .map((f) => f.replace(/^package\//, ""))
            .sort();
        project = path.join(work, "consumer");
        installOffline(
            project,
            {
                name: "consumer",
                version: "1.0.0",
                private: true,
                dependencies: {
                    "@pulumi/aws": manifest.dependencies["@pulumi/aws"],
                    "@pulumi/policy": manifest.peerDependencies["@pulumi/policy"],
                    "@pulumi/pulumi": manifest.dependencies["@pulumi/pulumi"],
                    "hybrid-counter": `file:${path.relative(project, tarball)}`,
                },
                devDependencies: {
                    "@types/node": manifest.devDependencies["@types/node"],
                    typescript: manifest.devDependencies.typescript,
                },
            },
            tarball,
        );
        writeFileSync(path.join(project, "index.ts"), PROGRAM);
        writeFileSync(path.join(project, "run-mocks.js"), MOCK_RUNNER);
        for (const [name, config] of Object.entries(tsconfigs)) {
            writeFileSync(path.join(project, `tsconfig.${name}.json`), JSON.stringify(config, null, 2));
        }
        checks = Object.fromEntries(
            Object.keys(tsconfigs).map((name) => [name, tsc(project, ["-p", `tsconfig.${name}.json`, "--traceResolution"])]),
        );
    });

    after(() => {
        if (work !== undefined) {
            rmSync(work, { recursive: true, force: true });
        }
    });

    describe("package.json", () => {
        it("is publishable, states Node 22 (what the tests run on, the node devDependency) and has no runtime dependency a deployed program does not use", () => {
            // Assess
            assert.equal(manifest.private, undefined);
            assert.equal(manifest.license, "Apache-2.0");
            assert.deepEqual(manifest.engines, { node: ">=22" });
            assert.match(manifest.devDependencies.node, /^\^22\.\d+\.\d+$/);
            assert.equal(manifest.allowScripts.node, true);
            // @pulumi/pulumi states 22 too (docs/languages.md): a change of its range is a change to what that page says.
            const pulumiEngines = (
                JSON.parse(readFileSync(require.resolve("@pulumi/pulumi/package.json"), "utf8")) as { engines: { node: string } }
            ).engines;
            assert.equal(pulumiEngines.node, ">=22");
            assert.deepEqual(Object.keys(manifest.dependencies).sort(), [
                "@aws-sdk/client-dynamodb",
                "@aws-sdk/client-dynamodb-streams",
                "@aws-sdk/client-lambda",
                "@aws-sdk/client-sns",
                "@aws-sdk/client-sqs",
                "@aws-sdk/util-dynamodb",
                "@pulumi/aws",
                "@pulumi/pulumi",
                "@smithy/types",
                "@types/aws-lambda",
            ]);
            assert.match(manifest.dependencies["@pulumi/pulumi"], /^\^3\.\d+\.\d+$/);
            assert.match(manifest.dependencies["@pulumi/aws"], /^\^7\.\d+\.\d+$/);
            assert.deepEqual(manifest.peerDependenciesMeta, { "@pulumi/policy": { optional: true } });
            assert.equal(manifest.devDependencies["@pulumi/policy"], manifest.peerDependencies["@pulumi/policy"]);
        });

        it("maps every subpath of exports to the same declarations in typesVersions (moduleResolution node ignores exports)", () => {
            // Assess
            const subpaths = Object.keys(manifest.exports).filter((k) => k !== "." && k !== "./package.json");
            assert.deepEqual(
                Object.keys(manifest.typesVersions["*"]),
                subpaths.map((k) => k.slice(2)),
            );
            for (const subpath of subpaths) {
                assert.deepEqual(manifest.typesVersions["*"][subpath.slice(2)], [manifest.exports[subpath].types.slice(2)], subpath);
            }
            assert.equal(manifest.types, manifest.exports["."].types.slice(2));
            assert.equal(manifest.main, manifest.exports["."].default.slice(2));
        });
    });

    describe("the tarball", () => {
        it("holds the built library, its declarations, both bundles, the policy pack, the schema, LICENSE and CHANGELOG", () => {
            // Assess
            for (const file of [
                "package.json",
                "README.md",
                "LICENSE",
                "CHANGELOG.md",
                "schema.json",
                "dist/index.js",
                "dist/index.d.ts",
                "dist/runtime/index.js",
                "dist/runtime/client/index.d.ts",
                "dist/policy/index.js",
                "dist/policy/pack.js",
                "dist/policy/package.json",
                "dist/policy/PulumiPolicy.yaml",
                "dist/bundles/stream-consumer/index.js",
                "dist/bundles/redrive/index.js",
                "dist/cli/index.js",
            ]) {
                assert.ok(packed.includes(file), `${file} is packed`);
            }
            for (const export_ of Object.values(manifest.exports as Record<string, string | { types: string; default: string }>)) {
                for (const target of typeof export_ === "string" ? [export_] : [export_.types, export_.default]) {
                    assert.ok(packed.includes(target.slice(2)), `${target} (exports) is packed`);
                }
            }
        });

        it("carries no TypeScript sources, tests, local output, source maps or build info", () => {
            // Assess
            assert.deepEqual(
                packed.filter(
                    (f) =>
                        (f.endsWith(".ts") && !f.endsWith(".d.ts")) ||
                        f.endsWith(".map") ||
                        f.endsWith(".tsbuildinfo") ||
                        /^(test|local|bench|stack|scripts|examples|\.local|node_modules)\//.test(f),
                ),
                [],
            );
        });

        it("has the Apache-2.0 LICENSE and a CHANGELOG entry for this version", () => {
            // Assess
            const license = readFileSync(path.join(ROOT, "LICENSE"), "utf8");
            assert.match(license, /^\s*Apache License\s+Version 2\.0, January 2004/);
            assert.match(
                readFileSync(path.join(ROOT, "CHANGELOG.md"), "utf8"),
                new RegExp(`^## ${manifest.version.replace(/\./g, "\\.")}\\b`, "m"),
            );
        });
    });

    describe("a new project that installed it", () => {
        for (const setting of Object.keys(tsconfigs)) {
            it(`type-checks under moduleResolution ${setting}, resolving every subpath to the package's .d.ts files`, async () => {
                // Act
                const { output } = await checks[setting]!;
                // Assess
                assert.deepEqual(typeErrors(output), []);
                assert.deepEqual(unresolvedFromPackage(output, project), []);
                for (const subpath of SUBPATHS) {
                    const resolved = new RegExp(`Module name '${subpath}' was successfully resolved to '([^']+)'`).exec(output);
                    assert.ok(resolved, `${subpath} resolves`);
                    assert.ok(
                        resolved[1]!.startsWith(path.join(project, "node_modules", "hybrid-counter", "dist") + path.sep),
                        `${subpath}: ${resolved[1]}`,
                    );
                    assert.ok(resolved[1]!.endsWith(".d.ts"), `${subpath}: ${resolved[1]}`);
                }
            });
        }

        it("runs under Pulumi mocks to the 33 resources, deploying bundles byte-identical to a build in the repository", async () => {
            // Prepare
            const emitted = await checks.node!;
            assert.equal(emitted.code, 0, typeErrors(emitted.output).join("\n"));
            const rebuilt = await buildBundles(path.join(work, "bundles"));
            // Act
            const { stdout } = await run(process.execPath, ["run-mocks.js", "bin/index.js"], { cwd: project });
            const { entryPoints, resources } = JSON.parse(stdout) as {
                entryPoints: Record<string, unknown>;
                resources: Array<{ type: string; name: string; code?: string[] }>;
            };
            // Assess
            assert.equal(resources.length, 33);
            assert.deepEqual(resources[0], { type: "hybrid-counter:index:HybridCounterComponent", name: "orders" });
            assert.deepEqual(entryPoints, {
                env: "HYBRID_COUNTER_TABLE_NAME",
                error: "InvalidArgumentError",
                client: "HybridCounterClient",
                policies: POLICY_NAMES.length,
            });
            // By name: the mocks record a resource when its inputs resolve, an order the program does not choose.
            const functions = resources
                .filter((r) => r.type === "aws:lambda/function:Function")
                .sort((a, b) => a.name.localeCompare(b.name));
            assert.deepEqual(
                functions.map((f) => [f.name, f.code]),
                [
                    [
                        "orders-consumer",
                        [path.join(project, "node_modules", "hybrid-counter", "dist", "bundles", "stream-consumer", "index.js")],
                    ],
                    ["orders-redrive", [path.join(project, "node_modules", "hybrid-counter", "dist", "bundles", "redrive", "index.js")]],
                    ["orders-settler", [path.join(project, "node_modules", "hybrid-counter", "dist", "bundles", "settler", "index.js")]],
                ],
            );
            assert.ok(readFileSync(functions[0]!.code![0]!).equals(readFileSync(rebuilt["stream-consumer"]!)), "stream consumer bundle");
            assert.ok(readFileSync(functions[1]!.code![0]!).equals(readFileSync(rebuilt.redrive!)), "redrive bundle");
            assert.ok(readFileSync(functions[2]!.code![0]!).equals(readFileSync(rebuilt.settler!)), "settler bundle");
        });

        it("runs the policy pack from node_modules/hybrid-counter/dist/policy, as pulumi preview --policy-pack loads it", async () => {
            // Prepare
            const packDir = path.join(project, "node_modules", "hybrid-counter", "dist", "policy");
            const runner = path.join(project, "node_modules", "@pulumi", "pulumi", "cmd", "run-policy-pack");
            let pack: ChildProcess | undefined;
            try {
                // Act
                pack = spawn(process.execPath, [runner, "127.0.0.1:0", "."], { cwd: packDir, stdio: ["ignore", "pipe", "pipe"] });
                const port = await new Promise<number>((resolve, reject) => {
                    let stdout = "";
                    let stderr = "";
                    pack!.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
                    pack!.stdout!.on("data", (chunk: Buffer) => {
                        stdout += chunk.toString();
                        const line = /^(\d+)\s*$/m.exec(stdout);
                        if (line) {
                            resolve(Number(line[1]));
                        }
                    });
                    pack!.on("exit", (code) => reject(new Error(`policy pack exited with ${code}: ${stderr}`)));
                });
                const info = await analyzerInfo(project, port);
                // Assess
                assert.deepEqual(info, { name: "hybrid-counter", version: readPolicyVersion(), policies: POLICY_NAMES });
            } finally {
                if (pack?.exitCode === null) {
                    pack.kill("SIGTERM");
                }
            }
        });

        it("type-checks examples/existing-program with its own tsconfig, its dependencies installed from the packed tarball", async () => {
            // Prepare: the example's package.json names the tarball `npm pack` writes at the repository root,
            // two folders up; its dependencies are ones this project installed from that tarball.
            const source = path.join(ROOT, "examples", "existing-program");
            const exampleManifest = JSON.parse(readFileSync(path.join(source, "package.json"), "utf8")) as {
                dependencies: Record<string, string>;
                devDependencies: Record<string, string>;
            };
            assert.equal(exampleManifest.dependencies["hybrid-counter"], `file:../../${path.basename(tarball)}`);
            for (const [name, range] of Object.entries({ ...exampleManifest.dependencies, ...exampleManifest.devDependencies })) {
                if (name !== "hybrid-counter") {
                    assert.equal(
                        range,
                        { ...manifest.dependencies, ...manifest.devDependencies }[name],
                        `${name}: the range the package uses`,
                    );
                }
            }
            const example = path.join(project, "existing-program");
            cpSync(source, example, { recursive: true, filter: (f) => !f.includes("node_modules") });
            // Act
            const { code, output } = await tsc(project, ["-p", path.join(example, "tsconfig.json"), "--noEmit"]);
            // Assess
            assert.equal(code, 0, output);
        });
    });
});

/** The type errors tsc reported. */
function typeErrors(output: string): string[] {
    return output.split("\n").filter((line) => / error TS\d+/.test(line));
}

function readPolicyVersion(): string {
    return (JSON.parse(readFileSync(path.join(ROOT, "policy", "package.json"), "utf8")) as { version: string }).version;
}

/** GetAnalyzerInfo over the pack's gRPC port, with the project's own @pulumi/pulumi protocol modules. */
async function analyzerInfo(project: string, port: number): Promise<{ name: string; version: string; policies: string[] }> {
    const from = (id: string): any =>
        // eslint-disable-next-line @typescript-eslint/no-require-imports -- the installed project's own modules
        require(require.resolve(id, { paths: [path.join(project, "node_modules", "@pulumi", "pulumi")] }));
    const grpc = from("@grpc/grpc-js");
    const rpc = from("@pulumi/pulumi/proto/analyzer_grpc_pb");
    const empty = from("google-protobuf/google/protobuf/empty_pb");
    const client = new rpc.AnalyzerClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
        const info: any = await new Promise((resolve, reject) =>
            client.getAnalyzerInfo(new empty.Empty(), (err: unknown, response: unknown) => (err ? reject(err) : resolve(response))),
        );
        return { name: info.getName(), version: info.getVersion(), policies: info.getPoliciesList().map((p: any) => p.getName()) };
    } finally {
        client.close();
    }
}
