/**
 * The README and the pages of docs/ (docs/design/ included) say only what is true of this repository: every link
 * resolves (to a file, and for an `#anchor` into a page, to one of its headings), every page is linked from the front
 * page, and the front page stays a front page: at most 250 lines, its first screen saying what the package is, how to
 * install it, how to add it to a program and how to run it; its Guarantees at most 600 words, the one-mode assumption
 * and every term defined before the table, each exception a link to its own heading in docs/limits.md, and each row
 * proven (docs/guarantees.md names a test file that exists, or the checker). The bench's figures sit in one table per
 * page, under the line naming the command that measures them. Every command the docs give runs: the repository's own
 * programs (the twin, the bench and its sweep, the checker, the CLI) answer `--help`, in process, and accept every flag
 * the docs pass them.
 */
import { strict as assert } from "node:assert";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { Command, CommanderError } from "commander";
import { BENCH_USAGE, parseOptions as parseBenchArgs } from "../bench/run";
import { runSweep } from "../bench/sweep";
import { parseSweepArgs, SWEEP_USAGE } from "../bench/sweep-plan";
import { buildProgram } from "../cli/index";
import { parseTwinArgs, USAGE as TWIN_USAGE } from "../local/twin/twin";
import { FUZZ_USAGE, parseFuzzArgs } from "../scripts/fuzz";
import { MUTANTS } from "./fuzz/mutants";
import { REGIONS_MUTANTS } from "./fuzz/regions/mutants";
import { CONFIG_KEYS, CONFIG_NAMESPACE, stackSettingsFromConfig } from "../stack/config";

const root = path.resolve(__dirname, "..");
/** The front page, then every page of docs/ and docs/design/, by path from the root. */
const pages = [
    "README.md",
    ...["docs", "docs/design"].flatMap((dir) =>
        readdirSync(path.join(root, dir))
            .filter((f) => f.endsWith(".md"))
            .map((f) => `${dir}/${f}`),
    ),
];
const text = new Map(pages.map((page) => [page, readFileSync(path.join(root, page), "utf8")]));
const readme = text.get("README.md")!;
const scripts = (JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;

/** A placeholder the docs write for a path on the reader's machine, and what it is here. */
const PLACEHOLDERS: Record<string, string> = { "<path to this repository>": root };

/** Markdown without its fenced code blocks (whose `#` lines are comments and whose `](` is code). */
function prose(markdown: string): string {
    return markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, "");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen. */
function githubSlug(heading: string): string {
    return heading
        .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, "")
        .replace(/ /g, "-");
}

