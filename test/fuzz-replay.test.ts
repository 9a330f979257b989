/**
 * The checker's determinism (test/fuzz/scheduler.ts): a seed alone decides its history. A history run twice releases
 * the same requests in the same order (the same trace digest); a task's parallel branches all reach the gate (or the
 * virtual clock) before the schedule moves; the runtime's sleeps wait on the virtual clock, never on the wall clock;
 * and a shrunk failing history fails the same way on every replay.
 */
import { ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { strict as assert } from "node:assert";
import { installPauses, pause } from "../runtime/shared/pauses";
import { fuzzClient } from "./fuzz/system";
import { VirtualTime, VIRTUAL_EPOCH_MS } from "./fuzz/clock";
import { generateHistory } from "./fuzz/history";
import { MUTANTS } from "./fuzz/mutants";
import { runHistory, FUZZ_ENGINE } from "./fuzz/run";
import { Scheduler } from "./fuzz/scheduler";
import { shrinkHistory, signature } from "./fuzz/shrink";
import { parseFuzzArgs, FuzzUsageError } from "../scripts/fuzz";
import { useEngine } from "./support/engine";

/** Microtask hops: enough that a branch taking them reaches the gate well after one that sends at once. */
async function hops(n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
        await Promise.resolve();
    }
}

describe("the checker replays a seed request for request", function () {
    const engine = useEngine(FUZZ_ENGINE);

    it("runs a seed's history twice with the same trace and request count", async () => {
        // Prepare: a long horizon over 3 shards, a settler that meets faults often, bursts, a fault rate of 0.2: every
        // parallel path the checker drives (two consumer instances, the settler's concurrent heals, sharded reads).
        const history = generateHistory(6, { ops: 80 });
        assert.equal(history.counterShards, 3);
        assert.deepEqual([history.profile.horizon, history.profile.healing, history.profile.bursts], ["long", true, true]);
        assert.ok(history.events.some((e) => e.op === "settle"));

        // Act
        const first = await runHistory(engine(), history);
        const second = await runHistory(engine(), history);
        const other = await runHistory(engine(), generateHistory(7, { ops: 80 }));

        // Assess
        assert.match(first.trace, /^[0-9a-f]{64}$/);
        assert.equal(second.trace, first.trace);
        assert.equal(second.stats.requests, first.stats.requests);
        assert.deepEqual(second.violations, first.violations);
        assert.deepEqual(second.stats, first.stats);
        assert.ok(first.stats.faults > 0, "the history met no fault");
        assert.notEqual(other.trace, first.trace);
    });

    it("lets no parallel branch of a task past the schedule: every branch is at the gate or asleep when it moves", async () => {
        // Prepare: one task with three branches: one sends at once, one after many microtask hops and a turn of the
        // event loop, one after a sleep on the virtual clock (through the runtime's pause).
        const time = new VirtualTime();
        const scheduler = new Scheduler(time, () => 5);
        const restore = installPauses({ sleep: (ms) => scheduler.sleep(ms), bytes: (size) => new Uint8Array(size) });
        const client = fuzzClient(engine(), (ms) => scheduler.sleep(ms));
        const arrived: string[] = [];
        scheduler.gate(client, (released) => arrived.push(released.task.label));
        const branch = async (name: string, before: () => Promise<void>) => {
            await before();
            await client.send(new ListTablesCommand({ Limit: name.length }));
            return name;
        };
        try {
            // Act
            const task = scheduler.spawn("three branches", () =>
                Promise.all([
                    branch("a", async () => undefined),
                    branch("bb", async () => {
                        await hops(2_000);
                        await new Promise((resolve) => setImmediate(resolve));
                        await hops(2_000);
                    }),
                    branch("ccc", () => pause(250)),
                ]),
            );
            await scheduler.quiescent();
            const atFirstStop = scheduler.pending.map((r) => r.input.Limit);
            const asleep = time.sleeping;
            for (const _ of atFirstStop) {
                scheduler.release(0, undefined);
            }
            await scheduler.quiescent();
            const afterTwo = { pending: scheduler.pending.length, now: time.now() };
            assert.equal(scheduler.fireTimer(false), false, "a timer fired before its time");
            assert.equal(scheduler.fireTimer(true), true);
            const wokeAt = time.now();
            await scheduler.quiescent();
            const afterWake = scheduler.pending.map((r) => r.input.Limit);
            while (scheduler.pending.length > 0) {
                scheduler.release(0, undefined);
                await scheduler.quiescent();
            }
            const names = await task;

            // Assess: both branches that need no timer wait at the gate at the first stop, the third sleeps until the
            // schedule moves the clock to its timer (the two releases took 5 ms each).
            assert.deepEqual(atFirstStop, [1, 2]);
            assert.equal(asleep, 1);
            assert.deepEqual(afterTwo, { pending: 0, now: VIRTUAL_EPOCH_MS + 10 });
            assert.deepEqual(afterWake, [3]);
            assert.equal(wokeAt, VIRTUAL_EPOCH_MS + 250);
            assert.deepEqual(names, ["a", "bb", "ccc"]);
            assert.deepEqual(arrived, ["three branches", "three branches", "three branches"]);
        } finally {
            restore();
            client.destroy();
        }
    });

    it("shrinks a failure to a history that fails the same way, request for request, on every replay", async () => {
        // Prepare: a mutant that lets a redelivered record count again, on a small history.
        const mutant = MUTANTS.consumerBlindToMarks!.mutate;
        const history = generateHistory(1, { ops: 60 });
        const failing = await runHistory(engine(), history, { mutant });
        assert.ok(failing.violations.length > 0, "the mutant broke nothing");

        // Act
        const shrunk = await shrinkHistory(engine(), history, failing, { maxRuns: 12, run: { mutant } });
        const replays = [await runHistory(engine(), shrunk.history, { mutant }), await runHistory(engine(), shrunk.history, { mutant })];

        // Assess
        assert.ok(shrunk.history.events.length < history.events.length, "nothing was shrunk");
        assert.ok(shrunk.result.violations.some((v) => signature(v) === signature(failing.violations[0]!)));
        for (const replay of replays) {
            assert.equal(replay.trace, shrunk.result.trace);
            assert.equal(replay.stats.requests, shrunk.result.stats.requests);
            assert.deepEqual(replay.violations, shrunk.result.violations);
        }
    });
});

