import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { seededRandom } from "../local/engine/faults";
import { runWorkload } from "../local/harness/workload";
import {
    assertExact,
    counterFixture,
    FATAL_QUEUE_URL,
    FIRST_DLQ_URL,
    observeWhile,
    strictInvariant,
    utilizationInvariant,
} from "./support/counter-fixture";

// Faults DynamoDB Local never produces, injected with their real shapes by SDK middleware:
// TransactionConflict, throttling, 500 before the write, and 500 after the write committed.
// These scenarios run 2,180 operations in total. Strict runs 500 (it ran 1,000): at 70% creates and 30% deletes a
// key gains 0.4 items a call, so its 8 keys reach their limit of 10 after about 200 calls and the rest of the run
// pushes at full limits under faults as the longer run did (one run refused 169 creates at the limit). Utilization keeps its 1,200: the consumer batches its records, and
// at 600 calls one run saw a single throttle and a single 500-after on the consumer's side, too few to rely on.
describe("counting under injected faults on DynamoDB Local", () => {
    const engine = useEngine();

    it("utilization, 5% faults of every kind in the API and the consumer: exact, no overcount, no API error", async () => {
        const fixture = await counterFixture(engine(), {
            clientFaults: { rate: 0.05, seed: 11 },
            consumerFaults: { rate: 0.05, seed: 12 },
        });
        const keys = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"];
        const run = runWorkload(fixture.client, { ops: 1_200, keys, concurrency: 8, deleteRatio: 0.35, seed: 3 });
        const consuming = (async () => {
            await run;
            await fixture.emulator.drain();
        })();
        const { result, violations } = await observeWhile(fixture, keys, run, utilizationInvariant);
        await consuming;

        assert.deepEqual(result.apiErrors, []);
        assert.deepEqual(violations, []);
        const injected = fixture.clientFaults!.injected;
        for (const kind of ["conflict", "throttle", "500-before", "500-after"] as const) {
            assert.ok(injected[kind] > 0, `the client saw ${kind} faults`);
            assert.ok(fixture.consumerFaults!.injected[kind] > 0, `the consumer saw ${kind} faults`);
        }
        const snapshots = await assertExact(fixture);
        assert.equal(
            [...snapshots.values()].reduce((n, s) => n + s.live, 0),
            result.created - result.deleted,
        );
        for (const [key, s] of snapshots) {
            assert.ok(s.bestEffort <= s.live, `${key}: best-effort ${s.bestEffort} <= live ${s.live}`);
        }
        assert.equal(fixture.queues.messages(FATAL_QUEUE_URL).length, 0);
        fixture.close();
    });

    it("strict, 5% faults of every kind: the limit is never exceeded, eventual exact, no API error", async () => {
        const limit = 10;
        const fixture = await counterFixture(engine(), {
            mode: "strict",
            clientFaults: { rate: 0.05, seed: 21 },
            consumerFaults: { rate: 0.05, seed: 22 },
        });
        const keys = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"];
        const run = runWorkload(fixture.client, { ops: 500, keys, concurrency: 8, deleteRatio: 0.3, limit, seed: 4 });
        const { result, violations } = await observeWhile(fixture, keys, run, strictInvariant(limit));
        await fixture.emulator.drain();

        assert.deepEqual(result.apiErrors, []);
        assert.deepEqual(violations, []);
        assert.ok(result.limitRejected > 0);
        const snapshots = await assertExact(fixture);
        for (const [key, s] of snapshots) {
            assert.ok(s.live <= limit, `${key}: live ${s.live} <= ${limit}`);
            assert.ok(s.bestEffort >= s.live, `${key}: best-effort ${s.bestEffort} >= live ${s.live}`);
        }
        fixture.close();
    });

    it("a handler that crashes after committing, before returning, is redelivered and counts nothing twice", async () => {
        const crash = seededRandom(31);
        let crashes = 0;
        const fixture = await counterFixture(engine(), {
            settings: { batchSize: 25 },
            wrapInvoke: (invoke) => async (event) => {
                const response = await invoke(event);
                if (crash() < 0.4) {
                    crashes++;
                    throw new Error("the function crashed after its transactions committed");
                }
                return response;
            },
        });
        const keys = ["c0", "c1", "c2"];
        const result = await runWorkload(fixture.client, { ops: 400, keys, concurrency: 6, deleteRatio: 0.3, seed: 5 });
        await fixture.emulator.drain();

        assert.ok(crashes > 0);
        assert.ok(fixture.emulator.stats.functionErrors === crashes);
        assert.deepEqual(result.apiErrors, []);
        await assertExact(fixture);
        assert.equal(fixture.queues.messages(FIRST_DLQ_URL).length, 0);
        fixture.close();
    });

    it("batches that exhaust their retries go to the first DLQ as metadata, and the redrive counts them", async () => {
        const fixture = await counterFixture(engine(), {
            settings: { batchSize: 20, maximumRetryAttempts: 1 },
            functionTimeoutMs: 3_500,
            consumerFaults: { rate: 1, kinds: ["conflict"], seed: 41 },
        });
        const keys = ["d0", "d1"];
        // 80 calls (it ran 200): every invocation spends its whole budget on conflicts before it fails, so the test
        // waits about 3 s per invocation; 80 calls still make several batches of 20 to dead-letter and redrive.
        const result = await runWorkload(fixture.client, { ops: 80, keys, concurrency: 4, deleteRatio: 0.3, seed: 6 });
        await fixture.emulator.drain();
        const dead = fixture.queues.messages(FIRST_DLQ_URL).length;
        assert.ok(dead > 0, "batches were dead-lettered");
        const before = await fixture.snapshot("d0");
        assert.equal(before.eventual, 0, "nothing was counted while the consumer failed");

        fixture.consumerFaults!.rate = 0;
        // SQS hands a message the redrive could not finish within its budget back to it, up to the
        // first DLQ's maxReceiveCount (5) before moving it on to the fatal queue.
        let redriven = 0;
        for (let receive = 0; receive < 5 && fixture.queues.messages(FIRST_DLQ_URL).length > 0; receive++) {
            redriven += await fixture.redriveAll();
        }

        assert.equal(redriven, dead);
        assert.equal(fixture.queues.messages(FIRST_DLQ_URL).length, 0);
        assert.deepEqual(result.apiErrors, []);
        // The redrive's hard deletes and flag flips are themselves on the stream; they count nothing.
        await fixture.emulator.drain();
        await assertExact(fixture);
        fixture.close();
    });
});
