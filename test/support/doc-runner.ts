/**
 * Runs what a page tells a user to type (test/support/doc-samples.ts extracts it), against this repository and a
 * local world: DynamoDB Local, the local SQS server and the component's outputs from a local deployment.
 *
 *   - `npm start`, `npm run <script>`: the script's own command line, run as npm runs it (node_modules/.bin first on
 *     the PATH), with the page's flags. Its `npm run build...` steps are the ones `npm test` runs before any test,
 *     so they are checked to be there rather than run again beside tests that read dist/. A program that takes
 *     minutes (the twin, the bench, the sweep, the checker) runs at a smaller size: each of its size flags is
 *     lowered to a bound (the page's smaller value stays), and missing ones are added; HYBRID_COUNTER_DOCS_FULL=1
 *     (`npm run docs:full`) runs every command at the page's own size. `npm test` runs a few of them
 *     (test/docs-programs.test.ts says which), `npm run docs:programs` every one.
 *   - `npx hybrid-counter ...`: the built bin, in the reader's folder (where `pulumi stack output --json >
 *     outputs.json` left the component's outputs), with AWS's standard endpoint variables aimed at the local engine.
 *   - `npm ci`, `npm test`: what CI runs (`.ci/run`) and what runs this very file: checked, not run again
 *     (the lock file matches the manifest; the script exists and runs mocha).
 *   - `npm install <packages>`: the names are this package and its dependencies (test/package.test.ts installs the
 *     packed package offline). Scripts that rewrite the repository's own files (`build`, `tarball`, `schema:update`)
 *     are checked to be run by the suite already (`npm test`'s first step, test/package.test.ts, test/schema.test.ts).
 *   - `pulumi ...`: the CLI cannot be installed here; each command is checked for what the package defines: the
 *     project or policy pack it runs in, the `config set` keys and values (stack/config.ts), the policy pack
 *     and the policy config a flag names, the path `package add` takes.
 * Anything else fails, naming the page, its line and the command.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { CONFIG_KEYS, CONFIG_NAMESPACE, stackSettingsFromConfig } from "../../stack/config";
import type { ShellCommand } from "./doc-samples";

/** The world the commands run in. */
export interface DocWorld {
    readonly root: string;
    /** The reader's own folder: outputs.json and the files the pages write go there. */
    readonly work: string;
    /** The built CLI (dist/cli/index.js). */
    readonly bin: string;
    /** Environment for the commands: AWS region, credentials, endpoints. */
    readonly env: Readonly<Record<string, string>>;
    /** `pulumi stack output --json`: the outputs a deployment gives. */
    readonly stackOutputs: () => unknown;
    /** Files a page defines in a sample (`policy-config.json`), by name. */
    readonly files: ReadonlyMap<string, string>;
    /** Run programs at the page's own size. */
    readonly full: boolean;
}

export interface Ran {
    readonly code: number | null;
    readonly signal: NodeJS.Signals | null;
    readonly stdout: string;
    readonly stderr: string;
}

export class DocCommandError extends Error {
    constructor(command: ShellCommand, problem: string) {
        super(`${command.page}:${command.line}: \`${command.text}\`: ${problem}`);
        this.name = "DocCommandError";
    }
}

/** Scripts that rewrite the repository's files, and what runs them in the suite (with the text that shows it). */
const COVERED: Record<string, string> = {
    build: "npm test",
    "build:bundles": "npm test",
    tarball: "test/package.test.ts",
    "schema:update": "test/schema.test.ts",
};
const COVERED_BY: Record<string, string> = {
    build: "npm run build",
    "build:bundles": "npm run build",
    tarball: "packInto",
    "schema:update": "inferSchemaText",
};

/**
 * The size flags of each program and the bound the suite lowers them to. Each one the page leaves out is added at
 * its bound too (its default is larger), except those whose default is none at all (the twin's seeded items).
 */
const SIZES: Record<string, Record<string, number>> = {
    twin: { ops: 24, "seed-items": 200 },
    bench: { ops: 10, "backfill-items": 100, "many-keys": 2 },
    ceiling: { "step-seconds": 2, "max-steps": 1 },
    busy: { seconds: 10 },
    sweep: { seconds: 1, backlog: 50 },
    fuzz: { seeds: 2, ops: 40 },
};

const LOWER_ONLY = new Set(["twin seed-items"]);

/**
 * Lists the suite narrows when the page leaves them to their default: the bench compares four approaches and two
 * counter placements, each on fresh engines; the suite runs the approach and the placement the component deploys by
 * default (the full comparison is `npm run docs:full`'s).
 */
