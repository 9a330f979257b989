// npm test's parallel run (`mocha --config test/parallel.mocharc.js`): .mocharc.json's settings, two files at a
// time, every test/**/*.test.ts but the packed-package test (npm test runs it alone afterwards: its `npm pack`
// rebuilds dist/, which other tests read).
//
// Mocha hands the files to its two workers in the order listed, each taking the next when it finishes one. In
// alphabetical order the longest files started halfway through (docs-programs, fuzz) or last (twin), and one
// worker ran on alone for minutes at the end; here the files that take minutes come first, longest first, and
// the short ones fill in behind them, so that the two workers finish together. Longest by one measured run
// (seconds of one worker, on the shared 2-core machine under heavy load): docs-programs 578, fuzz 554, twin over
// 500, runtime-shard-consumer 408, runtime-faults 368, runtime-heal-race 300, runtime-marker-bound 209,
// backfill-concurrent 192, runtime-shard-backfill 139, sweep 131, runtime-shard-heal-index 115, fuzz-replay 99,
// runtime-shard-bound 98; every other file took 72 s or less.
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
    "docs-programs",
    "fuzz",
    "twin",
    "runtime-shard-consumer",
    "runtime-faults",
    "runtime-heal-race",
    "runtime-marker-bound",
    "backfill-concurrent",
    "runtime-shard-backfill",
    "sweep",
    "runtime-shard-heal-index",
    "fuzz-replay",
    "runtime-shard-bound",
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
