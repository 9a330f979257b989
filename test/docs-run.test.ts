/**
 * Documentation that runs: every command and code sample of README.md and docs/*.md, extracted
 * (test/support/doc-samples.ts) and run (test/support/doc-runner.ts, doc-code.ts), as Rust runs its doc tests.
 * Shell commands run against this repository and a local world (DynamoDB Local, the local SQS server, the
 * component's outputs from a local deployment under Pulumi mocks); the twin, the bench and the checker run with the
 * page's flags at a smaller size (`npm run docs:full` runs them at the page's own); `pulumi` commands are checked
 * for what the package defines. TypeScript samples are type-checked against the package's entries, whole
 * programs run under Pulumi mocks and runtime fragments against the local world. A page that tells a reader to
 * type something that fails fails here, naming the page and the line; the last tests prove it on broken pages.
 */
import { strict as assert } from "node:assert";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { deployLocally, type LocalDeployment } from "../local/deployment/deployment";
import { runProgramWithResult } from "../local/deployment/pulumi-mocks";
import { startLocalSqs, type LocalSqs } from "../local/aws/sqs";
import { seedItems, writeItems } from "../local/harness/seed";
import { hybridCounterPolicies } from "../policy/index";
import { buildCli } from "../scripts/bundle-cli";
import { typeErrors, writeSamples } from "./support/doc-code";
import { DocCommandError, runCommand, runsProgram, scaled, sh, type DocWorld } from "./support/doc-runner";
import { SHELL_LANGS, TS_LANGS, samples, shellCommands, type Sample } from "./support/doc-samples";
import { useEngine } from "./support/engine";

const root = path.resolve(__dirname, "..");
const pages = [
    "README.md",
    ...readdirSync(path.join(root, "docs"))
        .filter((f) => f.endsWith(".md"))
        .map((f) => `docs/${f}`),
];
const all: Sample[] = pages.flatMap((page) => samples(page, readFileSync(path.join(root, page), "utf8")));
const KNOWN_LANGS = new Set([...SHELL_LANGS, ...TS_LANGS, "json", "python", "yaml", "mermaid"]);
/** Files a page gives as a sample, by the name its fence carries (```json policy-config.json). */
const files = new Map(all.filter((s) => s.lang === "json").map((s) => [[...s.tags][0] ?? "", s.code]));

