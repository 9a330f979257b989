/**
 * The stream path under faults, end to end on DynamoDB Local: concurrent creates and deletes over several keys through
 * the client, the mapping delivering while they run, and faults of every kind (a transaction conflict, throttling, a
 * 500 before the request is served, a 500 after it committed) injected into the client's and the consumer's requests.
 * Once the stream has drained and the first DLQ is redriven, each key's eventual count is its live items. The stream
 * path does not read the counter's mode (the records of either mode's calls are puts, claims and soft deletes), so one
 * mode is run.
 */
import { strict as assert } from "node:assert";
import { FAULT_KINDS } from "../local/engine/faults";
import { runWorkload } from "../local/harness/workload";
import { counterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

const KEYS = ["k0", "k1", "k2", "k3", "k4", "k5"];

describe("the stream path under injected faults (DynamoDB Local)", function () {
    const engine = useEngine();

    it("10% faults of every kind on both sides while the mapping delivers: each key's eventual count ends at its live items, and no call fails", async () => {
        // Prepare
        const f = await counterFixture(engine(), { clientFaults: { rate: 0.1, seed: 31 }, consumerFaults: { rate: 0.1, seed: 131 } });
        try {
            let done = false;
            const delivering = (async () => {
                while (!done) {
                    await f.emulator.drain();
                }
            })();

            // Act
            const result = await runWorkload(f.client, { ops: 300, keys: KEYS, concurrency: 6, deleteRatio: 0.35, seed: 31 });
            done = true;
            await delivering;
            await f.drain();
            await f.redriveAll();

            // Assess
            assert.deepEqual(result.apiErrors, []);
            for (const kind of FAULT_KINDS) {
                assert.ok(f.consumerFaults!.injected[kind] > 0, `the consumer met ${kind} faults`);
            }
            let live = 0;
            for (const key of KEYS) {
                const snapshot = await f.snapshot(key);
                assert.deepEqual(
                    { key, eventual: snapshot.eventual, counted: snapshot.counted },
                    { key, eventual: snapshot.live, counted: snapshot.live },
                );
                live += snapshot.live;
            }
            assert.equal(live, result.created - result.deleted);
            assert.deepEqual(f.fatal, []);
        } finally {
            f.close();
        }
    });
});