const NARROWED: Record<string, Record<string, string>> = {
    bench: { approaches: "hybrid", counters: "own-table" },
    busy: { shards: "1" },
};

/** The program a script's command line runs, for its sizes. */
function programOf(line: string, args: readonly string[]): string | undefined {
    if (line.includes("local/twin/twin.ts")) {
        return "twin";
    }
    if (line.includes("bench/run.ts")) {
        if (args.includes("--sweep")) {
            return "sweep";
        }
        return args.includes("hot-key-ceiling") ? "ceiling" : args.includes("busy-heal") ? "busy" : "bench";
    }
    return line.includes("scripts/fuzz.ts") ? "fuzz" : undefined;
}

/** The page's flags at the suite's size: each size flag at most its bound, the missing ones added. */
export function scaled(program: string | undefined, args: readonly string[], world: Pick<DocWorld, "full" | "work">): string[] {
    const out = [...args];
    if (program === undefined || world.full) {
        return out;
    }
    const sizes = SIZES[program] ?? {};
    for (const [flag, bound] of Object.entries(sizes)) {
        const at = out.indexOf(`--${flag}`);
        if (at >= 0) {
            out[at + 1] = String(Math.min(Number(out[at + 1]), bound));
        } else if (
            !LOWER_ONLY.has(`${program} ${flag}`) &&
            !(program === "twin" && flag === "ops" && (out.includes("--watch") || out.includes("--duration")))
        ) {
            out.push(`--${flag}`, String(bound));
        }
    }
    for (const [flag, value] of Object.entries(NARROWED[program] ?? {})) {
        if (!out.includes(`--${flag}`)) {
            out.push(`--${flag}`, value);
        }
    }
    if (program === "ceiling" && !out.includes("--shards")) {
        out.push("--shards", "1");
    }
    // Charts and sweep output go to the reader's folder, not into the repository's docs.
    const outFlag = program === "sweep" ? "--out" : program === "twin" || program === "ceiling" ? "--chart" : undefined;
    if (outFlag !== undefined) {
        const at = out.indexOf(outFlag);
        const target = path.join(world.work, `${program}-${Math.random().toString(36).slice(2, 8)}${program === "sweep" ? "" : ".svg"}`);
        if (at >= 0) {
            out[at + 1] = target;
        } else if (program !== "ceiling") {
            out.push(outFlag, target);
        }
    }
    return out;
}

/**
 * Whether a command runs one of the programs that take minutes at the page's size (the twin, the bench, the sweep,
 * the checker): those run in test/docs-programs.test.ts, beside the rest.
 */
export function runsProgram(command: ShellCommand, root: string): boolean {
    return programRun(command, root) !== undefined;
}

/**
 * The program a command runs, by the name its sizes go by (`SIZES`: twin, bench, ceiling, busy, sweep, fuzz), or
 * undefined when it runs none of them.
 */
export function programRun(command: ShellCommand, root: string): string | undefined {
    const [tool, verb, name] = command.words;
    if (tool !== "npm" || (verb !== "start" && verb !== "run")) {
        return undefined;
    }
    const script = scriptsOf(root)[verb === "start" ? "start" : (name ?? "")];
    return script === undefined ? undefined : programOf(script, command.words);
}

/** Runs a command line through sh, as npm runs a script; `untilOutput` sends SIGINT once stdout or stderr matches. */
export function sh(line: string, cwd: string, env: Readonly<Record<string, string>>, root: string, untilOutput?: RegExp): Promise<Ran> {
    return new Promise((resolve, reject) => {
        const child = spawn("sh", ["-c", line], {
            cwd,
            env: { ...env, PATH: `${path.join(root, "node_modules", ".bin")}${path.delimiter}${process.env.PATH ?? ""}` },
            stdio: ["ignore", "pipe", "pipe"],
            detached: false,
        });
        let stdout = "";
        let stderr = "";
        let interrupted = false;
        const watch = () => {
            if (untilOutput !== undefined && !interrupted && untilOutput.test(stdout + stderr)) {
                interrupted = true;
                // The line exec'd its program: the program itself gets the Ctrl-C.
                child.kill("SIGINT");
            }
        };
        child.stdout.on("data", (c: Buffer) => ((stdout += c.toString()), watch()));
        child.stderr.on("data", (c: Buffer) => ((stderr += c.toString()), watch()));
        // A test that timed out, or a run stopped early, leaves no program behind (tsx passes the signal on).
        const stop = () => child.kill("SIGTERM");
        process.once("exit", stop);
        child.on("error", reject);
        child.on("close", (code, signal) => {
            process.off("exit", stop);
            resolve({ code, signal, stdout, stderr });
        });
    });
}

