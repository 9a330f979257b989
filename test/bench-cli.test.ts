import { spawnSync } from "node:child_process";
import { strict as assert } from "node:assert";
import * as path from "node:path";

const root = path.resolve(__dirname, "..");
const tsx = path.join(root, "node_modules", ".bin", "tsx");

function bench(args: string[]) {
    return spawnSync(tsx, ["bench/run.ts", ...args], { cwd: root, encoding: "utf8", env: { ...process.env, NODE_NO_WARNINGS: "1" } });
}

describe("npm run bench: its flags", function () {
    this.timeout(60_000);

    it("--help prints the options on stdout and exits 0, starting no engine", () => {
        const result = bench(["--help"]);
        assert.equal(result.status, 0, result.stderr);
        assert.match(result.stdout, /^Usage: npm run bench -- \[options\]\n/);
        for (const flag of ["--ops", "--faults", "--approaches", "--scenario", "--counters", "--json", "--help"]) {
            assert.ok(result.stdout.includes(flag), `the help names ${flag}`);
        }
    });

    it("an unknown flag, or a bad value, exits 2 with one line that names it and no stack", () => {
        for (const [args, flag] of [
            [["--bogus"], "--bogus"],
            [["--ops", "abc"], "--ops"],
            [["--scenario", "nope"], "--scenario"],
        ] as const) {
            const result = bench([...args]);
            assert.equal(result.status, 2, `${args.join(" ")}: ${result.stderr}`);
            assert.equal(result.stdout, "");
            const lines = result.stderr.trim().split("\n");
            assert.equal(lines.length, 1, result.stderr);
            assert.match(lines[0]!, /^error: /);
            assert.ok(lines[0]!.includes(flag), `${lines[0]} names ${flag}`);
        }
    });
});
