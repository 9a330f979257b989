/**
 * Strict mode on DynamoDB Local: the unit a strict backfill adds to best-effort for an item another
 * writer put (its marker flagged hc_be) is given back once, by the delete that takes the flag off the
 * marker, however many lives the id has after. The marker is per id, so the flag outlives the life it
 * was set for: a later life of the id, put by another writer, must not release a slot a second time.
 * (The model-based checker found this: `npm run fuzz -- --seeds 40 --first 1000 --ops 200`, seed 1030.)
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { backfill } from "../runtime/backfill/backfill";
import { HybridCounterClient } from "../runtime/client/client";
import { COUNTER_ATTRIBUTES, markerSortKey } from "../runtime/shared/config";
import { counterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

describe("strict mode: a backfill's unit for another writer's item is released once (DynamoDB Local)", function () {
    const engine = useEngine();

    for (const placement of ["same-table", "separate"] as const) {
        it(`${placement}: a second life of the id, put by another writer, releases nothing; the limit holds`, async () => {
            // Prepare: another writer's item, counted into best-effort by a strict backfill.
            const fixture = await counterFixture(engine(), {
                mode: "strict",
                placement,
                layout: { selection: { kind: "sortKeyPrefix", prefix: "o" } },
            });
            // The client of this placement (the fixture's own client keeps the counters in the user's table).
            const client = new HybridCounterClient({
                ...fixture.layout,
                tableName: fixture.tableName,
                countersTableName: fixture.countersTableName,
                dynamodb: fixture.clientDynamo,
                mode: "strict",
                deadlineMs: 60_000,
            });
            const put = () =>
                fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: { pk: { S: "k" }, sk: { S: "o1" } } }));
            await put();
            const report = await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "strict", segments: 1 });
            const marker = () =>
                fixture.reader.send(
                    new GetItemCommand({
                        TableName: fixture.countersTableName,
                        Key: { pk: { S: "k" }, sk: { S: markerSortKey(fixture.layout, "o1") } },
                        ConsistentRead: true,
                    }),
                );
            const backfilled = (await marker()).Item?.[COUNTER_ATTRIBUTES.beCounted]?.N;

            // Act: the client deletes it (its slot comes back); the other writer puts the id again over the
            // soft-deleted item (a new life, no unit in best-effort) and the client deletes that too; then the
            // client creates up to a limit of 1.
            const first = await client.delete("k", "o1");
            const afterFirst = (await client.count("k")).bestEffort;
            const flagAfterFirst = (await marker()).Item?.[COUNTER_ATTRIBUTES.beCounted];
            await put();
            const second = await client.delete("k", "o1");
            const afterSecond = (await client.count("k")).bestEffort;
            const creates = [await client.tryCreate("k", "o2", 1), await client.tryCreate("k", "o3", 1)];

            // Assess
            assert.equal(report.total.counted, 1);
            assert.equal(backfilled, "0", "flagged with the heal epoch it was added in");
            assert.deepEqual([first, second], [{ deleted: true }, { deleted: true }]);
            assert.equal(afterFirst, 0, "the first delete gives the backfill's unit back");
            assert.equal(afterSecond, 0, "the second life had no unit: nothing is released");
            assert.deepEqual(
                creates.map((c) => [c.created, c.reason]),
                [
                    [true, undefined],
                    [false, "limit"],
                ],
            );
            assert.equal(flagAfterFirst, undefined, "and takes hc_be off the marker");
            const observed = await fixture.observe("k");
            assert.equal(observed.clientLive, 1);
            assert.equal(observed.bestEffort, 1);
            fixture.close();
        });
    }

    it("an item another writer hard-deleted keeps its unit until a later life's delete takes it, once", async () => {
        // Prepare: a backfilled item of another writer, hard-deleted by it (the unit stays: a held slot),
        // then put again twice over (two lives after it), each deleted through the client.
        const fixture = await counterFixture(engine(), {
            mode: "strict",
            layout: { selection: { kind: "sortKeyPrefix", prefix: "o" } },
        });
        const key = { pk: { S: "k" }, sk: { S: "o1" } };
        await fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: key }));
        await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "strict", segments: 1 });
        await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: key }));
        const held = (await fixture.client.count("k")).bestEffort;

        // Act
        const released: number[] = [];
        for (let life = 0; life < 2; life++) {
            await fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: key }));
            await fixture.client.delete("k", "o1");
            released.push((await fixture.client.count("k")).bestEffort);
        }

        // Assess: the held unit comes back once, never below the client's own items (none).
        assert.equal(held, 1);
        assert.deepEqual(released, [0, 0]);
        fixture.close();
    });
});
