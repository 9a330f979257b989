/**
 * The busy-key heal scenario (`npm run bench -- --scenario busy-heal`): its pure rules (bench/busy-heal-plan.ts),
 * the drift its call faults leave on the real client against DynamoDB Local, its flags, and one small run of the
 * command with what must hold whatever the heal does. Nothing here asserts a speed or that a heal landed on a busy key.
 */
import { spawnSync } from "node:child_process";
import { strict as assert } from "node:assert";
import * as path from "node:path";
import { BenchUsageError, parseOptions } from "../bench/run";
import {
    BUSY_KEYS,
    CLIENT_DEADLINE_MS,
    COMPRESSION,
    REQUEST_LIFETIME_BUDGET_MS,
    SKEW_MS,
    assertCompressionCovers,
    busyBoundHolds,
    busyHealRow,
    busyThroughout,
    faultAfter,
    faultBefore,
    longestGap,
    longestIdle,
    parseWindows,
    scheduledFault,
    type CallProgress,
    type RequestShape,
} from "../bench/busy-heal-plan";
import { busyClient, readKey } from "../bench/busy-heal";
import { componentArgs } from "../bench/hot-key-ceiling";
import { deployLocally } from "../local/deployment/deployment";
import { twinSettlerSpec } from "../local/twin/settler";
import { HybridCounterClient, type CounterMode } from "../runtime/client/client";
import { useEngine } from "./support/engine";
import { scaled } from "./support/doc-runner";

const root = path.resolve(__dirname, "..");
/** The errors the client's contract lets a call surface when a loaded machine stretches it past its deadline. */
const LOADED_MACHINE_ERRORS = [
    "DeadlineExceededError",
    "TransactionConflictException",
    "TransactionCanceledException",
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "InternalServerError",
    "RequestLimitExceeded",
];
const tsx = path.join(root, "node_modules", ".bin", "tsx");

function bench(args: string[]) {
    return spawnSync(tsx, ["bench/run.ts", ...args], { cwd: root, encoding: "utf8", env: { ...process.env, NODE_NO_WARNINGS: "1" } });
}

const call = (mode: CounterMode, operation: "create" | "delete", fault: CallProgress["fault"], progress: Partial<CallProgress> = {}) =>
    ({ mode, operation, fault, itemWrites: 0, bestEffortSinceItem: 0, dead: false, ...progress }) satisfies CallProgress;
const items: RequestShape = { target: "items", write: true, lowers: false };
const release: RequestShape = { target: "best-effort", write: true, lowers: true };
const mark: RequestShape = { target: "best-effort", write: true, lowers: false };
const read: RequestShape = { target: "items", write: false, lowers: false };

describe("busy-heal: where a call dies or loses its release", () => {
    it("a strict create dies at its put, after its reservation: one held slot", () => {
        assert.deepEqual(faultBefore(call("strict", "create", "die"), items), { action: "die", drift: 1 });
        assert.deepEqual(faultBefore(call("strict", "create", "die"), read), { action: "send", drift: 0 });
        assert.deepEqual(faultBefore(call("strict", "create", undefined), items), { action: "send", drift: 0 });
    });

    it("a utilization create dies once its put succeeded: one item best-effort misses", () => {
        assert.deepEqual(faultBefore(call("utilization", "create", "die"), items), { action: "send", drift: 0 });
        assert.deepEqual(faultAfter(call("utilization", "create", "die"), items), { dies: true, drift: 1 });
        assert.deepEqual(faultAfter(call("utilization", "create", undefined), items), { dies: false, drift: 0 });
        assert.deepEqual(faultAfter(call("strict", "create", "die"), items), { dies: false, drift: 0 });
    });

    it("a utilization delete dies at its soft delete: one unit low when its decrement landed", () => {
        assert.deepEqual(faultBefore(call("utilization", "delete", "die"), items), { action: "send", drift: 0 }, "the claim goes out");
        assert.deepEqual(faultBefore(call("utilization", "delete", "die", { itemWrites: 1, bestEffortSinceItem: 1 }), items), {
            action: "die",
            drift: 1,
        });
        assert.deepEqual(faultBefore(call("utilization", "delete", "die", { itemWrites: 1 }), items), { action: "die", drift: 0 });
    });

    it("a strict delete loses the release after its soft delete, and no other write", () => {
        assert.deepEqual(faultBefore(call("strict", "delete", "fail-release"), release), { action: "send", drift: 0 });
        assert.deepEqual(faultBefore(call("strict", "delete", "fail-release", { itemWrites: 1 }), mark), { action: "send", drift: 0 });
        assert.deepEqual(faultBefore(call("strict", "delete", "fail-release", { itemWrites: 1 }), release), { action: "fail", drift: 1 });
    });

    it("every run has its faults: a caller's second create dies, its first delete dies or loses its release, then 1 in 100 (50)", () => {
        assert.deepEqual(
            [0, 1, 2, 100, 101].map((i) => scheduledFault("strict", "create", i)),
            [undefined, "die", undefined, undefined, "die"],
        );
        assert.deepEqual(
            [0, 1, 50, 100].map((i) => scheduledFault("strict", "delete", i)),
            ["fail-release", undefined, "fail-release", "fail-release"],
        );
        assert.deepEqual(
            [0, 1, 50, 100].map((i) => scheduledFault("utilization", "delete", i)),
            ["die", undefined, undefined, "die"],
        );
    });

    it("a dead call sends nothing more, and counts no drift twice", () => {
        assert.deepEqual(faultBefore(call("utilization", "create", "die", { dead: true }), release), { action: "die", drift: 0 });
        assert.deepEqual(faultAfter(call("utilization", "create", "die", { dead: true }), items), { dies: false, drift: 0 });
    });
});

