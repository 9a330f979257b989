/**
 * Documentation that runs, the long part: the commands of README.md and docs/*.md that run the twin, the bench,
 * its sweep or the checker (test/support/doc-runner.ts, `runsProgram`), run as the page gives it, with the page's
 * flags at a smaller size (each size flag lowered to a bound; `npm run docs:full` runs them at the page's own size).
 * Each program starts its own DynamoDB Local, as it does for a reader. The rest of the pages runs in
 * test/docs-run.test.ts.
 *
 * `npm test` runs the first command the pages give each program but the benchmark's (README's `npm start`, today):
 * the benchmark is a script of its own, not part of the tests, and its scenarios take minutes even at the suite's
 * size. `npm run docs:programs` (HYBRID_COUNTER_DOCS_PROGRAMS=all) runs every command, at the suite's size, and
 * `npm run docs:full` every command at the page's own. Every flag a page gives a program is checked in every
 * `npm test` all the same: test/readme.test.ts parses it with the program's own parser.
 */
import { strict as assert } from "node:assert";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { programRun, runCommand, runsProgram, type DocWorld } from "./support/doc-runner";
import { SHELL_LANGS, samples, shellCommands } from "./support/doc-samples";

const root = path.resolve(__dirname, "..");
const pages = [
    "README.md",
    ...readdirSync(path.join(root, "docs"))
        .filter((f) => f.endsWith(".md"))
        .map((f) => `docs/${f}`),
];
const commands = pages
    .flatMap((page) => samples(page, readFileSync(path.join(root, page), "utf8")))
    .filter((s) => SHELL_LANGS.has(s.lang))
    .flatMap((s) => shellCommands(s, root))
    .filter((c) => runsProgram(c, root));

/** The benchmark's programs (bench/run.ts): its scenarios, its sweep. */
const BENCHMARK = new Set(["bench", "busy", "ceiling", "sweep"]);
const all = process.env.HYBRID_COUNTER_DOCS_PROGRAMS === "all" || process.env.HYBRID_COUNTER_DOCS_FULL === "1";
const kinds = commands.map((c) => programRun(c, root));
/** What this run runs: every command, or the first of each program but the benchmark's. */
const run = commands.filter((_, i) => all || (!BENCHMARK.has(kinds[i]!) && kinds.indexOf(kinds[i]) === i));

describe("documentation that runs: the twin, the bench and the checker as the pages give them", function () {
    const world: DocWorld = {
        root,
        work: mkdtempSync(path.join(tmpdir(), "hc-docs-programs-")),
        bin: "",
        env: {
            PATH: process.env.PATH ?? "",
            HOME: process.env.HOME ?? "",
            JAVA_HOME: process.env.JAVA_HOME ?? "",
        },
        stackOutputs: () => assert.fail("no program command reads the stack's outputs"),
        files: new Map(),
        full: process.env.HYBRID_COUNTER_DOCS_FULL === "1",
    };

    it("finds the twin and the bench among the pages' commands", () => {
        const programs = commands.map((c) => c.words.slice(0, 3).join(" "));
        assert.ok(programs.includes("npm start"), programs.join(", "));
        assert.ok(programs.includes("npm run bench"), programs.join(", "));
    });

    for (const command of run) {
        it(`${command.page}:${command.line}: ${command.text}`, async () => {
            const ran = await runCommand(command, world);
            assert.ok(ran !== undefined, "the program ran");
            if (command.words.includes("--json")) {
                assert.equal(typeof JSON.parse(ran.stdout), "object");
            }
        });
    }
});