const quote = (w: string): string => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`);

function assertThat(condition: unknown, command: ShellCommand, problem: string): asserts condition {
    if (!condition) {
        throw new DocCommandError(command, problem);
    }
}

function scriptsOf(root: string): Record<string, string> {
    return (JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
}

/** `npm start` / `npm run <name>`: the script's steps, its build steps left to `npm test`, the page's flags on the last. */
async function runScript(command: ShellCommand, world: DocWorld, name: string, args: readonly string[]): Promise<Ran | undefined> {
    const scripts = scriptsOf(world.root);
    const script = scripts[name];
    assertThat(script !== undefined, command, `package.json has no "${name}" script`);
    const steps = script.split("&&").map((s) => s.trim());
    // `npm run build` (npm test's first step) builds the bundles too.
    const built = (step: string) => /^npm run build(:bundles)?( --silent)?$/.test(step);
    for (const step of steps.filter(built)) {
        assertThat(scripts.test?.startsWith("npm run build &&") ?? false, command, `${step}: npm test does not build first`);
    }
    const rest = steps.filter((s) => !built(s));
    if (rest.length === 0) {
        return undefined;
    }
    const last = rest.at(-1)!;
    const program = programOf(last, args);
    const flags = scaled(program, args, world);
    // One step is exec'd, so that a Ctrl-C reaches the program itself (as a terminal's reaches the foreground program).
    const line = [...rest.slice(0, -1), [rest.length === 1 ? `exec ${last}` : last, ...flags.map(quote)].join(" ")].join(" && ");
    // A run "until Ctrl-C" gets its Ctrl-C once its workload is under way (a progress line with operations done).
    const watch = args.includes("--watch") ? /(^|\n)ops [1-9]/ : undefined;
    const ran = await sh(line, command.cwd, world.env, world.root, watch);
    const ok = ran.code === 0 || (watch !== undefined && (ran.code === 130 || ran.signal === "SIGINT"));
    assertThat(ok, command, `exit ${ran.code ?? ran.signal}: ${ran.stderr.trim().split("\n").slice(-5).join(" | ")}`);
    if (command.pipe !== undefined) {
        assertThat(command.pipe[0] === "jq" && command.pipe[1] === ".", command, `an unchecked pipe: | ${command.pipe.join(" ")}`);
        JSON.parse(ran.stdout);
    }
    return ran;
}

/** `npx hybrid-counter ...`: the built bin in the reader's folder, against the local world. */
async function runCli(command: ShellCommand, world: DocWorld): Promise<Ran> {
    const cwd = command.cwd === world.root ? world.work : command.cwd;
    const ran = await sh(
        [quote(process.execPath), quote(world.bin), ...command.words.slice(2).map(quote)].join(" "),
        cwd,
        world.env,
        world.root,
    );
    assertThat(ran.code === 0, command, `exit ${ran.code}: ${ran.stderr.trim()}`);
    assertThat(!/Warning/.test(ran.stderr), command, `printed a warning: ${ran.stderr.trim()}`);
    return ran;
}

/** `pulumi ...`: what the package defines in the command, checked without the Pulumi CLI. */
function checkPulumi(command: ShellCommand, world: DocWorld): void {
    const [, verb, ...rest] = command.words;
    const project = verb === "policy" ? "PulumiPolicy.yaml" : "Pulumi.yaml";
    if (verb === "stack" && rest[0] === "output") {
        assertThat(rest.includes("--json"), command, "the CLI's --config reads the outputs as JSON: --json");
        assertThat(command.redirect !== undefined, command, "the outputs go to a file the next commands name");
        writeFileSync(
            path.join(command.cwd === world.root ? world.work : command.cwd, command.redirect),
            JSON.stringify(world.stackOutputs()),
        );
        return;
    }
    if (verb === "package") {
        assertThat(rest[0] === "add" && rest[1] !== undefined, command, "pulumi package add <path>");
        assertThat(existsSync(path.resolve(command.cwd, rest[1], "PulumiPlugin.yaml")), command, `${rest[1]} holds no PulumiPlugin.yaml`);
        return;
    }
    assertThat(existsSync(path.join(command.cwd, project)), command, `${path.relative(world.root, command.cwd) || "."} has no ${project}`);
    if (verb === "config" && rest[0] === "set") {
        const [key, value] = rest.slice(1).filter((w) => w !== "--path") as [string, string];
        const [namespace, name] = key.split(":") as [string, string];
        if (namespace !== "aws") {
            assertThat(namespace === CONFIG_NAMESPACE, command, `${namespace} is not the program's config namespace (${CONFIG_NAMESPACE})`);
            const top = name.split(".")[0]!;
            assertThat(top in CONFIG_KEYS, command, `${top} is not a setting of the root program`);
            const config = top === "tags" ? { [`${namespace}:tags`]: JSON.stringify({ [name.split(".")[1]!]: value }) } : { [key]: value };
            try {
                stackSettingsFromConfig(config);
            } catch (error) {
                throw new DocCommandError(command, (error as Error).message);
            }
        }
    }
    for (const [i, w] of command.words.entries()) {
        const value = command.words[i + 1]?.replace("<path to this repository>", world.root);
        if (w === "--policy-pack") {
            // In the reader's project, the installed package; here, this repository's build of it.
            const installed = "node_modules/hybrid-counter/";
            const pack = value!.startsWith(installed)
                ? path.join(world.root, value!.slice(installed.length))
                : path.resolve(command.cwd, value!);
            assertThat(
                existsSync(path.join(pack, "PulumiPolicy.yaml")) || existsSync(path.join(pack, "index.js")),
                command,
                `no policy pack at ${value}`,
            );
        }
        if (w === "--policy-pack-config" || (verb === "policy" && w === "--config")) {
            assertThat(world.files.has(path.basename(value!)), command, `${value} is not a file the page gives`);
        }
    }
}

