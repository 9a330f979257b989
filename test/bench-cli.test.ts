import { spawnSync } from "node:child_process";
import { strict as assert } from "node:assert";
import * as path from "node:path";
import { BenchUsageError, parseOptions } from "../bench/run";

const root = path.resolve(__dirname, "..");
const tsx = path.join(root, "node_modules", ".bin", "tsx");

function bench(args: string[]) {
    return spawnSync(tsx, ["bench/run.ts", ...args], { cwd: root, encoding: "utf8", env: { ...process.env, NODE_NO_WARNINGS: "1" } });
}

describe("npm run bench: its flags", function () {
    it("--help prints the options on stdout and exits 0, starting no engine", () => {
        const result = bench(["--help"]);
        assert.equal(result.status, 0, result.stderr);
        assert.match(result.stdout, /^Usage: npm run bench -- \[options\]\n/);
        for (const flag of ["--ops", "--faults", "--approaches", "--scenario", "--counters", "--json", "--help"]) {
            assert.ok(result.stdout.includes(flag), `the help names ${flag}`);
        }
    });

    it("--sweep --help prints the sweep's own options and exits 0, measuring nothing", () => {
        const result = bench(["--sweep", "--help"]);
        assert.equal(result.status, 0, result.stderr);
        assert.match(result.stdout, /^Usage: npm run bench -- --sweep \[options\]\n/);
        for (const flag of ["--seconds", "--loads", "--spreads", "--window", "--render", "--json", "--help"]) {
            assert.ok(result.stdout.includes(flag), `the help names ${flag}`);
        }
    });

    it("an unknown flag exits 2 with one line that names it and no stack", () => {
        const result = bench(["--bogus"]);
        assert.equal(result.status, 2, result.stderr);
        assert.equal(result.stdout, "");
        const lines = result.stderr.trim().split("\n");
        assert.equal(lines.length, 1, result.stderr);
        assert.match(lines[0]!, /^error: Unknown option '--bogus'/);
    });

    it("a bad value is a usage error naming its flag", () => {
        for (const [args, flag] of [
            [["--ops", "abc"], "--ops"],
            [["--scenario", "nope"], "--scenario"],
            [["--counters", "elsewhere"], "--counters"],
            [["--approaches", "magic"], "--approaches"],
        ] as const) {
            assert.throws(
                () => parseOptions([...args]),
                (error: unknown) => error instanceof BenchUsageError && error.message.startsWith(flag),
                args.join(" "),
            );
        }
    });
});
