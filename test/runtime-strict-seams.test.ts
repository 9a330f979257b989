/**
 * Strict mode where a backfill, the heal, another writer and a client delete meet (DynamoDB Local, no faults).
 * Each case is a reproduction of a seam where the bound `live client items <= best-effort <= limit` broke.
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { backfill } from "../runtime/backfill";
import { HybridCounterClient } from "../runtime/client";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey } from "../runtime/config";
import { healKey } from "../runtime/heal";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

const WINDOW_MS = 600_000;

describe("strict mode where backfill, heal, other writers and deletes meet (DynamoDB Local)", function () {
    this.timeout(120_000);
    const engine = useEngine();

    async function strictFixture(): Promise<{ fixture: CounterFixture; client: HybridCounterClient }> {
        const fixture = await counterFixture(engine(), {
            mode: "strict",
            placement: "separate",
            layout: { selection: { kind: "sortKeyPrefix", prefix: "o" } },
        });
        const client = new HybridCounterClient({
            ...fixture.layout,
            tableName: fixture.tableName,
            countersTableName: fixture.countersTableName,
            dynamodb: fixture.clientDynamo,
            mode: "strict",
        });
        return { fixture, client };
    }

    const otherPut = (fixture: CounterFixture, id: string) =>
        fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: { pk: { S: "k" }, sk: { S: id } } }));
    const otherDelete = (fixture: CounterFixture, id: string) =>
        fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: "k" }, sk: { S: id } } }));
    /** A heal whose clock reads the window past now: every write of this test is older than it. */
    const healLater = (fixture: CounterFixture) =>
        healKey("k", {
            config: fixture.config,
            dynamodb: fixture.reader,
            mode: "strict",
            quietWindowMs: WINDOW_MS,
            now: () => Date.now() + WINDOW_MS + 1,
        });

    it("a strict backfill's units heal once their items are gone: its best-effort write lists the key on the heal index", async () => {
        // Prepare: 5 items from before the counter, backfilled in strict mode.
        const { fixture, client } = await strictFixture();
        const ids = ["o1", "o2", "o3", "o4", "o5"];
        for (const id of ids) {
            await otherPut(fixture, id);
        }
        const report = await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "strict", segments: 1 });
        const bestEffort = await fixture.reader.send(
            new GetItemCommand({
                TableName: fixture.countersTableName,
                Key: { pk: { S: "k" }, sk: { S: bestEffortSortKey(fixture.config) } },
                ConsistentRead: true,
            }),
        );

        // Act: another writer (or TTL) deletes them all; the settler heals the key once it is quiet.
        for (const id of ids) {
            await otherDelete(fixture, id);
        }
        const healed = await healLater(fixture);
        const created = await client.tryCreate("k", "o9", 5);

        // Assess
        assert.equal(report.total.counted, 5);
        assert.equal(bestEffort.Item?.count?.N, "5");
        assert.ok(bestEffort.Item?.[A.writtenAt]?.N !== undefined, "the backfill's write carries its time");
        assert.ok(bestEffort.Item?.[A.healShard]?.S !== undefined, "and puts the key on the heal index");
        assert.deepEqual([healed.outcome, healed.before, healed.after], ["healed", 5, 0]);
        assert.equal(created.created, true, "the limit counts the one live item, not the 5 gone ones");
        fixture.close();
    });

    it("a strict backfill adds no unit for an item carrying the client's token: its reserve already holds one", async () => {
        // Prepare: the client creates 3 items; the consumer has not counted them yet.
        const { fixture, client } = await strictFixture();
        for (const id of ["o1", "o2", "o3"]) {
            assert.equal((await client.tryCreate("k", id, 10)).created, true);
        }

        // Act: a strict backfill meets them first.
        const report = await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "strict", segments: 1 });
        const afterBackfill = (await client.count("k")).bestEffort;
        await fixture.emulator.drain();
        const observed = await fixture.observe("k");

        // Assess: each item holds one unit, and the eventual count is exact.
        assert.equal(report.total.counted, 3);
        assert.equal(afterBackfill, 3);
        assert.equal(observed.bestEffort, 3);
        assert.equal(observed.eventual, 3);
        fixture.close();
    });
});
