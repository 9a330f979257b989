/**
 * The busy-key heal scenario (`npm run bench -- --scenario busy-heal`): its pure rules (bench/busy-heal-plan.ts), the
 * drift its call faults leave on the real client against DynamoDB Local, its flags, and one small run of the command
 * with what must hold whatever the heal does. Nothing here asserts a speed, nor what a heal achieved in the time given.
 */
import { spawnSync } from "node:child_process";
import { strict as assert } from "node:assert";
import * as path from "node:path";
import { BenchUsageError, parseOptions } from "../bench/run";
import {
    BUSY_KEYS,
    WORKERS_PER_KEY,
    busyBoundHolds,
    busyHealRow,
    faultAfter,
    faultBefore,
    formatBusyHeal,
    parseSeconds,
    scheduledFault,
    settlerPart,
    type BusyMeasured,
    type CallProgress,
    type RequestShape,
} from "../bench/busy-heal-plan";
import { busyClient, readKey } from "../bench/busy-heal";
import { componentArgs } from "../bench/hot-key-ceiling";
import { deployLocally } from "../local/deployment/deployment";
import type { CounterMode } from "../runtime/client/client";
import { useEngine } from "./support/engine";
import { startLocalSqs, type LocalSqs } from "../local/aws/sqs";
import { startBenchSystem } from "../bench/system";

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

