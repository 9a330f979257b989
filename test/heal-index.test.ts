/**
 * Who lists a key on the heal index (runtime/heal/index-marks.ts), on DynamoDB Local with the consumer applying the
 * stream: no call that keeps best-effort exact, a call whose best-effort write failed, the consumer for a change the
 * client did not make; and a mark made while a heal runs outlives the heal.
 */
import { strict as assert } from "node:assert";
import { DeleteItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { itemOf, listedAt } from "./support/heal-probes";
import { refuseRequests, Traffic } from "./support/heal-traffic";
import { healKey } from "../runtime/heal/heal";

describe("who lists a key on the heal index (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture;
    let settler: DynamoDBClient | undefined;

    afterEach(() => {
        f?.close();
        settler?.destroy();
        settler = undefined;
    });

    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode}: creates and deletes that keep best-effort exact list nothing, after the consumer too`, async () => {
            f = await counterFixture(engine(), { mode });
            await f.client.create("k", "a");
            await f.client.create("k", "b");
            await f.drain();
            const afterCreates = await listedAt(f, "k");
            f.clock.advance(2 * f.config.periodMs); // old lives: the consumer removes their tombstones at once

            await f.client.delete("k", "a");
            await f.drain();

            assert.equal(afterCreates, undefined);
            assert.equal(await listedAt(f, "k"), undefined);
            assert.equal(await itemOf(f, "k", "a"), undefined, "the consumer removed the old life's tombstone");
            const s = await f.snapshot("k");
            assert.deepEqual([s.bestEffort, s.eventual, s.live], [1, 1, 1]);
        });

        it(`${mode}: a ${mode === "strict" ? "release" : "+1"} that failed lists the key when its call ends`, async () => {
            f = await counterFixture(engine(), { mode });
            await f.client.create("k", "a");
            refuseRequests(f.clientDynamo, f.config, (label) => label === (mode === "strict" ? "-1" : "+1"));
            const before = Date.now();

            await (mode === "strict" ? f.client.delete("k", "a") : f.client.create("k", "b"));

            const listed = await listedAt(f, "k");
            assert.ok(listed !== undefined && listed >= before && listed <= Date.now(), `listed at ${listed}`);
        });

        it(`${mode}: the consumer lists the key when another writer removes a client life`, async () => {
            f = await counterFixture(engine(), { mode });
            await f.client.create("k", "a");
            await f.drain();
            f.clock.advance(2 * f.config.periodMs);

            await f.reader.send(new DeleteItemCommand({ TableName: f.config.tableName, Key: { pk: { S: "k" }, sk: { S: "a" } } }));
            await f.drain();

            assert.ok((await listedAt(f, "k")) !== undefined);
            const healed = await f.heal("k");
            assert.deepEqual([healed.drift, (await f.snapshot("k")).bestEffort, await listedAt(f, "k")], [1, 0, undefined]);
        });
    }

    it("a mark made while a heal runs outlives the heal: the heal takes the key off the index only on the mark it read", async () => {
        f = await counterFixture(engine(), { mode: "utilization" });
        refuseRequests(f.clientDynamo, f.config, (label) => label === "+1");
        await f.client.create("k", "a");
        const first = await listedAt(f, "k");
        f.clock.advance(2 * f.config.periodMs);
        settler = engine().dynamodb();
        const traffic = new Traffic(f.config);
        traffic.watch(settler, "settler");
        const healing = traffic.run(() => healKey("k", { config: f.config, dynamodb: settler! }));
        const relist = await traffic.until("relist", "settler");

        await f.client.create("k", "b"); // its +1 refused too: the call marks the key again
        const second = await listedAt(f, "k");
        await traffic.release(relist);
        await traffic.drain(); // the SDK may send the refused relist again (it corrects the clock the test moved)
        const healed = await healing;

        assert.ok(first !== undefined && second !== undefined && second > first);
        assert.equal(healed.drift, 1, "the heal counted a, old");
        const relists = traffic.log.filter((e) => e.label === "relist");
        assert.deepEqual(
            relists.map((e) => e.error),
            relists.map(() => "ConditionalCheckFailedException"),
        );
        assert.equal(await listedAt(f, "k"), second, "b's mark stayed");
    });
});