describe("busy-heal: the bound, the busy test and the compressed times", () => {
    it("strict: live client items above best-effort by more than the creates that raced the reads, or above the limit, fail", () => {
        const o = { bestEffort: 5, clientLive: 6, creates: 1, deletes: 0, otherDeletes: 0 };
        assert.equal(busyBoundHolds("strict", o, 10), true);
        assert.equal(busyBoundHolds("strict", { ...o, creates: 0 }, 10), false);
        assert.equal(busyBoundHolds("strict", o, 5), false);
    });

    it("utilization: best-effort above live client items by more than racing deletes and other writers' deletes fails", () => {
        const o = { bestEffort: 7, clientLive: 5, creates: 0, deletes: 1, otherDeletes: 1 };
        assert.equal(busyBoundHolds("utilization", o, 0), true);
        assert.equal(busyBoundHolds("utilization", { ...o, otherDeletes: 0 }, 0), false);
        assert.equal(busyBoundHolds("utilization", { ...o, deletes: 0 }, 0), false);
    });

    it("a key is busy from..to when it was written within the window at every instant", () => {
        assert.equal(busyThroughout([90, 120, 150, 190], 100, 200, 50), true);
        assert.equal(busyThroughout([40, 120, 150, 190], 100, 200, 50), false, "quiet at `from`");
        assert.equal(busyThroughout([90, 120, 180], 100, 200, 50), false, "a gap of a window inside");
        assert.equal(busyThroughout([90, 120, 140], 100, 200, 50), false, "quiet at `to`");
        assert.equal(busyThroughout([], 100, 200, 50), false);
        assert.equal(longestGap([10, 20, 50, 55], 15), 30);
    });

    it("a key's longest time with no call in flight counts from `from` to `to`, over overlapping writes", () => {
        // Two callers: their writes overlap, and the key is idle only from 40 to 45 and from 90 on.
        const flights: Array<[number, number]> = [
            [0, 30],
            [10, 40],
            [45, 60],
            [50, 90],
        ];
        assert.equal(longestIdle(flights, 0, 100), 10, "idle from 90 to `to`");
        assert.equal(longestIdle(flights, 0, 92), 5, "idle from 40 to 45");
        assert.equal(longestIdle(flights, -20, 92), 20, "idle before the first write");
        assert.equal(longestIdle([[0, Number.POSITIVE_INFINITY]], 0, 1_000), 0, "a call never ended keeps the key busy");
        assert.equal(longestIdle([], 0, 70), 70);
        assert.equal(longestIdle([[200, 210]], 0, 100), 100, "a write sent after `to` does not count");
    });

    it("the compressed window covers the scenario's deadline, request lifetime and skew (the heal's A4), and a short one is refused", () => {
        // Act + Assess: the component's 600 s window, compressed as the scenario (and the twin) compress it.
        assert.doesNotThrow(() => assertCompressionCovers(600_000 / COMPRESSION, CLIENT_DEADLINE_MS));
        assert.throws(
            () => assertCompressionCovers(CLIENT_DEADLINE_MS + REQUEST_LIFETIME_BUDGET_MS + SKEW_MS, CLIENT_DEADLINE_MS),
            /does not cover the deadline/,
        );
    });

    it("a row names its series after its mode and leaves the other mode's null", () => {
        const measured = { byWindow: [1, 2], driftMade: 3, healsOnBusyKeys: 0, end: 2, boundViolations: 0, apiErrors: 0, exact: true };
        assert.deepEqual(busyHealRow("strict", 4, measured), {
            mode: "strict",
            shards: 4,
            windows: 2,
            heldSlotsByWindow: [1, 2],
            driftByWindow: null,
            driftMade: 3,
            healsOnBusyKeys: 0,
            heldSlotsEnd: 2,
            driftEnd: null,
            boundViolations: 0,
            apiErrors: 0,
            exact: true,
        });
        assert.equal(busyHealRow("utilization", 1, measured).driftEnd, 2);
        assert.equal(busyHealRow("utilization", 1, measured).heldSlotsByWindow, null);
    });
});