describe("busy-heal: the bound, the settler's parts and the rows", () => {
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

    it("tells the heals' own requests from the heal index's query and the audit's, and each heal request by what it touches", () => {
        // Prepare: the requests a settler run sends (runtime/heal/settle.ts, runtime/heal/heal.ts), by their shape.
        const config = { partitionKey: "pk", sortKey: "sk", counterPrefix: "#counter#" };
        const eventual = { ":pk": { S: "busy-0" }, ":sk": { S: "#counter#eventual" } };
        // Act + Assess
        assert.equal(settlerPart({ command: "QueryCommand", input: { IndexName: "heal-index" } }, config), "index");
        assert.equal(settlerPart({ command: "ScanCommand", input: {} }, config), "audit");
        assert.equal(
            settlerPart({ command: "QueryCommand", input: { KeyConditionExpression: "#pk = :pk AND begins_with(#sk, :prefix)" } }, config),
            "audit",
            "the audit's read of a key's counters",
        );
        assert.equal(
            settlerPart({ command: "UpdateItemCommand", input: { Key: { pk: { S: "#counter#settler" } } } }, config),
            "audit",
            "the cursor",
        );
        assert.equal(
            settlerPart({ command: "QueryCommand", input: { ExpressionAttributeValues: { ":pk": { S: "#counter#settler" } } } }, config),
            "audit",
        );
        assert.equal(
            settlerPart(
                {
                    command: "QueryCommand",
                    input: { KeyConditionExpression: "#pk = :pk AND #sk = :sk", ExpressionAttributeValues: eventual },
                },
                config,
            ),
            "heal listing",
        );
        assert.equal(
            settlerPart({ command: "UpdateItemCommand", input: { Key: { pk: { S: "busy-0" }, sk: { S: "#counter#eventual" } } } }, config),
            "heal listing",
            "the mark's removal",
        );
        assert.equal(
            settlerPart(
                {
                    command: "QueryCommand",
                    input: {
                        KeyConditionExpression: "#pk = :pk AND #sk = :sk",
                        ExpressionAttributeValues: { ":pk": { S: "busy-0\u00002" }, ":sk": { S: "#counter#best-effort" } },
                    },
                },
                config,
            ),
            "heal shards",
            "R",
        );
        assert.equal(
            settlerPart(
                {
                    command: "QueryCommand",
                    input: { KeyConditionExpression: "#pk = :pk", ExpressionAttributeValues: { ":pk": { S: "busy-0" } } },
                },
                config,
            ),
            "heal items",
            "the key's items",
        );
        assert.equal(
            settlerPart(
                { command: "UpdateItemCommand", input: { Key: { pk: { S: "busy-0\u00001" }, sk: { S: "#counter#best-effort" } } } },
                config,
            ),
            "heal shards",
            "W",
        );
        assert.equal(
            settlerPart({ command: "DeleteItemCommand", input: { Key: { pk: { S: "busy-0" }, sk: { S: "i7" } } } }, config),
            "heal tombstones",
        );
    });

    it("a row gives units per key healed, names its figures after its mode and leaves the other mode's null", () => {
        // Prepare
        const measured: BusyMeasured = {
            seconds: 20,
            samples: [3, 4],
            end: { off: 2, over: 1 },
            settler: { runs: 4, runsWithCallsInFlight: 3, healed: 8, drift: 5 },
            units: {
                heal: { read: 30, write: 20 },
                parts: {
                    "heal shards": { read: 8, write: 9 },
                    "heal items": { read: 22, write: 0 },
                    "heal listing": { read: 0, write: 8 },
                    "heal tombstones": { read: 0, write: 3 },
                },
                run: { read: 40, write: 22 },
            },
            driftMade: 9,
            otherDeletes: 6,
            boundViolations: 0,
            apiErrors: 0,
            exact: true,
        };
        // Act
        const strict = busyHealRow("strict", 4, measured);
        const utilization = busyHealRow("utilization", 1, { ...measured, settler: { ...measured.settler, healed: 0 } });
        // Assess
        assert.deepEqual(strict, {
            mode: "strict",
            shards: 4,
            seconds: 20,
            settlerRuns: 4,
            runsWithCallsInFlight: 3,
            keysHealed: 8,
            healedDrift: 5,
            rcuPerKeyHealed: 3.75,
            wcuPerKeyHealed: 2.5,
            perKeyHealed: {
                "heal shards": [1, 1.13],
                "heal items": [2.75, 0],
                "heal listing": [0, 1],
                "heal tombstones": [0, 0.38],
            },
            runRcuPerKeyHealed: 5,
            runWcuPerKeyHealed: 2.75,
            driftMade: 9,
            otherDeletes: 6,
            heldSlotsSamples: [3, 4],
            undercountSamples: null,
            heldSlotsEnd: 2,
            undercountEnd: null,
            overcountEnd: null,
            boundViolations: 0,
            apiErrors: 0,
            exact: true,
        });
        assert.deepEqual([utilization.undercountSamples, utilization.undercountEnd, utilization.overcountEnd], [[3, 4], 2, 1]);
        assert.deepEqual([utilization.heldSlotsSamples, utilization.heldSlotsEnd], [null, null]);
        assert.equal(utilization.rcuPerKeyHealed, 0, "no key healed: no units per key");
        const lines = formatBusyHeal([strict, utilization]);
        assert.equal(lines.length, 2 + 2 * 3, "a title, a header, a line per row, one of samples and one of parts per row");
        assert.ok(lines[4]!.includes("held slots every 10 s: 3 4"), lines[4]);
        assert.ok(lines[5]!.endsWith("per key healed by part: shards 1/1.13, items 2.75/0, listing 0/1, tombstones 0/0.38"), lines[5]);
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
                const { faults, counter } = busyClient(deployment, engine().dynamodb(), (drift) => (counted += drift));
                const key = BUSY_KEYS[0]!;
                const create = (id: string) =>
                    mode === "strict"
                        ? counter.tryCreate(key, id, 100).then((r) => r.created)
                        : counter.create(key, id).then((r) => r.created);
                for (const id of ["a", "b", "c", "d"]) {
                    assert.equal(await create(id), true);
                }
                const drift = async () => {
                    const s = await readKey(admin, deployment.clientLayout, key);
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

describe("busy-heal: rows in one process (DynamoDB Local)", function () {
    const engine = useEngine();
    let sqs: LocalSqs | undefined;
    before(async () => {
        sqs = await startLocalSqs();
    });
    after(async () => {
        await sqs?.stop();
    });

    it("loads each row's functions with its own deployment's settings, none left by the row before", async () => {
        // Prepare: a row at 4 shards loads its bundles with a shard count in their environment.
        const servers = { engine: engine(), sqs: sqs! };
        const sharded = await startBenchSystem(servers, "rows-4", { args: componentArgs("strict", 4) });
        const shardsSetting = process.env.HYBRID_COUNTER_COUNTER_SHARDS;
        sharded.close();
        // Act: the next row, at 1 shard, whose environments leave the shard count out.
        const single = await startBenchSystem(servers, "rows-1", { args: componentArgs("strict", 1) });
        single.close();
        // Assess
        assert.equal(shardsSetting, "4");
        assert.equal(single.deployment.system.settler?.function.environment.HYBRID_COUNTER_COUNTER_SHARDS, undefined);
        assert.equal(
            process.env.HYBRID_COUNTER_COUNTER_SHARDS,
            undefined,
            "the 1-shard row's functions read no shard count of the row before",
        );
    });
});

describe("busy-heal: its flags", () => {
    it("--seconds takes an integer from 10 to 3600, 60 by default, and sizes the healing rows alone; --modes picks the rows", () => {
        // Act
        const given = parseOptions(["--scenario", "busy-heal", "--seconds", "30", "--shards", "4", "--modes", "strict"]);
        const defaults = parseOptions(["--scenario", "busy-heal"]);
        // Assess
        assert.equal(parseSeconds(undefined), 60);
        assert.equal(parseSeconds("20"), 20);
        assert.ok(given !== "help" && defaults !== "help");
        assert.deepEqual(given.busy, { modes: ["strict"], seconds: 30, shards: [4], seed: 1 });
        assert.deepEqual(defaults.busy, { modes: ["utilization", "strict"], seconds: 60, shards: [1, 4], seed: 1 });
        assert.deepEqual(defaults.scenarios, { approaches: false, hotTenant: false, backfill: false, healing: true });
        for (const [args, flag] of [
            [["--scenario", "busy-heal", "--seconds", "9"], "--seconds"],
            [["--scenario", "busy-heal", "--seconds", "1.5"], "--seconds"],
            [["--scenario", "busy-heal", "--seconds", "x"], "--seconds"],
            [["--scenario", "busy-heal", "--shards", "17"], "--shards"],
            [["--scenario", "busy-heal", "--ops", "100"], "--ops"],
            [["--scenario", "busy-heal", "--windows", "3"], "Unknown option '--windows'"],
            [["--scenario", "hot-tenant", "--seconds", "30"], "--seconds"],
        ] as const) {
            assert.throws(
                () => parseOptions([...args]),
                (error: unknown) => error instanceof BenchUsageError && error.message.startsWith(flag),
                args.join(" "),
            );
        }
    });

    it("a bad value exits 2 with one line naming the flag, before any engine starts", () => {
        // Act
        const result = bench(["--scenario", "busy-heal", "--seconds", "0"]);
        // Assess
        assert.equal(result.status, 2, result.stderr);
        assert.equal(result.stdout, "");
        const lines = result.stderr.trim().split("\n");
        assert.equal(lines.length, 1, result.stderr);
        assert.match(lines[0]!, /^error: --seconds must be an integer from 10 to 3600 \(got "0"\)/);
    });
});

describe("busy-heal: a small run of the command (DynamoDB Local)", function () {
    it("prints one row per mode in the documented shape, with what must hold whatever the heal does", () => {
        // Act
        const result = bench(["--scenario", "busy-heal", "--seconds", "10", "--shards", "1", "--json"]);
        // Assess
        assert.equal(result.status, 0, result.stderr);
        const report = JSON.parse(result.stdout) as { healing: Array<Record<string, unknown>> };
        assert.deepEqual(
            report.healing.map((r) => `${String(r.mode)}/${String(r.shards)}`),
            ["utilization/1", "strict/1"],
        );
        for (const row of report.healing) {
            const strict = row.mode === "strict";
            const at = JSON.stringify(row);
            assert.equal(row.seconds, 10);
            const samples = (strict ? row.heldSlotsSamples : row.undercountSamples) as number[];
            assert.equal(samples.length, 1, "one sample every 10 s");
            assert.ok(Number.isInteger(samples[0]) && samples[0]! >= 0, at);
            assert.deepEqual(
                [strict ? row.undercountSamples : row.heldSlotsSamples, strict ? row.undercountEnd : row.heldSlotsEnd],
                [null, null],
                at,
            );
            assert.ok(Number.isInteger(strict ? row.heldSlotsEnd : row.undercountEnd), at);
            // The schedule runs the settler once as the traffic starts; every caller's second create dies, one unit each.
            assert.ok((row.settlerRuns as number) >= 1, at);
            assert.ok((row.driftMade as number) >= BUSY_KEYS.length * WORKERS_PER_KEY, at);
            if ((row.keysHealed as number) > 0) {
                assert.ok((row.rcuPerKeyHealed as number) > 0 && (row.runRcuPerKeyHealed as number) >= (row.rcuPerKeyHealed as number), at);
                assert.ok((row.runWcuPerKeyHealed as number) >= (row.wcuPerKeyHealed as number), at);
            }
            assert.equal(row.boundViolations, 0, at);
            // No error but the contract's on a loaded machine, as the twin's test allows them. stderr names every error a
            // row counted.
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
            assert.equal(row.exact, true, at);
        }
    });
});
