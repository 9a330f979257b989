/**
 * A put attempt that lands after its life was deleted and removed (issue 19, item 10a), staged by hand on
 * DynamoDB Local: the client's first put attempt is recorded as it is sent, the call and a delete run to the
 * end, and the very same PutItem (same item, same token, same condition) is then sent again, as DynamoDB
 * would apply an attempt the SDK had given up on. The consumer must remove that item, not count it, and
 * neither counter may move.
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand, type PutItemCommandInput } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { landAgain, recordPuts } from "./support/put-attempts";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import type { CounterMode } from "../runtime/client/client";
import { backfill } from "../runtime/backfill/backfill";
import { reconcileKey } from "../runtime/heal/reconcile";
import type { FatalMessage } from "../runtime/stream/fatal";

/** The late attempt: the exact request the client sent first, applied by DynamoDB now. */
async function land(fixture: CounterFixture, attempt: PutItemCommandInput): Promise<void> {
    await landAgain(fixture.reader, attempt);
}

async function itemOf(fixture: CounterFixture, key: string, id: string) {
    const read = await fixture.reader.send(
        new GetItemCommand({ TableName: fixture.tableName, Key: { pk: { S: key }, sk: { S: id } }, ConsistentRead: true }),
    );
    return read.Item;
}

async function created(fixture: CounterFixture, mode: CounterMode, key: string, id: string): Promise<boolean> {
    return mode === "strict" ? (await fixture.client.tryCreate(key, id, 5)).created : (await fixture.client.create(key, id)).created;
}

describe("a put attempt that lands after its life was removed", () => {
    const engine = useEngine();

    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode}: the consumer removes the late item instead of counting it, and neither counter moves`, async () => {
            // Prepare: create x, count it, delete it, let the consumer remove it.
            const fixture = await counterFixture(engine(), { mode, placement: "separate" });
            const puts = recordPuts(fixture.clientDynamo);
            assert.equal(await created(fixture, mode, "k", "x"), true);
            await fixture.emulator.drain();
            assert.deepEqual(await fixture.client.delete("k", "x"), { deleted: true });
            await fixture.emulator.drain();
            assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });

            // Act: the first attempt lands now; the consumer reads its record.
            await land(fixture, puts[0]!);
            assert.notEqual(await itemOf(fixture, "k", "x"), undefined, "the late attempt wrote the item again");
            await fixture.emulator.drain();

            // Assess: the deleted resource does not come back, and both counters stay right.
            assert.equal(await itemOf(fixture, "k", "x"), undefined);
            assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
            assert.deepEqual(await fixture.client.count("k"), { bestEffort: 0, eventual: 0, value: 0 });
            // The id is free again, and its next life counts as any other.
            assert.equal(await created(fixture, mode, "k", "x"), true);
            await fixture.emulator.drain();
            assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 1, eventual: 1, live: 1, counted: 1, softDeleted: 0 });
            fixture.close();
        });
    }

    it("a hard delete and the late attempt in one batch: the batch itself shows the life was removed", async () => {
        // Prepare: x counted; the table's TTL (a hard delete nobody calls) removes it; the first attempt lands.
        const fixture = await counterFixture(engine(), { placement: "separate" });
        const puts = recordPuts(fixture.clientDynamo);
        await fixture.client.create("k", "x");
        await fixture.emulator.drain();
        await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: "k" }, sk: { S: "x" } } }));
        await land(fixture, puts[0]!);

        // Act: one batch holds the REMOVE and the late INSERT.
        await fixture.emulator.drain();

        // Assess: removed, not counted. Best-effort keeps the unit of a life another writer ended, until a heal.
        assert.equal(await itemOf(fixture, "k", "x"), undefined);
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 1, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        fixture.close();
    });

    it("reconcile does not count a late item whose life the marker says was removed, and the consumer then removes it", async () => {
        // Prepare: x created, deleted and removed; the first attempt lands; the consumer has not read it yet.
        const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate" });
        const parked: FatalMessage[] = [];
        const fatal = { park: async (m: FatalMessage) => (parked.push(m), true) };
        const puts = recordPuts(fixture.clientDynamo);
        await fixture.client.tryCreate("k", "x", 5);
        await fixture.emulator.drain();
        await fixture.client.delete("k", "x");
        await fixture.emulator.drain();
        await land(fixture, puts[0]!);

        // Act
        const reconciled = await reconcileKey("k", { config: fixture.config, dynamodb: fixture.consumerDynamo, fatal });
        const afterReconcile = await fixture.snapshot("k");
        await fixture.emulator.drain();

        // Assess
        assert.equal(reconciled.incomplete, false);
        assert.equal(afterReconcile.eventual, 0, "reconcile counted a removed life");
        assert.equal(await itemOf(fixture, "k", "x"), undefined);
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        assert.deepEqual(parked, []);
        fixture.close();
    });

    it("a first INSERT after a backfill wrote its life on the marker is counted, not taken for a late put", async () => {
        // Prepare: the backfill reaches x before the consumer reads its INSERT; its marker names x's life (hc_life)
        // without a stream record behind it (no hc_life_seq, hc_seq zero).
        const fixture = await counterFixture(engine(), { placement: "separate" });
        await fixture.client.create("k", "x");
        const report = await backfill({ config: fixture.config, dynamodb: fixture.consumerDynamo, runId: "early" });
        assert.equal(report.thisCall.counted, 1);

        // Act
        await fixture.emulator.drain();

        // Assess
        assert.notEqual(await itemOf(fixture, "k", "x"), undefined);
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 1, eventual: 1, live: 1, counted: 1, softDeleted: 0 });
        fixture.close();
    });

    it("an item without the client's token has no life: another writer's put, delete and put again counts", async () => {
        // Prepare: a sort-key-prefix selection counts another writer's plain items.
        const fixture = await counterFixture(engine(), {
            placement: "separate",
            layout: { selection: { kind: "sortKeyPrefix", prefix: "i" } },
        });
        const put = new PutItemCommand({ TableName: fixture.tableName, Item: { pk: { S: "k" }, sk: { S: "i1" } } });
        await fixture.reader.send(put);
        await fixture.emulator.drain();
        await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: "k" }, sk: { S: "i1" } } }));
        await fixture.emulator.drain();

        // Act
        await fixture.reader.send(put);
        await fixture.emulator.drain();

        // Assess
        assert.notEqual(await itemOf(fixture, "k", "i1"), undefined);
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 0, eventual: 1, live: 1, counted: 1, softDeleted: 0 });
        fixture.close();
    });
});