/** The anchors of a page's headings, with GitHub's -1, -2 suffixes for repeated ones. */
function anchors(markdown: string): Set<string> {
    const seen = new Map<string, number>();
    const out = new Set<string>();
    for (const [, heading] of prose(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
        const slug = githubSlug(heading!);
        const n = seen.get(slug) ?? 0;
        seen.set(slug, n + 1);
        out.add(n === 0 ? slug : `${slug}-${n}`);
    }
    return out;
}

/** Every relative link and image of a page: its target file (from the root) and anchor. */
function relativeLinks(page: string): Array<{ target: string; file: string; anchor?: string }> {
    const body = prose(text.get(page)!).replace(/`[^`\n]*`/g, "");
    const out: Array<{ target: string; file: string; anchor?: string }> = [];
    for (const [, target] of body.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z]+:/.test(target!)) {
            continue;
        }
        const [file, anchor] = target!.split("#") as [string, string | undefined];
        out.push({
            target: target!,
            file: file === "" ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), file)),
            anchor,
        });
    }
    return out;
}

/** Splits a command line into words; a quoted word or a `<placeholder ...>` stays one word. */
function words(command: string): string[] {
    return command.match(/'[^']*'|<[^>]*>\S*|\S+/g)!.map((w) => w.replace(/^'(.*)'$/, "$1"));
}

interface ShellCommand {
    readonly page: string;
    readonly cwd: string;
    readonly words: string[];
}

/**
 * Every command of a page's `sh` blocks, split at `&&`, with the folder it runs in: a `cd` alone on its line
 * moves the lines after it in its block; one joined by `&&` moves only the rest of its line.
 */
function shellCommands(page: string): ShellCommand[] {
    const out: ShellCommand[] = [];
    for (const block of text.get(page)!.matchAll(/```sh\n([\s\S]*?)```/g)) {
        let blockCwd = root;
        for (const line of block[1]!.split("\n").filter((l) => l.trim() !== "")) {
            let cwd = blockCwd;
            const commands = line.split("&&").map((c) => c.trim());
            for (const command of commands) {
                const w = words(command);
                if (w[0] === "cd") {
                    cwd = path.resolve(cwd, w[1]!);
                    if (commands.length === 1) {
                        blockCwd = cwd;
                    }
                }
                out.push({ page, cwd, words: w });
            }
        }
    }
    return out;
}

/**
 * One of the repository's programs as a command names it: the twin (`npm start`), the bench, its sweep, the
 * checker (`npm run fuzz`) or a command of the CLI (`npx hybrid-counter <command>`), with the arguments it is given.
 */
interface Invocation {
    readonly program: "twin" | "bench" | "sweep" | "fuzz" | "cli";
    /** The CLI's command path (`fatal replay`); empty for the others. */
    readonly path: string[];
    readonly args: string[];
}

/** The program a command runs, or undefined when it runs none of the repository's programs. */
function invocation(command: readonly string[]): Invocation | undefined {
    const [tool, verb, name] = command;
    const after = command.indexOf("--") >= 0 ? command.slice(command.indexOf("--") + 1) : [];
    if (tool === "npm" && verb === "start") {
        return { program: "twin", path: [], args: after };
    }
    if (tool === "npm" && verb === "run" && name === "bench") {
        return after.includes("--sweep")
            ? { program: "sweep", path: [], args: after.filter((a) => a !== "--sweep") }
            : { program: "bench", path: [], args: after };
    }
    if (tool === "npm" && verb === "run" && name === "fuzz") {
        return { program: "fuzz", path: [], args: after };
    }
    if (tool === "npx" && verb === "hybrid-counter") {
        const program = buildProgram(() => undefined);
        const rest = command.slice(2);
        const commandPath: string[] = [];
        let current: Command = program;
        while (rest.length > 0 && current.commands.some((c) => c.name() === rest[0])) {
            current = current.commands.find((c) => c.name() === rest[0])!;
            commandPath.push(rest.shift()!);
        }
        if (commandPath.length === 0 && rest.length > 0 && !rest[0]!.startsWith("-") && !rest[0]!.startsWith("<")) {
            // Not a command of the CLI: kept in the path, so that checking it fails and names it.
            commandPath.push(rest.shift()!);
        }
        return { program: "cli", path: commandPath, args: rest };
    }
    return undefined;
}

/** Runs `fn` with stdout captured, and returns what it wrote. */
async function capturingStdout(fn: () => Promise<unknown>): Promise<{ out: string; error?: unknown }> {
    const chunks: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array) => (chunks.push(String(chunk)), true)) as typeof process.stdout.write;
    try {
        await fn();
        return { out: chunks.join("") };
    } catch (error) {
        return { out: chunks.join(""), error };
    } finally {
        process.stdout.write = write;
    }
}

/** The CLI command a path names, and every long flag it takes (its own and the program's global ones). */
function cliCommand(commandPath: readonly string[]): { command: Command; flags: Set<string> } {
    let command: Command = buildProgram(() => undefined);
    const flags = new Set<string>(["--help"]);
    for (let i = 0; ; i++) {
        for (const option of command.options) {
            flags.add(option.long!);
        }
        if (i === commandPath.length) {
            return { command, flags };
        }
        const next = command.commands.find((c) => c.name() === commandPath[i]);
        assert.ok(
            next,
            `${commandPath[i]} is a command of hybrid-counter${commandPath
                .slice(0, i)
                .map((c) => ` ${c}`)
                .join("")}`,
        );
        command = next;
    }
}

/** `<program> --help`, in process: what the program prints, after checking it answers help and nothing else. */
async function help(program: Invocation["program"], commandPath: readonly string[]): Promise<string> {
    switch (program) {
        case "twin":
            assert.equal(parseTwinArgs(["--help"]), "help");
            return TWIN_USAGE;
        case "bench":
            assert.equal(parseBenchArgs(["--help"]), "help");
            return BENCH_USAGE;
        case "fuzz":
            assert.equal(parseFuzzArgs(["--help"]), "help");
            return FUZZ_USAGE;
        case "sweep": {
            const { out, error } = await capturingStdout(() => runSweep(["--help"]));
            assert.equal(error, undefined);
            assert.equal(out, SWEEP_USAGE);
            return out;
        }
        case "cli": {
            cliCommand(commandPath);
            const { out, error } = await capturingStdout(() =>
                buildProgram(() => undefined).parseAsync([...commandPath, "--help"], { from: "user" }),
            );
            assert.ok(error instanceof CommanderError && error.exitCode === 0, `hybrid-counter ${commandPath.join(" ")} --help exits 0`);
            assert.ok(out.startsWith(`Usage: hybrid-counter${commandPath.map((c) => ` ${c}`).join("")} `), out);
            return out;
        }
    }
}

/** The long flags (`--name`, without a value) among a command's words. */
function longFlags(args: readonly string[]): string[] {
    return args.filter((a) => a.startsWith("--")).map((a) => a.split("=")[0]!);
}

/** Asserts a program accepts every flag it is given, by its own parser where the words are literal values. */
function acceptsFlags(run: Invocation, usage: string, literal: boolean): void {
    if (run.program === "cli") {
        const { flags } = cliCommand(run.path);
        for (const flag of longFlags(run.args)) {
            assert.ok(flags.has(flag), `hybrid-counter ${run.path.join(" ")} takes ${flag}`);
        }
        return;
    }
    for (const flag of longFlags(run.args)) {
        assert.match(usage, new RegExp(`(^|[\\s,])${flag}(?=[\\s,=]|$)`, "m"), `${run.program}'s usage names ${flag}`);
    }
    if (literal) {
        const parsed =
            run.program === "twin"
                ? parseTwinArgs(run.args)
                : run.program === "bench"
                  ? parseBenchArgs(run.args)
                  : run.program === "sweep"
                    ? parseSweepArgs(run.args)
                    : parseFuzzArgs(run.args);
        assert.notEqual(parsed, "help");
    }
}