describe("documentation that runs (README.md, docs/*.md)", function () {
    const engine = useEngine();
    let sqsServer: LocalSqs;
    let deployment: LocalDeployment;
    let world: DocWorld;
    const work = mkdtempSync(path.join(tmpdir(), "hc-docs-"));

    before(async () => {
        const bin = await buildCli();
        sqsServer = await startLocalSqs();
        const admin = engine().dynamodb();
        deployment = await deployLocally(admin, "docs");
        // A table that already holds items (docs/adopting.md's backfill has something to count).
        const seeded = seedItems({ items: 120, keys: 4, seed: 3, largeItems: 0 });
        await writeItems(admin, deployment.clientConfig.tableName, seeded.items);
        const fatal = await sqsServer.createQueue("docs-fatal");
        const first = await sqsServer.createQueue("docs-first");
        const outputs = { clientConfig: deployment.clientConfig, fatalDlqUrl: fatal.url, firstDlqUrl: first.url };
        world = {
            root,
            work,
            bin,
            env: {
                PATH: process.env.PATH ?? "",
                HOME: process.env.HOME ?? "",
                JAVA_HOME: process.env.JAVA_HOME ?? "",
                AWS_REGION: "us-east-1",
                AWS_ACCESS_KEY_ID: "hybridcounterlocal",
                AWS_SECRET_ACCESS_KEY: "hybridcounterlocal",
                // AWS's standard variable for a service's endpoint: the reader's commands, as typed, reach the local engine.
                AWS_ENDPOINT_URL_DYNAMODB: engine().endpoint,
                HC_DOCS_CLIENT_CONFIG: JSON.stringify(deployment.clientConfig),
            },
            stackOutputs: () => outputs,
            files,
            full: process.env.HYBRID_COUNTER_DOCS_FULL === "1",
        };
    });
    after(async () => {
        await sqsServer?.stop();
    });

    it("finds the samples, each in a language it knows how to check", () => {
        assert.ok(all.length >= 20, `${all.length} samples`);
        for (const sample of all) {
            assert.ok(
                KNOWN_LANGS.has(sample.lang),
                `${sample.page}:${sample.line}: a \`\`\`${sample.lang} block the docs checker cannot check`,
            );
        }
    });

    for (const sample of all.filter((s) => SHELL_LANGS.has(s.lang))) {
        for (const command of shellCommands(sample, root).filter((c) => !runsProgram(c, root))) {
            it(`${command.page}:${command.line}: ${path.relative(root, command.cwd) || "."}$ ${command.text}`, async () => {
                await runCommand(command, world);
            });
        }
    }

    const tsSamples = all.filter((s) => TS_LANGS.has(s.lang));
    const written = writeSamples(tsSamples, path.join(root, ".local", "docs-samples"));
    // Two broken samples (a fragment calling the runtime with the wrong options, a program with a wrong arg type),
    // checked in the same compilation as the pages' own: one type-check of the package's sources for both.
    const broken: Sample[] = [
        {
            page: "docs/broken.md",
            line: 3,
            lang: "ts",
            tags: new Set(["fragment"]),
            code: 'import { healKey } from "hybrid-counter/runtime";\nawait healKey(tenantId, { dynamodb });',
        },
        {
            page: "docs/broken.md",
            line: 9,
            lang: "ts",
            tags: new Set(),
            code: 'import { HybridCounterComponent } from "hybrid-counter";\nnew HybridCounterComponent("c", { batchSize: "200" });',
        },
    ];
    const brokenWritten = writeSamples(broken, path.join(root, ".local", "docs-samples-broken"));
    let checked: string[] | undefined;
    const sampleTypeErrors = (): string[] => (checked ??= typeErrors([...written, ...brokenWritten], root));

    it("type-checks every TypeScript sample, fragments with the names they use declared", () => {
        assert.deepEqual(
            sampleTypeErrors().filter((e) => !e.startsWith("docs/broken.md:")),
            [],
        );
    });

    for (const file of written.filter((f) => f.run === "pulumi")) {
        it(`${file.sample.page}:${file.sample.line}: the program runs under Pulumi mocks and builds the component`, async () => {
            // eslint-disable-next-line @typescript-eslint/no-require-imports
            const run = await runProgramWithResult(() => require(file.file) as unknown);
            assert.ok(
                run.resources.some((r) => r.type === "hybrid-counter:index:HybridCounterComponent"),
                run.resources.map((r) => r.type).join(", "),
            );
        });
    }

    for (const file of written.filter((f) => f.run === "runtime")) {
        it(`${file.sample.page}:${file.sample.line}: the fragment runs against the local deployment`, async () => {
            const ran = await sh(`tsx ${file.file}`, root, world.env, root);
            assert.equal(ran.code, 0, ran.stderr);
        });
    }

    it("every diagram names a Mermaid diagram type", () => {
        for (const sample of all.filter((s) => s.lang === "mermaid")) {
            assert.match(sample.code, /^(flowchart (LR|TD|TB|RL|BT)|stateDiagram-v2|sequenceDiagram)\n/, `${sample.page}:${sample.line}`);
        }
    });

    it("every JSON sample parses, and a policy config is one the policy pack takes", () => {
        for (const sample of all.filter((s) => s.lang === "json")) {
            const value = JSON.parse(sample.code) as Record<string, unknown>;
            if (sample.tags.has("policy-config.json")) {
                assert.doesNotThrow(() => hybridCounterPolicies(value as never), `${sample.page}:${sample.line}`);
            }
        }
    });

    it("runs a long program with the page's flags at the suite's size, and at the page's own under docs:full", () => {
        const small = { full: false, work: "/w" };
        assert.deepEqual(scaled("twin", ["--ops", "5000", "--keys", "16", "--seed-items", "5000"], small).slice(0, 6), [
            "--ops",
            "24",
            "--keys",
            "16",
            "--seed-items",
            "200",
        ]);
        assert.deepEqual(scaled("twin", ["--watch"], small).slice(0, 2), ["--watch", "--chart"]);
        assert.deepEqual(scaled("bench", [], small), [
            "--ops",
            "10",
            "--backfill-items",
            "100",
            "--many-keys",
            "2",
            "--approaches",
            "hybrid",
            "--counters",
            "own-table",
        ]);
        assert.deepEqual(scaled("fuzz", ["--seeds", "1", "--replay", "f.json"], small), [
            "--seeds",
            "1",
            "--replay",
            "f.json",
            "--ops",
            "40",
        ]);
        assert.deepEqual(scaled("twin", ["--ops", "5000"], { full: true, work: "/w" }), ["--ops", "5000"]);
    });

    describe("a broken page fails", () => {
        const broken = (code: string): Sample => ({ page: "docs/broken.md", line: 10, lang: "sh", tags: new Set(), code });

        it("a twin flag the twin does not take", async () => {
            const [command] = shellCommands(broken("npm start -- --opps 40"), root);
            await assert.rejects(
                runCommand(command!, world),
                (e: unknown) => e instanceof DocCommandError && /docs\/broken\.md:11: .*exit 2/.test(e.message),
            );
        });

        it("a CLI command the CLI refuses, after the outputs it reads", async () => {
            const commands = shellCommands(
                broken("pulumi stack output --json > outputs.json\nnpx hybrid-counter status --config outputs.json --keys 3"),
                root,
            );
            await runCommand(commands[0]!, world);
            await assert.rejects(
                runCommand(commands[1]!, world),
                (e: unknown) => e instanceof DocCommandError && /docs\/broken\.md:12: .*--keys/.test(e.message),
            );
        });

        it("a stack setting the program does not have, and a script that does not exist", async () => {
            const [set] = shellCommands(broken("pulumi config set hybrid-counter:batchSise 200"), root);
            await assert.rejects(runCommand(set!, world), DocCommandError);
            const [script] = shellCommands(broken("npm run benchmark"), root);
            await assert.rejects(runCommand(script!, world), /no "benchmark" script/);
        });

        it("a TypeScript sample that does not type-check, fragment or not", () => {
            const errors = sampleTypeErrors().filter((e) => e.startsWith("docs/broken.md:"));
            assert.ok(
                errors.some((e) => e.startsWith("docs/broken.md:3 ")),
                errors.join("\n"),
            );
            assert.ok(
                errors.some((e) => e.startsWith("docs/broken.md:9 ")),
                errors.join("\n"),
            );
        });
    });
});
