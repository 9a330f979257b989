/**
 * The Node.js the tests run on: the package states `engines.node >=22` (the AWS SDK's releases after January 2027
 * need it, and the functions deploy on nodejs22.x), and the `node` devDependency puts Node.js 22 at
 * node_modules/.bin/node, first on the PATH of every npm script. This file runs where every other test file runs
 * (a mocha worker under `--parallel`), and checks the process itself, a `node` found on the PATH (what a test's or
 * a documented command's child process runs) and tsx's child, each printing the version it saw.
 */
import { strict as assert } from "node:assert";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";

const root = path.resolve(__dirname, "..");

/** The lowest major the manifest's `engines.node` (">=N") allows. */
function enginesMajor(): number {
    const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { engines: { node: string } };
    const match = /^>=(\d+)$/.exec(manifest.engines.node);
    assert.ok(match, `engines.node is "${manifest.engines.node}"`);
    return Number(match[1]);
}

const major = (version: string): number => Number(/^v(\d+)\./.exec(version.trim())?.[1]);

describe("the Node.js the tests run on", function () {
    it("is at least the manifest's engines.node: this worker, a node from the PATH, and tsx's child", () => {
        // Prepare
        const floor = enginesMajor();

        // Act
        const here = process.version;
        const fromPath = execFileSync("node", ["--version"], { encoding: "utf8" }).trim();
        const underTsx = execFileSync(path.join(root, "node_modules", ".bin", "tsx"), ["-e", "process.stdout.write(process.version)"], {
            encoding: "utf8",
        });
        process.stderr.write(`Node.js: mocha worker ${here} (pid ${process.pid}), node on PATH ${fromPath}, tsx child ${underTsx}\n`);

        // Assess
        assert.equal(floor, 22);
        assert.ok(major(here) >= floor, `this test file runs on ${here}`);
        assert.ok(major(fromPath) >= floor, `node on the PATH is ${fromPath}`);
        assert.ok(major(underTsx) >= floor, `tsx runs ${underTsx}`);
    });
});
