import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { runWorkload } from "../local/harness/workload";
import { UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { CallsInFlight, NO_CALLS } from "../local/harness/calls";
import type { HybridCounterClient } from "../runtime/client/client";
import { bestEffortSortKey } from "../runtime/shared/config";
import {
    assertExact,
    counterFixture,
    observeWhile,
    strictInvariant,
    utilizationInvariant,
    type CounterFixture,
} from "./support/counter-fixture";

describe("counting on DynamoDB Local: creates and deletes, concurrent, several keys", () => {
    const engine = useEngine();

    it("utilization: eventual equals live items exactly, best-effort never above live", async () => {
        const fixture = await counterFixture(engine());
        const keys = ["tenant-a", "tenant-b", "tenant-c", "tenant-d"];
        const run = runWorkload(fixture.client, { ops: 600, keys, concurrency: 8, deleteRatio: 0.35, seed: 1 });
        // The consumer runs while the API writes, as it does in production.
        const consuming = (async () => {
            await run;
            await fixture.emulator.drain();
        })();
        const { result, observations, violations } = await observeWhile(fixture, keys, run, utilizationInvariant);
        await consuming;

        assert.deepEqual(violations, []);
        assert.ok(observations > 0);
        assert.deepEqual(result.apiErrors, []);
        assert.equal(result.ops, 600);
        const snapshots = await assertExact(fixture);
        const live = [...snapshots.values()].reduce((n, s) => n + s.live, 0);
        assert.equal(live, result.created - result.deleted);
        assert.ok(result.deleted > 0, "the workload deleted items");
        for (const s of snapshots.values()) {
            assert.equal(s.bestEffort, s.live, "with no faults best-effort is exact too");
        }
        fixture.close();
    });

    it("strict: the limit is never exceeded and best-effort never below live", async () => {
        const limit = 12;
        const fixture = await counterFixture(engine(), { mode: "strict" });
        const keys = ["tenant-a", "tenant-b", "tenant-c"];
        const run = runWorkload(fixture.client, { ops: 500, keys, concurrency: 8, deleteRatio: 0.3, limit, seed: 2 });
        const { result, violations } = await observeWhile(fixture, keys, run, strictInvariant(limit));
        await fixture.emulator.drain();

        assert.deepEqual(violations, []);
        assert.deepEqual(result.apiErrors, []);
        assert.ok(result.limitRejected > 0, "the workload reached the limit");
        const snapshots = await assertExact(fixture);
        for (const s of snapshots.values()) {
            assert.ok(s.live <= limit);
            assert.equal(s.bestEffort, s.live, "with no faults no slot is held back");
        }
        fixture.close();
    });
});

describe("an observation that reads the counters table, then the items (the default placement)", () => {
    const engine = useEngine();

    /** Runs `between` once, after the observation's reads of the counters table and before its read of the items. */
    function between(fixture: CounterFixture, between: () => Promise<unknown>): void {
        const name = "betweenReads";
        let ran = false;
        fixture.reader.middlewareStack.add(
            (next, context) => async (args) => {
                const input = args.input as { TableName?: string };
                if (!ran && context.commandName === "QueryCommand" && input.TableName === fixture.tableName) {
                    ran = true;
                    fixture.reader.middlewareStack.remove(name);
                    await between();
                }
                return next(args);
            },
            { step: "initialize", name },
        );
    }

    it("utilization: a delete between the reads shows best-effort above live by one, which the delete in flight allows; a real overcount stays a violation", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate" });
        for (const id of ["a", "b", "c"]) {
            await fixture.client.create("k", id);
        }
        // Act: a whole delete runs between best-effort's read and the items' read.
        between(fixture, () => fixture.client.delete("k", "a"));
        const raced = await fixture.observeDuring("k");
        // Act: best-effort really above live (two units no item stands for), and a delete between the reads again.
        await fixture.reader.send(
            new UpdateItemCommand({
                TableName: fixture.countersTableName,
                Key: { pk: { S: "k" }, sk: { S: bestEffortSortKey(fixture.layout) } },
                UpdateExpression: "ADD #c :two",
                ExpressionAttributeNames: { "#c": fixture.layout.countAttribute },
                ExpressionAttributeValues: { ":two": { N: "2" } },
            }),
        );
        between(fixture, () => fixture.client.delete("k", "b"));
        const overcount = await fixture.observeDuring("k");

        // Assess
        assert.deepEqual([raced.observation.bestEffort, raced.observation.live, raced.during], [3, 2, { creates: 0, deletes: 1 }]);
        assert.equal(utilizationInvariant(raced.observation), "best-effort 3 > live 2", "read as one instant, it would be a violation");
        assert.equal(utilizationInvariant(raced.observation, raced.during), undefined);
        assert.deepEqual([overcount.observation.bestEffort, overcount.observation.live, overcount.during.deletes], [4, 1, 1]);
        assert.equal(utilizationInvariant(overcount.observation, overcount.during), "best-effort 4 > live 1 + 1 deletes in flight");
        fixture.close();
    });

    it("strict: a create between the reads shows live above best-effort by one, which the create in flight allows", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate", mode: "strict" });
        await fixture.client.tryCreate("k", "a", 5);
        // Act
        between(fixture, () => fixture.client.tryCreate("k", "b", 5));
        const raced = await fixture.observeDuring("k");
        const after = await fixture.observeDuring("k");

        // Assess
        assert.deepEqual([raced.observation.bestEffort, raced.observation.live, raced.during], [1, 2, { creates: 1, deletes: 0 }]);
        assert.equal(strictInvariant(5)(raced.observation), "best-effort 1 < live 2");
        assert.equal(strictInvariant(5)(raced.observation, raced.during), undefined);
        assert.deepEqual([after.observation.bestEffort, after.observation.live, after.during], [2, 2, { creates: 0, deletes: 0 }]);
        fixture.close();
    });

    it("counts the calls of the key in flight when the window opens and those started before it closes, no others", async () => {
        // Prepare: a client whose calls end when the test says.
        const open: Array<() => void> = [];
        const pending = () => new Promise<never>((_, reject) => open.push(() => reject(new Error("ended"))));
        const calls = new CallsInFlight();
        const api = calls.wrap({ create: pending, delete: pending, tryCreate: pending } as unknown as HybridCounterClient);
        const settle = (p: Promise<unknown>) => p.catch(() => undefined);
        // Act
        const before = settle(api.delete("k", "ended-before"));
        open.shift()!();
        await before;
        const inFlight = settle(api.delete("k", "in-flight"));
        const close = calls.window("k");
        const started = settle(api.tryCreate("k", "started", 1));
        const other = settle(api.delete("other-key", "x"));
        open.splice(0).forEach((end) => end());
        await Promise.all([inFlight, started, other]);
        const later = settle(api.create("k", "after"));
        const during = close();
        open.splice(0).forEach((end) => end());
        await later;
        // Assess: the create started before the window closed counts, the delete that ended before it opened does not.
        assert.deepEqual(during, { creates: 2, deletes: 1 });
        assert.deepEqual(calls.window("k")(), NO_CALLS);
    });

    it("in the same-table placement one Query reads both: no call is allowed for", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("k", "a");
        between(fixture, () => fixture.client.delete("k", "a"));
        const { observation, during } = await fixture.observeDuring("k");
        assert.deepEqual([observation.bestEffort, observation.live, during], [0, 0, NO_CALLS]);
        fixture.close();
    });
});
