import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { runWorkload } from "../local/harness/workload";
import { assertExact, counterFixture, observeWhile, strictInvariant, utilizationInvariant } from "./support/counter-fixture";

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
