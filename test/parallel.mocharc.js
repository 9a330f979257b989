// npm test's parallel run (`mocha --config test/parallel.mocharc.js`): .mocharc.json's settings, two files at a
// time, every test/**/*.test.ts but the packed-package test (npm test runs it alone afterwards: its `npm pack`
// rebuilds dist/, which other tests read).
//
// Mocha hands the files to its two workers in the order listed, each taking the next when it finishes one. In
// alphabetical order the longest files started halfway through or last, and one worker ran on alone for minutes at
// the end; here the files that take longest come first, longest first, and the short ones fill in behind them, so
// that the two workers finish together. Longest by one measured run of each file alone (`/usr/bin/time npm exec --
// mocha <file>`, on the shared 2-core machine at a load of 8 to 16, the JVM settings below): seconds of wall clock,
// then of CPU. fuzz 279 and 71, runtime-faults 105 and 57, twin 91 and 33, bench-busy-heal 87 and 55,
// backfill-concurrent 71 and 40, fuzz-paths 69 and 42, runtime-marker-bound 47 and 30, examples 52 and 21,
// runtime-adoption 51 and 20, runtime-e2e 48 and 22, policy-pack 45 and 6, runtime-heal-race 44 and 26, docs-run 43
// and 18, schema 43 and 12, fuzz-replay 37 and 29, cli 35 and 12; every other file took under 35 s of wall clock and
// 25 s of CPU. All the files together: about 830 s of CPU.
//
// DynamoDB Local's JVM (local/engine/engine.ts), in every file and in the programs the tests start, runs with the
// client compiler only and the serial collector: each file starts an engine of its own for a few seconds to a few
// minutes of work, where the optimizing compiler's threads cost more CPU than its code saves on two shared cores
// (runtime-heal-race: 56 s of CPU with the JVM's defaults, 41 s with these; runtime-marker-bound: 44 s and 31 s).
// A JDK_JAVA_OPTIONS set by the caller is kept.
"use strict";
const { existsSync, readdirSync } = require("node:fs");
const path = require("node:path");

const base = require("../.mocharc.json");

process.env.JDK_JAVA_OPTIONS ??= "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC";

const LONGEST_FIRST = [
    "fuzz",
    "fuzz-regions",
    "twin",
    "bench-busy-heal",
    "adopt-backfill",
    "examples",
    "adopt-concurrent",
    "ledger-bounds",
    "policy-pack",
    "docs-run",
    "schema",
    "fuzz-replay",
    "runtime-heal-race",
    "cli",
].map((name) => `test/${name}.test.ts`);

const ALONE = ["test/package.test.ts"];

for (const file of [...LONGEST_FIRST, ...ALONE]) {
    if (!existsSync(path.join(__dirname, "..", file))) {
        throw new Error(`test/parallel.mocharc.js names ${file}, which does not exist: rename or remove it there`);
    }
}

/** Every *.test.ts under test/, as the glob test/**\/*.test.ts finds them, with forward slashes. */
function testFiles(dir) {
    return readdirSync(path.join(__dirname, "..", dir), { withFileTypes: true })
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .flatMap((entry) =>
            entry.isDirectory() ? testFiles(`${dir}/${entry.name}`) : entry.name.endsWith(".test.ts") ? [`${dir}/${entry.name}`] : [],
        );
}

const rest = testFiles("test").filter((file) => !LONGEST_FIRST.includes(file) && !ALONE.includes(file));

module.exports = { ...base, parallel: true, jobs: 2, spec: [...LONGEST_FIRST, ...rest] };
