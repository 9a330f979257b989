/**
 * The checker's determinism (test/fuzz/scheduler.ts): a seed alone decides its history. A history run twice releases
 * the same requests in the same order (the same trace digest); a task's parallel branches all reach the gate (or the
 * virtual clock) before the schedule moves; the runtime's sleeps wait on the virtual clock, never on the wall clock;
 * and a shrunk failing history fails the same way on every replay.
 */
import { ListTablesCommand, type DynamoDBClient, type UpdateItemCommandInput } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { HybridCounterClient } from "../runtime/client/client";
import { installPauses, pause } from "../runtime/shared/pauses";
import { createFuzzSystem, fuzzClient } from "./fuzz/adapter";
import { VirtualTime, VIRTUAL_EPOCH_MS } from "./fuzz/clock";
import { generateHistory } from "./fuzz/history";
import { rewrite } from "./fuzz/mutants";
import { runHistory, FUZZ_ENGINE } from "./fuzz/run";
import { Scheduler } from "./fuzz/scheduler";
import { shrinkHistory, signature } from "./fuzz/shrink";
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
        // Prepare: strict, another writer, 3 shards, split consumer invocations, settler runs, backfills, held put
        // attempts, a fault rate of 0.2 and four callers at once: every parallel path the checker drives.
        const history = generateHistory({ seed: 126, ops: 80 });
        assert.equal(history.counterShards, 3);
        assert.ok(history.events.some((e) => e.op === "consume" && e.split === true));
        assert.ok(history.events.some((e) => e.op === "settle"));

        // Act
        const first = await runHistory(engine(), history);
        const second = await runHistory(engine(), history);
        const other = await runHistory(engine(), generateHistory({ seed: 127, ops: 80 }));

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

    it("gates every shard's read of a sharded count before releasing one", async () => {
        // Prepare: a key over 3 shards; its count reads the shards in parallel.
        const reader = engine().dynamodb();
        const system = await createFuzzSystem(reader, "separate", "client", 3);
        const scheduler = new Scheduler(new VirtualTime(), () => 1);
        const dynamodb: DynamoDBClient = fuzzClient(engine(), (ms) => scheduler.sleep(ms));
        scheduler.gate(dynamodb, () => undefined);
        const client = new HybridCounterClient({ ...system.config, dynamodb, mode: "utilization" });
        try {
            // Act
            const counting = scheduler.spawn("count", () => client.count("k0"));
            await scheduler.quiescent();
            const gated = scheduler.pending.map((r) => r.command);
            while (scheduler.pending.length > 0) {
                scheduler.release(scheduler.pending.length - 1, undefined);
                await scheduler.quiescent();
            }
            const value = await counting;

            // Assess
            assert.deepEqual(gated, ["QueryCommand", "QueryCommand", "QueryCommand"]);
            assert.equal(value.value, 0);
        } finally {
            dynamodb.destroy();
            reader.destroy();
        }
    });

    it("shrinks a failure to a history that fails the same way, request for request, on every replay", async () => {
        // Prepare: a mutant that doubles every best-effort increment, on a small utilization history.
        const history = generateHistory({ seed: 5, ops: 30, mode: "utilization", faultRate: 0.1, counterShards: 1 });
        const mutate = ({ api }: { api: DynamoDBClient }) =>
            rewrite<UpdateItemCommandInput>(api, "UpdateItemCommand", (input) => {
                const delta = input.ExpressionAttributeValues?.[":delta"];
                if (delta?.N === "1") {
                    delta.N = "2";
                }
            });
        const failing = await runHistory(engine(), history, { mutate });
        assert.ok(failing.violations.length > 0, "the mutant broke nothing");

        // Act
        const shrunk = await shrinkHistory(engine(), history, failing, { maxRuns: 12, run: { mutate } });
        const replays = [await runHistory(engine(), shrunk.history, { mutate }), await runHistory(engine(), shrunk.history, { mutate })];

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