/** Runs or checks one command; throws DocCommandError naming the page, the line and what failed. */
export async function runCommand(command: ShellCommand, world: DocWorld): Promise<Ran | undefined> {
    const [tool, verb, ...rest] = command.words;
    const after = command.words.includes("--") ? command.words.slice(command.words.indexOf("--") + 1) : [];
    switch (tool) {
        case "npm": {
            const scripts = scriptsOf(world.root);
            if (verb === "ci") {
                const lock = JSON.parse(readFileSync(path.join(command.cwd, "package-lock.json"), "utf8")) as {
                    packages: Record<string, { dependencies?: object; devDependencies?: object }>;
                };
                const manifest = JSON.parse(readFileSync(path.join(command.cwd, "package.json"), "utf8")) as {
                    dependencies?: object;
                    devDependencies?: object;
                };
                const same = (a?: object, b?: object) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {});
                assertThat(
                    same(lock.packages[""]?.dependencies, manifest.dependencies) &&
                        same(lock.packages[""]?.devDependencies, manifest.devDependencies),
                    command,
                    "package-lock.json does not match package.json: npm ci refuses it",
                );
                return undefined;
            }
            if (verb === "test") {
                assertThat(/\bmocha\b/.test(scripts.test ?? ""), command, "the test script does not run mocha");
                return undefined;
            }
            if (verb === "install") {
                const manifest = JSON.parse(readFileSync(path.join(world.root, "package.json"), "utf8")) as {
                    name: string;
                    dependencies: Record<string, string>;
                    peerDependencies: Record<string, string>;
                };
                const known = new Set([manifest.name, ...Object.keys(manifest.dependencies), ...Object.keys(manifest.peerDependencies)]);
                for (const name of rest.filter((w) => !w.startsWith("-"))) {
                    assertThat(known.has(name), command, `${name} is neither this package nor one it depends on`);
                }
                assertThat(existsSync(path.join(command.cwd, "package.json")), command, "no package.json where it runs");
                return undefined;
            }
            if (verb === "start") {
                return runScript(command, world, "start", after);
            }
            assertThat(verb === "run" && rest[0] !== undefined, command, "an npm command the docs checker does not know");
            const covered = COVERED[rest[0]];
            if (covered !== undefined) {
                // A script that rewrites the repository's own files (dist/, schema.json), which tests beside this one read.
                assertThat(scripts[rest[0]] !== undefined, command, `package.json has no "${rest[0]}" script`);
                const text = covered === "npm test" ? scripts.test : readFileSync(path.join(world.root, covered), "utf8");
                assertThat(text?.includes(COVERED_BY[rest[0]]!) ?? false, command, `${covered} does not run it`);
                return undefined;
            }
            return runScript(command, world, rest[0], after);
        }
        case "npx":
            assertThat(verb === "hybrid-counter", command, "npx runs only this package's bin");
            return runCli(command, world);
        case "cd":
            assertThat(existsSync(command.cwd) && existsSync(path.resolve(command.cwd, verb!)), command, `no folder ${verb}`);
            return undefined;
        case "pulumi":
            checkPulumi(command, world);
            return undefined;
        default:
            throw new DocCommandError(command, `${tool} is not a command the docs checker runs or checks`);
    }
}