/** Commands in inline code that run one of the repository's programs or scripts (`npm run bench -- --sweep`). */
function inlineCommands(page: string): string[][] {
    const out: string[][] = [];
    for (const [, code] of prose(text.get(page)!).matchAll(/`([^`\n]+)`/g)) {
        if (/^(npm (start|test|run \S+)|npx hybrid-counter)(\s|$)/.test(code!)) {
            out.push(words(code!.split("|")[0]!.trim()));
        }
    }
    return out;
}

describe("the README and docs/ are true", () => {
    const commands = pages.flatMap(shellCommands);

    it("the README is a front page: at most 250 lines", () => {
        const lines = readme.trimEnd().split("\n").length;
        assert.ok(lines <= 250, `the README has ${lines} lines`);
    });

    it("links every page of docs/ from the README", () => {
        const linked = new Set(relativeLinks("README.md").map((l) => l.file));
        for (const page of pages.filter((p) => p !== "README.md")) {
            assert.ok(linked.has(page), `the README links ${page}`);
        }
    });

    for (const page of pages) {
        it(`${page}: every relative link resolves, and every anchor names a heading`, () => {
            for (const { target, file, anchor } of relativeLinks(page)) {
                assert.ok(existsSync(path.join(root, file)), `${page}: ${target} (${file}) exists`);
                if (anchor !== undefined && file.endsWith(".md")) {
                    const target = text.get(file) ?? readFileSync(path.join(root, file), "utf8");
                    assert.ok(anchors(target).has(anchor), `${page}: ${file} has a heading #${anchor}`);
                }
            }
        });
    }

    it("keeps each page's bench figures in one table, under the line naming the command that measures them", () => {
        for (const page of ["docs/costs.md", "docs/performance.md", "docs/sharding.md"]) {
            const body = prose(text.get(page)!);
            const marked = [...body.matchAll(/^Measured by `npm run bench[^\n]*(?:\n[^\n|][^\n]*)*\n\n((?:\|[^\n]*\n)+)/gm)];
            assert.equal(marked.length, 1, `${page}: one "Measured by \`npm run bench ...\`" line, followed by its table`);
            const rows = marked[0]![1]!.trimEnd().split("\n");
            const width = rows[0]!.split(" | ").length;
            assert.ok(rows.length >= 3, `${page}: the measured table has rows`);
            for (const row of rows) {
                assert.equal(row.split(" | ").length, width, `${page}: every row of the measured table has its header's cells: ${row}`);
            }
            const tables = [...body.matchAll(/^\|[^\n]*\n\|( --- \|)+$/gm)].map((m) => m.index);
            const measuredAt = body.indexOf(marked[0]![1]!);
            for (const at of tables.filter((at) => at !== measuredAt)) {
                const table = body.slice(at).split("\n\n")[0]!;
                assert.ok(
                    !/to be measured|\d+(\.\d+)? (ms|creates\/s|items\/s)\b/.test(table),
                    `${page}: a figure outside the measured table: ${table.split("\n")[0]}`,
                );
            }
        }
    });

    it("says on its first screen what the package is, how to install it, how to add it to a program and how to run it", () => {
        const sections = [...readme.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
        assert.deepEqual(sections.slice(0, 4), ["Install", "Add it to a Pulumi program", "Run it locally, and test it", "Guarantees"]);
        const intro = readme.slice(0, readme.indexOf("## Install"));
        assert.ok(intro.split("\n").filter((l) => l.trim() !== "").length <= 6, "the opening says what it is in a few lines");
        const add = readme.slice(readme.indexOf("## Add it to a Pulumi program"), readme.indexOf("## Run it locally"));
        assert.match(add, /new HybridCounterComponent\(/);
        assert.match(add, /export const clientConfig = counter\.clientConfig;/);
        assert.match(
            add,
            /new HybridCounterClient\(\{ \.\.\.clientConfig, dynamodb/,
            "the API builds its client from clientConfig, the mode travelling in it",
        );
        assert.doesNotMatch(add, /\bmode: "/, "the client is given no mode of its own");
    });

    /** The README's Guarantees section, and its table's rows as [promise, utilization, strict, exceptions]. */
    const guarantees = readme.slice(readme.indexOf("## Guarantees\n"), readme.indexOf("\n## ", readme.indexOf("## Guarantees\n") + 1));
    const tableAt = guarantees.indexOf("| Promise |");
    const promiseRows = guarantees
        .slice(tableAt)
        .split("\n")
        .filter((line) => line.startsWith("| **"))
        .map((line) => line.slice(2, -2).split(" | "));

    it("keeps its Guarantees under 600 words, the one-mode assumption and every term defined before the table", () => {
        const words = guarantees.split(/\s+/).filter((w) => w !== "").length;
        assert.ok(words <= 600, `the Guarantees have ${words} words`);
        assert.ok(tableAt > 0, "the Guarantees have a table of promises");
        const before = guarantees.slice(0, tableAt);
        assert.match(before.split("\n\n")[1]!, /^A counter has one mode/, "the one-mode assumption comes first");
        for (const term of ["best-effort", "eventual", "live", "slot", "settler", "ledger"]) {
            assert.ok(before.toLowerCase().includes(`**${term}**`), `${term} is defined before the table`);
        }
        assert.ok(promiseRows.length >= 8, `${promiseRows.length} promises`);
    });

    it("links each exception of a Guarantees row to its own heading in docs/limits.md", () => {
        const limitHeadings = anchors(text.get("docs/limits.md")!);
        for (const [promise, , , exceptions] of promiseRows) {
            assert.ok(exceptions !== undefined, `${promise}: an exceptions cell`);
            if (exceptions === "none") {
                continue;
            }
            const links = exceptions.split(", ");
            for (const link of links) {
                const [, anchor] = /^\[[^\]]+\]\(docs\/limits\.md#([^)]+)\)$/.exec(link) ?? [];
                assert.ok(anchor !== undefined, `${promise}: "${link}" is a link to a heading of docs/limits.md`);
                assert.ok(limitHeadings.has(anchor), `${promise}: docs/limits.md has a heading #${anchor}`);
            }
        }
    });

    it("groups docs/limits.md by effect, one heading per caveat", () => {
        const limits = prose(text.get("docs/limits.md")!);
        assert.deepEqual(
            [...limits.matchAll(/^## (.+)$/gm)].map((m) => m[1]),
            ["Passes the limit", "Holds a slot", "Undercounts", "Heals later", "Needs an operator", "Not built"],
        );
        const caveats = [...limits.matchAll(/^### (.+)$/gm)].map((m) => githubSlug(m[1]!));
        assert.equal(new Set(caveats).size, caveats.length, "no two caveats share a heading");
        assert.ok(caveats.length >= 20, `${caveats.length} caveats`);
    });

    it("proves every Guarantees row in docs/guarantees.md: a test file that exists, or the model-based checker", () => {
        const proofs = new Map(
            prose(text.get("docs/guarantees.md")!)
                .split("\n")
                .filter((line) => line.startsWith("| **"))
                .map((line) => line.slice(2, -2).split(" | "))
                .map((cells) => [cells[0]!, cells[cells.length - 1]!]),
        );
        assert.deepEqual(
            [...proofs.keys()],
            promiseRows.map(([promise]) => promise),
            "one proof row per promise, in the README's order",
        );
        for (const [promise, proof] of proofs) {
            const named = proof.split(";").map((part) => part.trim().split(" ")[0]!);
            assert.ok(
                named.some((name) => name !== "checker:"),
                `${promise} names a test file`,
            );
            for (const name of named) {
                if (name !== "checker:") {
                    assert.ok(existsSync(path.join(root, "test", `${name}.test.ts`)), `${promise}: test/${name}.test.ts exists`);
                }
            }
        }
    });

    it("lists every mutant of the checker in docs/checker.md, and no other", () => {
        const listed = [...prose(text.get("docs/checker.md")!).matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1]).sort();
        assert.deepEqual(listed, [...Object.keys(MUTANTS), ...Object.keys(REGIONS_MUTANTS)].sort());
    });

    it("has the two commands of a fresh machine, each alone on its line of an sh block", () => {
        const lines = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((block) => block[1]!.split("\n"));
        assert.ok(lines.includes("npm ci && npm start"), "the README gives `npm ci && npm start` alone on a line of an sh block");
        assert.ok(lines.includes("npm test"), "the README gives `npm test` alone on a line of an sh block");
    });

    for (const { page, cwd, words } of commands) {
        const command = words.join(" ");
        it(`${page}: ${path.relative(root, cwd) || "."}$ ${command}`, async () => {
            const [tool, verb, ...rest] = words;
            switch (tool) {
                case "npm": {
                    if (verb === "ci") {
                        assert.ok(existsSync(path.join(cwd, "package-lock.json")), "npm ci needs a lock file");
                    } else if (verb === "install") {
                        assert.ok(existsSync(path.join(cwd, "package.json")));
                    } else if (verb === "start" || verb === "test") {
                        assert.ok(scripts[verb], `package.json has no ${verb} script`);
                    } else {
                        assert.equal(verb, "run");
                        assert.ok(scripts[rest[0]!], `package.json has no ${rest[0]} script`);
                    }
                    const run = invocation(words);
                    if (run) {
                        acceptsFlags(run, await help(run.program, run.path), true);
                    } else {
                        assert.ok(!words.includes("--"), `${command}: options for a script that is not one of the checked programs`);
                    }
                    return;
                }
                case "cd":
                    assert.ok(
                        existsSync(path.join(cwd, "Pulumi.yaml")) || existsSync(path.join(cwd, "PulumiPolicy.yaml")),
                        `${cwd} is a Pulumi project or policy pack`,
                    );
                    return;
                case "pulumi": {
                    // Needs the Pulumi CLI, which cannot be installed here: check what it would read.
                    const project = verb === "policy" ? "PulumiPolicy.yaml" : "Pulumi.yaml";
                    assert.ok(existsSync(path.join(cwd, project)), `${cwd} has ${project}`);
                    if (verb === "config" && rest[0] === "set") {
                        const args = rest.slice(1).filter((w) => w !== "--path");
                        const [key, value] = args as [string, string];
                        const [namespace, name] = key.split(":") as [string, string];
                        if (namespace !== "aws") {
                            assert.equal(namespace, CONFIG_NAMESPACE);
                            const top = name.split(".")[0]!;
                            assert.ok(top in CONFIG_KEYS, `${top} is a setting of the root program`);
                            const config =
                                top === "tags"
                                    ? { [`${namespace}:tags`]: JSON.stringify({ [name.split(".")[1]!]: value }) }
                                    : { [key]: value };
                            assert.doesNotThrow(() => stackSettingsFromConfig(config));
                        }
                    }
                    for (const [i, w] of words.entries()) {
                        if (w === "--policy-pack") {
                            const pack = Object.entries(PLACEHOLDERS).reduce((p, [name, value]) => p.replace(name, value), words[i + 1]!);
                            assert.ok(existsSync(path.resolve(cwd, pack, "PulumiPolicy.yaml")), `the policy pack ${words[i + 1]} exists`);
                        }
                    }
                    return;
                }
                case "npx": {
                    // The package's own bin, with one of its commands.
                    assert.equal(verb, "hybrid-counter");
                    const run = invocation(words)!;
                    assert.ok(run.path.length > 0, `${command} names a command of the CLI`);
                    acceptsFlags(run, await help(run.program, run.path), true);
                    return;
                }
                case "apt-get":
                case "aws":
                    // Operator commands for the user's own machine and account.
                    assert.ok(["install", "sqs"].includes(verb!), command);
                    return;
                default:
                    assert.fail(`the docs run an unchecked command: ${command}`);
            }
        });
    }

    // Every distinct program the docs name, in their sh blocks or inline (`npm run fuzz -- --replay`), answers
    // --help in process and takes every flag the docs give it there.
    const named = pages.flatMap((page) =>
        [...shellCommands(page).map((c) => c.words), ...inlineCommands(page)].map((command) => ({ page, command })),
    );
    it("names only npm scripts that exist", () => {
        for (const { page, command } of named.filter(({ command }) => command[0] === "npm" && command[1] === "run")) {
            assert.ok(scripts[command[2]!], `${page}: package.json has no ${command[2]} script (${command.join(" ")})`);
        }
    });
    const runs = new Map<string, Array<{ page: string; run: Invocation }>>();
    for (const { page, command } of named) {
        const run = invocation(command);
        if (run) {
            const key = [run.program, ...run.path].join(" ");
            runs.set(key, [...(runs.get(key) ?? []), { page, run }]);
        }
    }
    for (const [key, uses] of runs) {
        it(`${key} --help, and the flags the docs give it`, async () => {
            const usage = await help(uses[0]!.run.program, uses[0]!.run.path);
            for (const { page, run } of uses) {
                try {
                    acceptsFlags(run, usage, false);
                } catch (error) {
                    assert.fail(`${page}: ${[run.program, ...run.path, ...run.args].join(" ")}: ${(error as Error).message}`);
                }
            }
        });
    }
});