describe("npm run fuzz: its flags", () => {
    const root = path.resolve(__dirname, "..");
    const fuzz = (args: string[]) =>
        spawnSync(path.join(root, "node_modules", ".bin", "tsx"), ["scripts/fuzz.ts", ...args], {
            cwd: root,
            encoding: "utf8",
            env: { ...process.env, NODE_NO_WARNINGS: "1" },
        });

    it("--help prints every option and exits 0, starting no engine", () => {
        const result = fuzz(["--help"]);
        assert.equal(result.status, 0, result.stderr);
        for (const flag of [
            "--seeds",
            "--first",
            "--ops",
            "--mode",
            "--fault-rate",
            "--selection",
            "--shards",
            "--horizon",
            "--regions",
            "--mutant",
            "--mutants",
            "--replay",
            "--no-shrink",
            "--trace",
            "--json",
        ]) {
            assert.ok(result.stdout.includes(flag), `the help names ${flag}`);
        }
    });

    it("refuses a bad flag or value with one line naming it and exit code 2", () => {
        for (const [args, named] of [
            [["--seeds", "0"], "--seeds"],
            [["--mode", "fast"], "--mode"],
            [["--fault-rate", "2"], "--fault-rate"],
            [["--shards", "17"], "--shards"],
            [["--horizon", "forever"], "--horizon"],
            [["--regions", "4"], "--regions"],
            [["--mutant", "nothing"], "--mutant"],
            [["--mutant", "auditBlind", "--mutants"], "--mutant"],
            [["--color"], "color"],
        ] as const) {
            const result = fuzz([...args]);
            assert.equal(result.status, 2, `${args.join(" ")}: ${result.stderr}`);
            assert.match(result.stderr.split("\n")[0]!, new RegExp(`^error: .*${named}`), args.join(" "));
            assert.doesNotMatch(result.stderr, /\n\s+at /, "no stack trace");
        }
    });

    it("parses the options it documents", () => {
        assert.deepEqual(
            parseFuzzArgs([
                "--seeds",
                "3",
                "--first",
                "9",
                "--ops",
                "40",
                "--mode",
                "strict",
                "--horizon",
                "long",
                "--no-shrink",
                "--json",
            ]),
            {
                seeds: 3,
                first: 9,
                ops: 40,
                mode: "strict",
                selection: undefined,
                horizon: "long",
                mutants: false,
                shrink: false,
                trace: false,
                json: true,
            },
        );
        assert.throws(() => parseFuzzArgs(["--ops", "x"]), FuzzUsageError);
    });

    it("replays a saved history with the trace digest of its first run", function () {
        // Prepare: a short history saved as a reproduction file is.
        const history = generateHistory(2, { ops: 20 });
        const file = path.join(mkdtempSync(path.join(tmpdir(), "fuzz-")), "seed-2.json");
        writeFileSync(file, JSON.stringify(history));

        // Act
        const runs = [fuzz(["--replay", file, "--json"]), fuzz(["--replay", file, "--json"])];

        // Assess
        for (const run of runs) {
            assert.equal(run.status, 0, run.stderr);
        }
        const [a, b] = runs.map((run) => JSON.parse(run.stdout) as { seeds: number; failed: number; histories: Array<{ trace: string }> });
        assert.deepEqual([a!.seeds, a!.failed], [1, 0]);
        assert.equal(a!.histories[0]!.trace, b!.histories[0]!.trace);
    });
});