describe("busy-heal: the drift a fault counts is the drift it leaves (DynamoDB Local)", function () {
    const engine = useEngine();

    for (const mode of ["utilization", "strict"] as const) {
        for (const shards of [1, 4]) {
            it(`${mode}, ${shards} shard(s): each faulty call moves |best-effort - live client items| by what it counted`, async () => {
                // Prepare: the component's system, a key holding items written by calls that met no fault.
                const admin = engine().dynamodb();
                const deployment = await deployLocally(admin, `busy-faults-${mode}-${shards}`, componentArgs(mode, shards));
                let counted = 0;
                // The longest deadline the client takes: what the rules do does not depend on it, nor on this machine's speed.
                const { faults, counter } = busyClient(deployment, engine().dynamodb(), mode, (drift) => (counted += drift), 60_000);
                assert.ok(
                    twinSettlerSpec(deployment.resources, `busy-faults-${mode}-${shards}`, COMPRESSION),
                    "the component deploys a settler",
                );
                const key = BUSY_KEYS[0]!;
                const reader = new HybridCounterClient({ ...deployment.clientConfig, dynamodb: admin, mode });
                const create = (id: string) =>
                    mode === "strict"
                        ? counter.tryCreate(key, id, 100).then((r) => r.created)
                        : counter.create(key, id).then((r) => r.created);
                for (const id of ["a", "b", "c", "d"]) {
                    assert.equal(await create(id), true);
                }
                const drift = async () => {
                    const s = await readKey(reader, admin, deployment.clientLayout, key);
                    return Math.abs(s.bestEffort - s.clientLive);
                };
                assert.equal(await drift(), 0);
                // Act: a create that dies, then a delete that dies (utilization) or loses its release (strict).
                const died = await faults.run({ mode, operation: "create", fault: "die" }, () => create("e"));
                const afterCreate = await drift();
                const deleteFault = mode === "strict" ? "fail-release" : "die";
                const deleted = await faults.run({ mode, operation: "delete", fault: deleteFault }, () => counter.delete(key, "a"));
                const afterDelete = await drift();
                // Assess: each fault counted one unit, and left one; a call that died is reported dead, one that lost its
                // release returned as the client's contract says (the item deleted, the failure absorbed).
                assert.equal(died.dead, true);
                assert.equal(afterCreate, 1);
                assert.equal(deleted.dead, mode === "utilization");
                if (mode === "strict") {
                    assert.deepEqual(deleted.result, { deleted: true });
                }
                assert.equal(counted, 2);
                // In utilization both faults leave best-effort low; in strict both hold a slot: they add up.
                assert.equal(afterDelete, 2);
            });
        }
    }
});

describe("busy-heal: its flags", () => {
    it("--windows takes an integer from 1 to 1000, 10 by default, and applies to busy-heal alone", () => {
        assert.equal(parseWindows(undefined), 10);
        assert.equal(parseWindows("20"), 20);
        const options = parseOptions(["--scenario", "busy-heal", "--windows", "3", "--shards", "4"]);
        assert.ok(options !== "help");
        assert.deepEqual(options.busy, { windows: 3, shards: [4], seed: 1 });
        const defaults = parseOptions(["--scenario", "busy-heal"]);
        assert.deepEqual(defaults !== "help" && defaults.busy, { windows: 10, shards: [1, 4], seed: 1 });
        for (const [args, flag] of [
            [["--scenario", "busy-heal", "--windows", "0"], "--windows"],
            [["--scenario", "busy-heal", "--windows", "1.5"], "--windows"],
            [["--scenario", "busy-heal", "--windows", "x"], "--windows"],
            [["--scenario", "busy-heal", "--shards", "17"], "--shards"],
            [["--scenario", "busy-heal", "--ops", "100"], "--ops"],
            [["--windows", "3"], "--windows"],
        ] as const) {
            assert.throws(
                () => parseOptions([...args]),
                (error: unknown) => error instanceof BenchUsageError && error.message.startsWith(flag),
                args.join(" "),
            );
        }
    });

    it("a page's command runs in the suite at one window and one shard count, at the page's own size under docs:full", () => {
        const args = ["--scenario", "busy-heal", "--json"];
        assert.deepEqual(scaled("busy", args, { full: false, work: "/w" }), [...args, "--windows", "1", "--shards", "1"]);
        assert.deepEqual(scaled("busy", [...args, "--windows", "20", "--shards", "4"], { full: false, work: "/w" }), [
            ...args,
            "--windows",
            "1",
            "--shards",
            "4",
        ]);
        assert.deepEqual(scaled("busy", args, { full: true, work: "/w" }), args);
    });

    it("a bad value exits 2 with one line naming the flag, before any engine starts", () => {
        const result = bench(["--scenario", "busy-heal", "--windows", "0"]);
        assert.equal(result.status, 2, result.stderr);
        assert.equal(result.stdout, "");
        const lines = result.stderr.trim().split("\n");
        assert.equal(lines.length, 1, result.stderr);
        assert.match(lines[0]!, /^error: --windows must be an integer from 1 to 1000 \(got "0"\)/);
    });
});

describe("busy-heal: a small run of the command (DynamoDB Local)", function () {
    it("prints one row per mode and shard count in the documented shape, with what must hold whatever the heal does", () => {
        // Act
        const result = bench(["--scenario", "busy-heal", "--windows", "1", "--json"]);
        // Assess
        assert.equal(result.status, 0, result.stderr);
        const report = JSON.parse(result.stdout) as { rows: Array<Record<string, unknown>> };
        assert.deepEqual(Object.keys(report), ["rows"]);
        assert.deepEqual(
            report.rows.map((r) => `${String(r.mode)}/${String(r.shards)}`),
            ["utilization/1", "utilization/4", "strict/1", "strict/4"],
        );
        for (const row of report.rows) {
            const strict = row.mode === "strict";
            assert.deepEqual(Object.keys(row), [
                "mode",
                "shards",
                "windows",
                "heldSlotsByWindow",
                "driftByWindow",
                "driftMade",
                "healsOnBusyKeys",
                "heldSlotsEnd",
                "driftEnd",
                "boundViolations",
                "apiErrors",
                "exact",
            ]);
            const series = (strict ? row.heldSlotsByWindow : row.driftByWindow) as number[];
            assert.equal(row.windows, 1);
            assert.equal(series.length, 1);
            assert.ok(
                series.every((n) => Number.isInteger(n) && n >= 0),
                JSON.stringify(row),
            );
            assert.equal(strict ? row.driftByWindow : row.heldSlotsByWindow, null);
            assert.equal(strict ? row.driftEnd : row.heldSlotsEnd, null);
            assert.ok(Number.isInteger(strict ? row.heldSlotsEnd : row.driftEnd), JSON.stringify(row));
            assert.ok((row.driftMade as number) > 0, `the faults made drift: ${JSON.stringify(row)}`);
            assert.ok(Number.isInteger(row.healsOnBusyKeys) && (row.healsOnBusyKeys as number) >= 0, JSON.stringify(row));
            assert.equal(row.boundViolations, 0, JSON.stringify(row));
            // No error but the contract's on a loaded machine, as the twin's test allows them: the client's own deadline
            // passed (a call stretched past it), or DynamoDB's error for a request every attempt of which met contention
            // (the parity layer's transaction window) within that deadline. stderr names every error a row counted.
            const named = new RegExp(
                `busy-heal ${String(row.mode)} ${String(row.shards)} shard\\(s\\): API errors by name: (\\{.*\\})`,
            ).exec(result.stderr);
            const byName = (named === null ? {} : JSON.parse(named[1]!)) as Record<string, number>;
            assert.deepEqual(
                Object.keys(byName).filter((name) => !LOADED_MACHINE_ERRORS.includes(name)),
                [],
                result.stderr,
            );
            assert.equal(
                Object.values(byName).reduce((a, b) => a + b, 0),
                row.apiErrors,
                result.stderr,
            );
            assert.equal(row.exact, true, JSON.stringify(row));
        }
    });
});
